"""The file tools through the whole service: a model reads, edits and is approved; the guards hold."""

from __future__ import annotations

import pytest

from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration


def read(path: str) -> ToolCall:
    return ToolCall("read_file", {"path": path})


def edit(path: str, old: str, new: str) -> ToolCall:
    return ToolCall("edit_file", {"path": path, "old_string": old, "new_string": new})


def test_read_and_edit_in_one_batch_is_approved_and_the_file_is_changed(api, model, open_socket, workdir):
    (workdir / "app.py").write_text("def greet():\n    return 'hello'\n")
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[read("app.py"), edit("app.py", "'hello'", "'hello, world'")]))
    model.enqueue(Reply(text="changed the greeting"))
    turn_id = api.send(ws_id, "make it greet the world")
    reading, editing = sock.wait_type("approve_request", timeout=60)["items"]
    assert reading["func_name"] == "read_file" and reading["needs_approval"] is False
    assert editing["func_name"] == "edit_file" and editing["needs_approval"] is True
    assert editing["error"] is None
    assert "-    return 'hello'\n+    return 'hello, world'" in editing["preview"]
    assert (workdir / "app.py").read_text() == "def greet():\n    return 'hello'\n"  # not before approval
    assert api.approve(ws_id, approved=True).status_code == 200
    read_result = sock.wait_type("tool_result", call_id=reading["call_id"])
    edit_result = sock.wait_type("tool_result", call_id=editing["call_id"])
    # Calls on one file run in the order the model gave them: the read sees the file before the edit.
    assert read_result["output"] == "   1\tdef greet():\n   2\t    return 'hello'"
    assert (
        edit_result["output"] == "Edited app.py: replaced 1 occurrence at line 2."
        and not edit_result["is_error"]
    )
    sock.wait_turn_end(turn_id)
    assert (workdir / "app.py").read_text() == "def greet():\n    return 'hello, world'\n"
    tools = {t["function"]["name"]: t["function"] for t in model.history[0].body["tools"]}
    assert {"read_file", "write_file", "edit_file", "diff_file", "search"} <= set(tools)
    assert str(workdir) in tools["edit_file"]["description"]  # cwd_note


def test_edit_of_an_unread_file_is_refused_without_asking(api, model, open_socket, workdir):
    (workdir / "notes.txt").write_text("draft\n")
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[edit("notes.txt", "draft", "final")]))
    model.enqueue(Reply(text="I will read it first"))
    turn_id = api.send(ws_id, "finalise the notes")
    result = sock.wait_type("tool_result", timeout=60)
    assert result["output"] == "Error: must read_file notes.txt before editing it" and result["is_error"]
    sock.wait_turn_end(turn_id)
    assert not sock.of_type("approve_request")
    assert (workdir / "notes.txt").read_text() == "draft\n"
    assert model.history[-1].body["messages"][-1]["content"] == result["output"]


def test_edit_whose_file_changed_before_approval_is_refused_and_the_file_untouched(
    api, model, open_socket, workdir
):
    target = workdir / "config.ini"
    target.write_text("mode = slow\n")
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[read("config.ini"), edit("config.ini", "mode = slow", "mode = fast")]))
    model.enqueue(Reply(text="the file changed under me"))
    turn_id = api.send(ws_id, "speed it up")
    _reading, editing = sock.wait_type("approve_request", timeout=60)["items"]
    target.write_text("mode = careful\n")  # someone else changes it while the person decides
    assert api.approve(ws_id, approved=True).status_code == 200
    result = sock.wait_type("tool_result", call_id=editing["call_id"])
    assert result["is_error"]
    assert result["output"].startswith("Error: config.ini changed after this edit was prepared")
    sock.wait_turn_end(turn_id)
    assert target.read_text() == "mode = careful\n"


def test_the_read_set_is_kept_with_the_workstream_between_turns(api, model, open_socket, workdir):
    (workdir / "todo.md").write_text("- [ ] ship\n")
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[read("todo.md")]))
    model.enqueue(Reply(text="read it"))
    sock.wait_turn_end(api.send(ws_id, "look at the list"))
    model.enqueue(Reply(tool_calls=[edit("todo.md", "[ ]", "[x]")]))
    model.enqueue(Reply(text="ticked"))
    second = api.send(ws_id, "tick it off")
    item = sock.wait_for(lambda e: e.get("type") == "approve_request" and e.get("turn_id") == second)[
        "items"
    ][0]
    assert item["error"] is None
    api.approve(ws_id, approved=True)
    sock.wait_turn_end(second)
    assert (workdir / "todo.md").read_text() == "- [x] ship\n"


# Text that stored arguments hold as given: what the model sent, the person saw and the file gets
# are the same bytes (the approved call runs with the arguments read back from the database).
TRICKY = (
    "literal \\x00 and \\u0000 stay text\r\n"
    "U+FFFD \ufffd, an emoji \U0001f600, combining e\u0301, CJK \u6f22\u5b57\n"
    "controls \x01\x08\x1b[31mred\x1b[0m\x7f, separators \u2028\u2029, BOM \ufeff\n"
    "quotes \" ' ` and backslashes \\ \\\\ \\n\t tab\n"
)


def test_an_approved_write_puts_exactly_the_sent_text_in_the_file(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("write_file", {"path": "tricky.txt", "content": TRICKY})]))
    model.enqueue(Reply(text="written"))
    turn_id = api.send(ws_id, "write the tricky file")
    [item] = sock.wait_type("approve_request", timeout=60)["items"]
    assert item["needs_approval"] is True and TRICKY.rstrip("\n") in item["preview"]
    assert api.approve(ws_id, approved=True).status_code == 200
    result = sock.wait_type("tool_result", call_id=item["call_id"])
    size = len(TRICKY.encode())
    assert result["output"] == f"Wrote {size:,} bytes to tricky.txt (new file)" and not result["is_error"]
    sock.wait_turn_end(turn_id)
    assert (workdir / "tricky.txt").read_bytes() == TRICKY.encode()


def test_a_nul_or_a_lone_surrogate_in_file_text_is_refused_without_asking_and_nothing_written(
    api, model, open_socket, workdir
):
    (workdir / "f.txt").write_text("one\n")
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    calls = [
        ToolCall("write_file", {"path": "nul.bin", "content": "a\u0000b"}),
        ToolCall("write_file", {"path": "half.txt", "content": "x\ud800y"}),
        read("f.txt"),
        edit("f.txt", "one", "o\u0000e"),
    ]
    model.enqueue(Reply(tool_calls=calls))
    model.enqueue(Reply(text="I will use bash for binary content"))
    turn_id = api.send(ws_id, "write the binary file")
    sock.wait_turn_end(turn_id, timeout=60)
    errors = sorted(e["output"] for e in sock.of_type("tool_result") if e["is_error"])
    assert len(errors) == 3
    assert errors[0].startswith("Error: 'content' contains a NUL character; write_file handles text only")
    assert errors[1].startswith(
        "Error: 'content' contains a lone surrogate (U+D800), which is not a character"
    )
    assert errors[2].startswith("Error: 'new_string' contains a NUL character; edit_file handles text only")
    assert not [i for e in sock.of_type("approve_request") for i in e["items"] if i["needs_approval"]]
    assert sorted(p.name for p in workdir.iterdir()) == ["f.txt"]
    assert (workdir / "f.txt").read_text() == "one\n"
