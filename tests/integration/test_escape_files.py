"""Escapes through the file tools, tried as a model would through the running service: each row
is a call the model makes and what the user then sees (an "Error: ..." naming the rule, nothing of
the target in the result or in what the model is sent, the target unchanged)."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes.model_server import Reply, ToolCall
from tests.integration.services import API_TOKEN, MODEL_KEY, Services

pytestmark = pytest.mark.integration

NEVER = "is never opened by the file tools"
OUTSIDE_READ = "is outside the folders the file tools may read"
OUTSIDE_FOLDER = "is outside the workstream's folder"
DATA_ROOT = "service's data folder"
HARD_LINKS = "hard links, and the file tools do not open such a file"
SWAPPED_OUT = "which leads to"
SECRET_TEXT = "text that must stay outside"
OTHER_TEXT = "the other workstream's plan"


@dataclass
class Place:
    """A workstream's folder (as its summary gives it), another workstream's, and files outside
    both that the test plants as a command in the folder would: a link out, a hard link."""

    ws_id: str
    folder: Path
    other_file: Path
    outside: Path  # a file outside every root, beside the folder's parent
    tag: str


@pytest.fixture
def place(api, tmp_path: Path) -> Place:
    mine, other = api.create_workstream(), api.create_workstream()
    folder = Path(api.workstream(mine)["working_dir"])
    other_folder = Path(api.workstream(other)["working_dir"])
    if folder == other_folder:
        # Every workstream of these services shares one folder until each is given its own;
        # till then the test gives two their own.
        (tmp_path / "mine").mkdir()
        (tmp_path / "other").mkdir()
        mine = api.create_workstream(working_dir=str(tmp_path / "mine"))
        other = api.create_workstream(working_dir=str(tmp_path / "other"))
        folder = Path(api.workstream(mine)["working_dir"])
        other_folder = Path(api.workstream(other)["working_dir"])
    tag = uuid.uuid4().hex[:8]  # the services' folders outlive a test: names of its own
    other_file = other_folder / f"plan-{tag}.txt"
    other_file.write_text(f"{OTHER_TEXT}\n")
    outside_dir = folder.parent / f"outside-{tag}"
    outside_dir.mkdir()
    outside = outside_dir / "secret.txt"
    outside.write_text(f"{SECRET_TEXT}\n")
    return Place(mine, folder, other_file, outside, tag)


@dataclass(frozen=True)
class Row:
    what: str
    call: ToolCall
    rule: str | tuple[str, ...]  # in the "Error: ..." the user sees (one of them)

    def is_named(self, output: str) -> bool:
        rules = (self.rule,) if isinstance(self.rule, str) else self.rule
        return any(rule in output for rule in rules)


# Where the test's outside files and another workstream's folder lie depends on the services'
# layout (each workstream's folder in the data root, or folders the test makes): either way the
# user is told which rule refused them.
ELSEWHERE_READ = (OUTSIDE_READ, DATA_ROOT)
ELSEWHERE_WRITE = (OUTSIDE_FOLDER, DATA_ROOT)


def run_batch(api, model, open_socket, ws_id: str, rows: list[Row]) -> dict[str, dict]:
    """The model makes every row's call in one reply; each call's result, by row."""
    sock = open_socket(ws_id)
    calls = [ToolCall(r.call.name, r.call.arguments, id=f"call_{n}") for n, r in enumerate(rows)]
    model.enqueue(Reply(tool_calls=calls))
    model.enqueue(Reply(text="none of that worked"))
    turn_id = api.send(ws_id, "try to get out")
    sock.wait_turn_end(turn_id, timeout=90)
    # Refused before anyone is asked: nothing of it was put to a person.
    asked = [i for e in sock.of_type("approve_request") for i in e["items"] if i["needs_approval"]]
    assert asked == []
    assert not sock.of_type("preview")
    results = {e["call_id"]: e for e in sock.of_type("tool_result")}
    return {r.what: results[f"call_{n}"] for n, r in enumerate(rows)}


def assert_refused(results: dict[str, dict], rows: list[Row], model, *leaks: str) -> None:
    sent = str(model.history[-1].body["messages"])  # what the model was given back
    for row in rows:
        result = results[row.what]
        assert result["is_error"], (row.what, result["output"])
        assert result["output"].startswith("Error: ") and row.is_named(result["output"]), (row.what, result)
        for leak in leaks:
            assert leak not in result["output"], row.what
    for leak in leaks:
        assert leak not in sent


def test_the_service_itself_and_another_workstream_are_out_of_reach(
    api, model, open_socket, place: Place, services: Services
):
    worker_pid = services.processes["worker"].pid
    up_to_other = os.path.relpath(place.other_file, place.folder)
    rows = [
        Row("worker environ", ToolCall("read_file", {"path": f"/proc/{worker_pid}/environ"}), NEVER),
        Row("own environ", ToolCall("read_file", {"path": "/proc/self/environ"}), NEVER),
        Row("config file", ToolCall("read_file", {"path": services.env["TURNSTONE_CONFIG"]}), NEVER),
        Row("other's file by path", ToolCall("read_file", {"path": str(place.other_file)}), ELSEWHERE_READ),
        Row("other's file by ..", ToolCall("read_file", {"path": up_to_other}), ELSEWHERE_READ),
        Row(
            "other's, diffed", ToolCall("diff_file", {"path_a": up_to_other, "content_b": ""}), ELSEWHERE_READ
        ),
        Row(
            "search outside",
            ToolCall("search", {"query": "e", "path": str(place.outside.parent)}),
            ELSEWHERE_READ,
        ),
        Row(
            "write into the other folder",
            ToolCall("write_file", {"path": up_to_other, "content": "mine now\n"}),
            ELSEWHERE_WRITE,
        ),
    ]
    if services.db.backend == "sqlite":
        database = services.db.url.removeprefix("sqlite:///")
        rows.append(Row("database file", ToolCall("read_file", {"path": database}), NEVER))
        rows.append(Row("database by search", ToolCall("search", {"query": "ws_", "path": database}), NEVER))
    results = run_batch(api, model, open_socket, place.ws_id, rows)
    assert_refused(results, rows, model, MODEL_KEY, API_TOKEN, OTHER_TEXT, SECRET_TEXT, "[tools]")
    assert "the kernel's views of the host (/proc, /sys)" in results["worker environ"]["output"]
    assert place.other_file.read_text() == f"{OTHER_TEXT}\n"


def test_a_link_planted_in_the_folder_is_not_followed_out(api, model, open_socket, place: Place):
    link = place.folder / f"link-{place.tag}"
    link.symlink_to(place.outside)  # as `ln -s` in an approved command would
    (place.folder / f"peek-{place.tag}").symlink_to(place.outside.parent)
    name = link.name
    rows = [
        Row("read_file", ToolCall("read_file", {"path": name}), SWAPPED_OUT),
        Row("write_file", ToolCall("write_file", {"path": name, "content": "pwned\n"}), ELSEWHERE_WRITE),
        Row(
            "write_file append",
            ToolCall("write_file", {"path": name, "content": "pwned\n", "mode": "append"}),
            ELSEWHERE_WRITE,
        ),
        Row(
            "edit_file",
            ToolCall("edit_file", {"path": name, "old_string": "text", "new_string": "x"}),
            SWAPPED_OUT,
        ),
        Row("diff_file", ToolCall("diff_file", {"path_a": name, "content_b": "x\n"}), SWAPPED_OUT),
        Row("open_preview", ToolCall("open_preview", {"target": name}), OUTSIDE_FOLDER),
        Row(
            "search through it",
            ToolCall("search", {"query": "must", "path": f"peek-{place.tag}"}),
            SWAPPED_OUT,
        ),
    ]
    results = run_batch(api, model, open_socket, place.ws_id, rows)
    assert_refused(results, rows, model, SECRET_TEXT)
    assert place.outside.read_text() == f"{SECRET_TEXT}\n"
    assert sorted(p.name for p in place.outside.parent.iterdir()) == ["secret.txt"]


def test_search_over_a_folder_holding_a_link_out_finds_only_what_is_inside(
    api, model, open_socket, place: Place
):
    (place.folder / f"peek-{place.tag}").symlink_to(place.outside.parent)
    (place.folder / f"mine-{place.tag}.txt").write_text(f"must find {place.tag}\n")
    ws = place.ws_id
    sock = open_socket(ws)
    model.enqueue(Reply(tool_calls=[ToolCall("search", {"query": f"must|{place.tag}"})]))
    model.enqueue(Reply(text="found it"))
    sock.wait_turn_end(api.send(ws, "search"), timeout=90)
    result = sock.wait_type("tool_result")
    assert not result["is_error"]
    assert f"mine-{place.tag}.txt:1: must find {place.tag}" in result["output"].splitlines()
    assert SECRET_TEXT not in result["output"]


def test_a_hard_link_to_a_file_outside_is_neither_read_nor_written(api, model, open_socket, place: Place):
    linked = place.folder / f"hard-{place.tag}.txt"
    os.link(place.outside, linked)  # same filesystem: the outside file sits beside the folder's parent
    name = linked.name
    rows = [
        Row("read_file", ToolCall("read_file", {"path": name}), HARD_LINKS),
        Row("write_file", ToolCall("write_file", {"path": name, "content": "pwned\n"}), HARD_LINKS),
        Row(
            "write_file append",
            ToolCall("write_file", {"path": name, "content": "pwned\n", "mode": "append"}),
            HARD_LINKS,
        ),
        Row("diff_file", ToolCall("diff_file", {"path_a": name, "content_b": ""}), HARD_LINKS),
        Row("open_preview", ToolCall("open_preview", {"target": name}), HARD_LINKS),
    ]
    results = run_batch(api, model, open_socket, place.ws_id, rows)
    assert_refused(results, rows, model, SECRET_TEXT)
    assert place.outside.read_text() == f"{SECRET_TEXT}\n"


def test_a_file_holding_the_model_key_is_read_with_the_key_redacted(api, model, open_socket, place: Place):
    name = f"leak-{place.tag}.env"
    (place.folder / name).write_text(f"OPENAI_API_KEY={MODEL_KEY}\nTOKEN={API_TOKEN}\nplain line\n")
    ws = place.ws_id
    sock = open_socket(ws)
    calls = [
        ToolCall("read_file", {"path": name}, id="read"),
        ToolCall("search", {"query": "KEY|TOKEN", "path": name}, id="search"),
    ]
    model.enqueue(Reply(tool_calls=calls))
    model.enqueue(Reply(text="read it"))
    sock.wait_turn_end(api.send(ws, "read the env file"), timeout=90)
    read, found = (
        sock.wait_type("tool_result", call_id="read"),
        sock.wait_type("tool_result", call_id="search"),
    )
    assert read["output"] == "   1\tOPENAI_API_KEY=[redacted]\n   2\tTOKEN=[redacted]\n   3\tplain line"
    assert found["output"] == f"{name}:1: OPENAI_API_KEY=[redacted]\n{name}:2: TOKEN=[redacted]"
    assert MODEL_KEY not in str(model.history[-1].body["messages"])
    history = str(api.history(ws))
    assert MODEL_KEY not in history and API_TOKEN not in history


def test_a_link_planted_while_a_write_awaits_approval_is_not_followed(api, model, open_socket, place: Place):
    target = place.folder / f"draft-{place.tag}.txt"
    target.write_text("draft text\n")
    name = target.name
    ws = place.ws_id
    sock = open_socket(ws)
    calls = [
        ToolCall("read_file", {"path": name}, id="read"),
        ToolCall("edit_file", {"path": name, "old_string": "draft", "new_string": "final"}, id="edit"),
        ToolCall("write_file", {"path": name, "content": "pwned\n", "mode": "append"}, id="append"),
    ]
    model.enqueue(Reply(tool_calls=calls))
    model.enqueue(Reply(text="done"))
    turn_id = api.send(ws, "finish the draft")
    items = sock.wait_type("approve_request", timeout=60)["items"]
    assert [i["needs_approval"] for i in items] == [False, True, True]
    # While the person decides, a command in the folder swaps the file for a link out.
    target.unlink()
    target.symlink_to(place.outside)
    assert api.approve(ws, approved=True).status_code == 200
    sock.wait_turn_end(turn_id, timeout=90)
    for call_id in ("edit", "append"):
        result = sock.wait_type("tool_result", call_id=call_id)
        assert result["is_error"] and result["output"].startswith(f"Error: {name} (which leads to"), result
        assert SECRET_TEXT not in result["output"]
    assert place.outside.read_text() == f"{SECRET_TEXT}\n"
