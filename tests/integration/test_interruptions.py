"""A call found running by a later attempt of its batch: never run again, and its result says
what happened to it, as far as the service can tell (the engine in-process, SQLite and
PostgreSQL, a real Redis, the fake model server; the worker deaths are rows as they left them)."""

from __future__ import annotations

import socket
import subprocess

import pytest
from sqlalchemy import update
from sqlmodel import col, select

from app.engine.life import approvals, calls, interruptions, turns, workstreams
from app.engine.running import model_step, tool_batch
from app.runtime import Runtime
from app.storage.models import CallStatus, Message, utcnow
from app.storage.models import ToolCall as StoredCall
from tests.fakes.model_server import Reply, ToolCall
from tests.integration.storage import runtime

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgresql"])
def rt(request, tmp_path, model_server):
    yield from runtime(request.param, tmp_path, model_server)


def gone_runner() -> str:
    """The runner of a worker process of this host that has exited."""
    ended = subprocess.Popen(["true"])
    ended.wait()
    return f"{socket.gethostname()}:{ended.pid}"


def approved_call(rt: Runtime, model_server, tool: ToolCall, workdir) -> tuple[str, StoredCall]:  # type: ignore[no-untyped-def]
    """A turn whose one call a person approved: its batch is sent, and not yet run."""
    ws = workstreams.create(rt, name="interrupted", working_dir=str(workdir))
    turn = turns.send(rt, ws.id, "run it")
    model_server.enqueue(Reply(tool_calls=[tool]))
    model_step.run(rt, turn.id, 0)
    approvals.decide(rt, ws.id, approvals.Decision(approved=True))
    with rt.db.session() as s:
        [row] = s.exec(select(StoredCall).where(StoredCall.turn_id == turn.id)).all()
    assert row.status == CallStatus.APPROVED
    return turn.id, row


def found_running(rt: Runtime, turn_id: str, row: StoredCall, runner: str, group: int | None) -> StoredCall:
    """What a worker that started the call left behind, then the batch run again: the call."""
    with rt.db.session() as s:
        s.exec(
            update(StoredCall)
            .where(col(StoredCall.id) == row.id)
            .values(status=CallStatus.RUNNING, started_at=utcnow(), runner=runner, process_group=group)
        )
    tool_batch.run(rt, turn_id, 0)
    with rt.db.session() as s:
        ended = s.get(StoredCall, row.id)
        [answer] = s.exec(select(Message).where(Message.turn_id == turn_id, Message.role == "tool")).all()
    assert ended is not None and answer.content == ended.output and answer.is_error
    return ended


BASH = ToolCall("bash", {"command": "echo ran >> runs"})
WRITE = ToolCall("write_file", {"path": "runs", "content": "ran"})

CASES = {
    "a command whose worker died before starting it": (BASH, "gone", None, interruptions.NEVER_STARTED),
    "a command whose worker died while it ran": (BASH, "gone", 4242, interruptions.STOPPED_WITH_WORKER),
    "a command whose result this worker lost": (BASH, "this", 4242, interruptions.RESULT_LOST),
    "a command this worker never started": (BASH, "this", None, interruptions.NEVER_STARTED),
    "a command of a worker on another host": (BASH, "elsewhere", 4242, interruptions.WORKER_UNANSWERING),
    "a file write whose worker died": (WRITE, "gone", None, interruptions.UNKNOWN),
    "a file write whose result this worker lost": (WRITE, "this", None, interruptions.FAULT),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_an_interrupted_call_says_what_happened_to_it_and_never_runs_again(rt, model_server, tmp_path, case):
    tool, runner, group, said = CASES[case]
    runners = {"gone": gone_runner(), "this": interruptions.RUNNER, "elsewhere": "another-host:1"}
    turn_id, row = approved_call(rt, model_server, tool, tmp_path)
    ended = found_running(rt, turn_id, row, runners[runner], group)
    assert (ended.status, ended.output, ended.is_error) == (CallStatus.INTERRUPTED, said, True)
    assert ended.process_group is None
    assert not (tmp_path / "runs").exists()  # not run again


def test_a_running_command_is_recorded_as_started_and_its_result_clears_that(
    rt, model_server, tmp_path, monkeypatch
):
    turn_id, row = approved_call(
        rt, model_server, ToolCall("bash", {"command": "sleep 0.5; echo ran"}), tmp_path
    )
    seen: list[tuple[int | None, int]] = []  # (the row's group just after it was noted, the group)
    note = calls.note_process

    def noted(rt_: Runtime, row_: StoredCall, group: int) -> None:
        note(rt_, row_, group)
        with rt.db.session() as s:
            seen.append((s.get(StoredCall, row.id).process_group, group))  # type: ignore[union-attr]

    monkeypatch.setattr(calls, "note_process", noted)
    tool_batch.run(rt, turn_id, 0)
    [(recorded, group)] = seen
    assert recorded == group and group > 1
    with rt.db.session() as s:
        ended = s.get(StoredCall, row.id)
    assert ended is not None and (ended.status, ended.output, ended.process_group) == (
        CallStatus.DONE,
        "ran",
        None,
    )
