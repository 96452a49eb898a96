"""The watch tool's prepare phase: what needs approval, and every refusal as an error item."""

from __future__ import annotations

import pytest

from app.engine.conversation.stored import for_model
from app.storage.models import Message
from app.tools import watch
from app.tools.core.base import ToolContext

LS = {"action": "create", "command": "ls", "name": "x"}


def prepare(tmp_path, **args):  # type: ignore[no-untyped-def]
    return watch.prepare(args, ToolContext(ws_id="ws", working_dir=str(tmp_path)))


def test_create_needs_approval_and_shows_the_schedule(tmp_path):
    prep = prepare(tmp_path, action="create", name="pr", command="gh pr view 1", stop_on="'MERGED' in output")
    assert prep.error is None and prep.needs_approval is True
    assert prep.header == "watch pr: $ gh pr view 1"
    assert prep.preview == "gh pr view 1\n(every 5m, until 'MERGED' in output, at most 100 polls)"
    assert prep.args == {
        "action": "create",
        "name": "pr",
        "command": "gh pr view 1",
        "poll_every": "5m",
        "stop_on": "'MERGED' in output",
        "max_polls": 100,
    }


def test_list_and_cancel_run_without_asking(tmp_path):
    assert prepare(tmp_path, action="list").needs_approval is False
    prep = prepare(tmp_path, action="cancel", name="pr")
    assert (
        prep.error is None
        and prep.needs_approval is False
        and prep.args == {"action": "cancel", "name": "pr"}
    )


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"action": "watch"}, "'action' must be one of create, list, cancel"),
        ({"action": None}, "'action' must be one of"),
        ({"action": ["create"]}, "'action' must be one of"),
        ({"action": "create", "name": "x"}, "needs 'command'"),
        ({"action": "create", "command": "ls"}, "needs 'name'"),
        ({"action": "create", "command": "ls", "name": "   "}, "needs 'name'"),
        ({"action": "create", "command": 5, "name": "x"}, "needs 'command'"),
        (
            {"action": "create", "command": "ls", "name": "x" * 201},
            "'name' is 201 characters; the limit is 200",
        ),
        ({"action": "create", "command": "ls", "name": "a\x00b"}, "'name' must not contain a NUL"),
        ({"action": "create", "command": "ls \ud800", "name": "x"}, "lone surrogate"),
        ({**LS, "poll_every": "5s"}, "from 10s to 24h"),
        ({**LS, "poll_every": "2d"}, "not a duration"),
        ({**LS, "poll_every": 30}, "must be a string"),
        (
            {**LS, "max_polls": 0},
            "'max_polls' must be from 1 to 10000",
        ),
        ({**LS, "max_polls": 10**12}, "from 1 to 10000"),
        ({**LS, "max_polls": True}, "whole number"),
        ({**LS, "max_polls": "5"}, "whole number"),
        ({**LS, "stop_on": "__import__('os')"}, "may not call"),
        ({**LS, "stop_on": "2**10**10"}, "power is too large"),
        ({**LS, "stop_on": {"a": 1}}, "needs 'stop_on'"),
        (
            {"action": "create", "command": "rm -rf /", "name": "x"},
            "Blocked: command matches dangerous pattern",
        ),
        ({"action": "cancel"}, "needs 'name'"),
        ({"action": "cancel", "name": "x" * 10_000}, "the limit is 200"),
    ],
)
def test_refusals_are_error_items_saying_the_limit(tmp_path, args, error):
    prep = prepare(tmp_path, **args)
    assert prep.needs_approval is False and prep.error is not None
    assert error in prep.error


def test_a_commands_nul_is_dropped_as_bash_drops_it(tmp_path):
    prep = prepare(tmp_path, action="create", name="x", command="echo a\x00b")
    assert prep.error is None and prep.args["command"] == "echo ab"


def row(id_: int, role: str, **fields):  # type: ignore[no-untyped-def]
    return Message(id=id_, ws_id="ws", role=role, **fields)


def test_a_held_watch_message_stored_mid_batch_reaches_the_model_after_the_results():
    calls = [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}},
             {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]  # fmt: skip
    rows = [
        row(1, "user", content="hi", turn_id="t"),
        row(2, "assistant", content="", tool_calls=calls, turn_id="t"),
        row(3, "tool", content="one", tool_call_id="c1", turn_id="t"),
        row(4, "user", content="[watch 'x' fired]", origin="watch"),
        row(5, "tool", content="two", tool_call_id="c2", turn_id="t"),
        row(6, "assistant", content="done", turn_id="t"),
    ]
    sent = for_model("sys", rows)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "user", "assistant"]
    assert sent[5]["content"] == "[watch 'x' fired]"
