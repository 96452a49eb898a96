"""Interleavings that timing alone would rarely show, injected into the engine run in-process
against a real database (SQLite and PostgreSQL), a real Redis and the fake model server."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
import redis
from sqlalchemy import event, text, update
from sqlmodel import col, select

from app import redis_keys
from app.engine.conversation import prompt
from app.engine.life import approvals, asked, calls, cancel, turns, workstreams
from app.engine.publishing import outbox
from app.engine.running import chain, handoff, model_step, sweeper, tool_batch
from app.engine.running.heartbeats import THREAD_NAME as HEARTBEATS
from app.engine.running.leases import claim
from app.engine.running.recovery import fail_turn
from app.events import EventType, Fence
from app.runtime import Runtime
from app.storage.database import ONE_STATEMENT_OPTION, READ_ONLY_OPTION
from app.storage.models import CallStatus, Message, Turn, TurnPhase, TurnStatus, Workstream, WorkstreamState
from app.storage.models import ToolCall as StoredCall
from app.taskqueue import MODEL_QUEUE, MODEL_STEP_TASK, QUEUES, TOOL_BATCH_TASK
from app.tools.core.base import ToolOutcome
from app.tools.core.pipeline import PreparedCall
from tests.fakes.model_server import Reply, ToolCall
from tests.integration.storage import runtime

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgresql"])
def rt(request, tmp_path, model_server):
    yield from runtime(request.param, tmp_path, model_server, stale_after_seconds=0.3)


def new_turn(rt: Runtime, message: str = "hi", name: str = "ws") -> tuple[str, str]:
    ws = workstreams.create(rt, name=name)
    turn = turns.send(rt, ws.id, message)
    return ws.id, turn.id


def load(rt: Runtime, model, key):  # type: ignore[no-untyped-def]
    with rt.db.session() as s:
        return s.get(model, key)


def event_types(rt: Runtime, ws_id: str) -> list[tuple[str, str | None]]:
    events, _ = rt.events.replay(ws_id, 0)
    return [(e["type"], e.get("state")) for e in events]


def test_the_system_prompt_shows_a_section_a_runtime_adds(rt, model_server):
    rt.prompt_sections.append(lambda ctx: f"Notes for {ctx.workstream.name}: answer in one line.")
    ws_id, turn_id = new_turn(rt, name="alpha")
    model_server.enqueue(Reply(text="ok"))
    model_step.run(rt, turn_id, 0)
    system = model_server.history[0].body["messages"][0]
    assert system["role"] == "system"
    assert "Notes for alpha: answer in one line." in system["content"]
    assert system["content"].index("working directory") < system["content"].index("Notes for alpha")
    assert load(rt, Turn, turn_id).status == TurnStatus.DONE


def test_prompt_sections_that_say_nothing_leave_no_gap(rt):
    ws = workstreams.create(rt, name="beta")
    from app.tools.core import toolset

    ctx = prompt.PromptContext(ws, toolset.ToolSet("interactive"), rt.settings)
    text = prompt.build(ctx, [prompt.identity, lambda _c: None, lambda _c: "  ", prompt.working_directory])
    assert text == f"{prompt.identity(ctx)}\n\nYour working directory is {ws.working_dir}."


def test_a_cancel_after_the_stream_ends_and_before_the_reply_is_stored_ends_the_turn(
    rt, model_server, monkeypatch
):
    ws_id, turn_id = new_turn(rt, "run something")
    queued = turns.send(rt, ws_id, "and then this")
    assert queued.status == TurnStatus.QUEUED
    model_server.enqueue(Reply(tool_calls=[ToolCall("bash", "echo hi")]))
    prepare_all = model_step._prepare_all

    def cancel_lands_now(*args, **kwargs):  # type: ignore[no-untyped-def]
        cancel.cancel(rt, ws_id)  # accepted with 202: the step is past its last cancel check
        return prepare_all(*args, **kwargs)

    monkeypatch.setattr(model_step, "_prepare_all", cancel_lands_now)
    model_step.run(rt, turn_id, 0)
    assert load(rt, Turn, turn_id).status == TurnStatus.CANCELLED
    ws = load(rt, Workstream, ws_id)
    assert ws.active_turn_id == queued.id and ws.state == WorkstreamState.THINKING  # the next one runs
    assert workstreams.describe(rt, ws_id)["pending_approvals"] == []
    with rt.db.session() as s:
        answer = s.exec(select(Message).where(Message.role == "assistant")).first()
    assert answer is not None and answer.tool_calls is None  # no call left without its result


def test_a_queued_turn_that_starts_while_it_is_withdrawn_is_cancelled_as_the_running_one(
    rt, model_server, monkeypatch
):
    ws_id, first = new_turn(rt, "first")
    queued = turns.send(rt, ws_id, "second")
    withdraw = cancel._withdraw

    def first_ends_now(*args, **kwargs):  # type: ignore[no-untyped-def]
        # Between the cancel's read (queued) and its withdrawal, the first turn ends and the
        # queued one starts: the withdrawal finds nothing queued.
        model_server.enqueue(Reply(text="done"))
        model_step.run(rt, first, 0)
        assert load(rt, Turn, queued.id).status == TurnStatus.ACTIVE
        return withdraw(*args, **kwargs)

    monkeypatch.setattr(cancel, "_withdraw", first_ends_now)
    done = cancel.cancel(rt, ws_id, turn_id=queued.id)
    assert done == cancel.Cancelled(queued.id, ended=False)  # asked to stop, as a running turn is
    assert load(rt, Turn, queued.id).cancel_requested is True
    model_step.run(rt, queued.id, 0)  # its step sees the request and ends it before asking the model
    assert load(rt, Turn, queued.id).status == TurnStatus.CANCELLED
    assert ("cancelled", None) in event_types(rt, ws_id)
    assert len(model_server.history) == 1


def commits_by_itself(conn) -> bool:  # type: ignore[no-untyped-def]
    """A write of one statement on PostgreSQL (`Database.one_statement`): no COMMIT follows it."""
    return bool(conn.get_execution_options().get(ONE_STATEMENT_OPTION))


class Statements:
    """What the engine asks the database from here on: each write transaction's statements, in
    order (a statement as its verb and, for a write, its table; BEGIN left out; a statement that
    commits by itself is a transaction of its own), and the readers'. The claims' heartbeats,
    on a thread of their own, are left out: they beat when they will."""

    def __init__(self, rt: Runtime) -> None:
        self.writes: list[list[str]] = [[]]
        self.reads: list[str] = []
        event.listen(rt.db.engine, "before_cursor_execute", self._note)
        event.listen(rt.db.engine, "commit", lambda _conn: self.writes.append([]))

    def _note(self, conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        if statement.startswith("BEGIN") or threading.current_thread().name == HEARTBEATS:
            return
        words = statement.split()
        what = {"UPDATE": f"UPDATE {words[1]}", "INSERT": f"INSERT {words[2]}"}.get(words[0], words[0])
        if conn.get_execution_options().get(READ_ONLY_OPTION):
            self.reads.append(what)
        elif commits_by_itself(conn):
            self.writes.extend([[what], []])
        else:
            self.writes[-1].append(what)

    def committed(self) -> list[list[str]]:
        return [group for group in self.writes if group]


class WriteTransactions:
    """How many write transactions the engine commits from here on: each COMMIT, and each
    statement that commits by itself."""

    def __init__(self, rt: Runtime) -> None:
        self.count = 0
        event.listen(rt.db.engine, "commit", lambda _conn: self._add())
        event.listen(
            rt.db.engine, "before_cursor_execute", lambda conn, *_a: self._add(commits_by_itself(conn))
        )

    def _add(self, counted: bool = True) -> None:
        if counted and threading.current_thread().name != HEARTBEATS:
            self.count += 1


def test_a_send_to_an_idle_workstream_stores_and_starts_its_turn_in_as_few_round_trips_as_it_takes(rt):
    ws = workstreams.create(rt, name="quick")
    asked = Statements(rt)
    commits: list[str] = []
    event.listen(rt.db.engine, "commit", lambda _conn: commits.append("commit"))
    sent = turns.send(rt, ws.id, "hello")
    # the workstream taken (idle, nothing queued on it), the turn and its message stored: on
    # PostgreSQL as one statement that commits by itself (no BEGIN, no COMMIT), on SQLite as
    # three in one transaction
    if rt.db.is_postgresql:
        assert (asked.committed(), commits) == ([["WITH"]], [])
    else:
        assert asked.committed() == [["UPDATE workstreams", "INSERT turns", "INSERT messages"]]
    assert sent.status == TurnStatus.ACTIVE
    with rt.db.session() as s:
        stored = s.exec(select(Message).where(Message.ws_id == ws.id)).all()
    assert [(m.role, m.content, m.turn_id, m.origin, m.is_error) for m in stored] == [
        ("user", "hello", sent.id, None, False)
    ]
    turn = load(rt, Turn, sent.id)
    assert (turn.status, turn.phase, turn.attempt) == (TurnStatus.ACTIVE, TurnPhase.MODEL, 0)
    assert turn.started_at is not None and turn.enqueued_at is not None
    stored = load(rt, Workstream, ws.id)
    assert stored.active_turn_id == sent.id and stored.state == WorkstreamState.THINKING
    assert event_types(rt, ws.id)[-2:] == [("message", None), ("state_change", "thinking")]


def test_rows_stored_without_the_orm_read_back_whole_with_their_defaults(rt, model_server):
    # The send's turn and message and the answer are inserted on the session's connection
    # (insert_row, the started-turn insert): what the ORM would have filled in is there too.
    before = datetime.now(UTC) - timedelta(seconds=1)
    ws_id, turn_id = new_turn(rt, "a question", name="defaults")
    model_server.enqueue(Reply(text="an answer"))
    model_step.run(rt, turn_id, 0)
    turn = load(rt, Turn, turn_id)
    assert (turn.message, turn.origin, turn.step, turn.cancel_requested) == ("a question", "user", 0, False)
    assert before <= as_utc(turn.created_at) <= as_utc(turn.started_at) <= as_utc(turn.ended_at)
    with rt.db.session() as s:
        rows = s.exec(select(Message).where(Message.ws_id == ws_id).order_by(col(Message.id))).all()
    assert [(m.role, m.content, m.turn_id, m.is_error, m.origin) for m in rows] == [
        ("user", "a question", turn_id, False, None),
        ("assistant", "an answer", turn_id, False, None),
    ]
    assert all(before <= as_utc(m.created_at) for m in rows) and rows[1].usage is not None


def as_utc(moment: datetime | None) -> datetime:
    assert moment is not None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def test_a_plain_answer_is_read_for_and_stored_in_as_few_statements_as_it_takes(rt, model_server):
    ws_id, turn_id = new_turn(rt, name="plain")
    model_server.enqueue(Reply(text="hello"))
    asked = Statements(rt)
    model_step.run(rt, turn_id, 0)
    reads, writes = list(asked.reads), asked.committed()
    assert load(rt, Turn, turn_id).status == TurnStatus.DONE
    assert reads == ["SELECT"] * 3  # the turn with its workstream, the conversation, memories
    # the claim; then the turn ended under its fence, its workstream freed (saying what follows:
    # a parent to answer, sub-agents to stop, a queued turn) and the answer stored: on
    # PostgreSQL as one statement committing by itself, on SQLite as one transaction
    ended = ["WITH"] if rt.db.is_postgresql else ["UPDATE turns", "UPDATE workstreams", "INSERT messages"]
    assert writes == [["UPDATE turns"], ended]
    assert load(rt, Workstream, ws_id).state == WorkstreamState.IDLE
    turn = load(rt, Turn, turn_id)
    assert (turn.phase, turn.heartbeat_at, turn.error) == (TurnPhase.FINISHED, None, None)
    assert event_types(rt, ws_id)[-2:] == [("stream_end", None), ("state_change", "idle")]


def test_a_plain_answer_with_a_turn_queued_behind_it_starts_that_turn(rt, model_server):
    ws = workstreams.create(rt, name="queue")
    first, second = turns.send(rt, ws.id, "first"), turns.send(rt, ws.id, "second")
    model_server.enqueue(Reply(text="one"))
    asked = Statements(rt)
    model_step.run(rt, first.id, 0)
    if rt.db.is_postgresql:  # the one-statement end said a turn was queued
        assert ["WITH"] in asked.committed()
    assert load(rt, Turn, first.id).status == TurnStatus.DONE
    assert load(rt, Turn, second.id).status == TurnStatus.ACTIVE
    assert load(rt, Workstream, ws.id).active_turn_id == second.id


def answered_as(rt: Runtime, fence, ws_id: str, out: outbox.Outbox | None = None) -> tuple[bool, list[str]]:
    """`turns.end_with_answer` for `fence`: whether it ended the turn, and the events it left."""
    out = out or outbox.Outbox(ws_id)
    answer = {
        "content": "the answer",
        "reasoning": None,
        "usage": {"total_tokens": 3},
        "server_blocks": None,
        "model": None,  # the model that answered, when a fallback did (docs/providers.md)
    }
    ws = load(rt, Workstream, ws_id)
    return turns.end_with_answer(rt, out, fence, ws, answer), [e.type for e in out.events]


def assistant_messages(rt: Runtime, ws_id: str) -> list[Message]:
    with rt.db.session() as s:
        return list(s.exec(select(Message).where(Message.ws_id == ws_id, Message.role == "assistant")).all())


@pytest.mark.parametrize("with_child", [False, True])
def test_the_end_of_an_answer_stores_it_whole(rt, with_child):
    ws_id, turn_id = new_turn(rt, name="one statement")
    if with_child:  # a sub-agent it started: stopped (if still running) once the end is out
        with rt.db.session() as s:
            s.add(Workstream(id="child", name="c", working_dir="/", kind="task", parent_turn_id=turn_id))
    claimed = claim(rt, turn_id, TurnPhase.MODEL, 0)
    assert claimed is not None
    out = outbox.Outbox(ws_id)
    ended, events = answered_as(rt, claimed[0], ws_id, out)
    assert ended and events == [EventType.STATE_CHANGE]
    assert len(out.actions) == (1 if with_child else 0)
    [answer] = assistant_messages(rt, ws_id)
    assert (answer.content, answer.turn_id, answer.usage, answer.tool_calls, answer.is_error) == (
        "the answer",
        turn_id,
        {"total_tokens": 3},
        None,
        False,
    )
    turn = load(rt, Turn, turn_id)
    assert (turn.status, turn.phase, turn.heartbeat_at, turn.ended_at is not None) == (
        TurnStatus.DONE,
        TurnPhase.FINISHED,
        None,
        True,
    )
    ws = load(rt, Workstream, ws_id)
    assert (ws.active_turn_id, ws.state) == (None, WorkstreamState.IDLE)


@pytest.mark.parametrize("case", ["superseded", "cancel asked", "a sub-agent's answer"])
def test_the_end_of_an_answer_in_a_transition_of_its_own_writes_nothing_unless_it_may(rt, case):
    ws_id, turn_id = new_turn(rt, name=case)
    claimed = claim(rt, turn_id, TurnPhase.MODEL, 0)
    assert claimed is not None
    fence = claimed[0]
    with rt.db.session() as s:
        if case == "superseded":
            s.exec(update(Turn).where(col(Turn.id) == turn_id).values(attempt=Turn.attempt + 1))
        elif case == "cancel asked":
            s.exec(update(Turn).where(col(Turn.id) == turn_id).values(cancel_requested=True))
        else:  # its answer is recorded for the parent's call in the same transaction
            child = update(Workstream).where(col(Workstream.id) == ws_id)
            s.exec(child.values(kind="task", parent_call_row=1))
    assert answered_as(rt, fence, ws_id) == (False, [])
    assert assistant_messages(rt, ws_id) == []
    assert load(rt, Turn, turn_id).status == TurnStatus.ACTIVE
    assert load(rt, Workstream, ws_id).active_turn_id == turn_id


def started_batch(rt: Runtime, model_server, name: str) -> tuple[str, str, Fence, StoredCall]:  # type: ignore[no-untyped-def]
    """A turn whose model step asked for one auto-approved bash call and handed its batch on to
    this task: the batch's claim and the call, stored running, that the batch is to run."""
    ws = workstreams.create(rt, name=name, auto_approve=True)
    turn = turns.send(rt, ws.id, "run it")
    model_server.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo one"})]))
    rt.queue.local_queues = frozenset(QUEUES)  # a worker that consumes every queue
    with handoff.keeping(turn.id) as kept:
        model_step.run(rt, turn.id, 0)
    assert kept.task == TOOL_BATCH_TASK and kept.claim is not None and kept.started is not None
    return ws.id, turn.id, kept.claim, kept.started.row


def ended_at_once(  # type: ignore[no-untyped-def]
    rt: Runtime, claim: Fence, row: StoredCall, outcome: ToolOutcome, step: int = 0, keep: bool = True
):
    """The end of the batch of `step` when it goes on (`tool_batch._hand_on`): what it returned,
    and its events."""
    out = outbox.Outbox(row.ws_id)
    ws = load(rt, Workstream, row.ws_id)
    with handoff.keeping(claim.turn_id) if keep else contextlib.nullcontext():
        handed = tool_batch._hand_on(rt, out, claim, ws, step, set(), (row, outcome))
    return handed, [(e.type, e.fields.get("state")) for e in out.events]


def tool_messages(rt: Runtime, turn_id: str) -> list[Message]:
    with rt.db.session() as s:
        return list(s.exec(select(Message).where(Message.turn_id == turn_id, Message.role == "tool")).all())


@pytest.mark.parametrize(("keep", "is_error"), [(True, False), (False, False), (True, True)])
def test_the_end_at_once_of_a_batch_stores_its_call_and_hands_the_turn_on(rt, model_server, keep, is_error):
    ws_id, turn_id, claim, row = started_batch(rt, model_server, "one statement")
    handed, events = ended_at_once(rt, claim, row, ToolOutcome("one\n", is_error), keep=keep)
    call = load(rt, StoredCall, row.id)
    assert handed == tool_batch.HandedOn(1, Fence(turn_id, claim.attempt + 1) if keep else None)
    assert events == [(EventType.TOOL_RESULT, None), (EventType.STATE_CHANGE, WorkstreamState.THINKING)]
    stored = (call.status, call.output, call.is_error, call.process_group)
    assert stored == (CallStatus.DONE, "one\n", is_error, None)
    assert call.finished_at is not None and (row.status, row.output) == (CallStatus.DONE, "one\n")
    [answer] = tool_messages(rt, turn_id)
    assert (answer.content, answer.tool_call_id, answer.name, answer.is_error, answer.ws_id) == (
        "one\n",
        row.call_id,
        "bash",
        is_error,
        ws_id,
    )
    turn = load(rt, Turn, turn_id)
    assert (turn.status, turn.phase, turn.step) == (TurnStatus.ACTIVE, TurnPhase.MODEL, 1)
    if keep:  # claimed for this task, as `leases.hand_on` claims it
        assert (turn.attempt, turn.step_claims, turn.heartbeat_at is not None) == (claim.attempt + 1, 1, True)
    else:  # let go, for the task sent to claim
        assert (turn.attempt, turn.step_claims, turn.heartbeat_at) == (claim.attempt, 0, None)
    assert turn.enqueued_at is not None and turn.phase_started_at is not None
    assert load(rt, Workstream, ws_id).state == WorkstreamState.THINKING


DECLINED = ["superseded", "cancel asked", "another step"]


def test_the_end_of_a_batch_answers_its_call_then_says_the_feedback_given(rt, model_server):
    ws_id, turn_id, claim, row = started_batch(rt, model_server, "feedback")
    with rt.db.session() as s:
        s.exec(update(Turn).where(col(Turn.id) == turn_id).values(feedback="and then say so"))
    handed, _events = ended_at_once(rt, claim, row, ToolOutcome("one\n", False))
    assert handed is not None
    with rt.db.session() as s:
        said = s.exec(select(Message).where(Message.turn_id == turn_id).order_by(col(Message.id))).all()
    assert [(m.role, m.content) for m in said][-2:] == [("tool", "one\n"), ("user", "and then say so")]
    assert load(rt, Turn, turn_id).feedback is None


def test_the_end_of_a_batch_whose_call_something_else_ended_keeps_that_end(rt, model_server):
    ws_id, turn_id, claim, row = started_batch(rt, model_server, "ended elsewhere")
    ended = {"status": CallStatus.DONE, "output": "from elsewhere"}
    with rt.db.session() as s:
        s.exec(update(StoredCall).where(col(StoredCall.id) == row.id).values(**ended))
    tool_batch._advance(rt, claim, load(rt, Workstream, ws_id), 0, set(), (row, ToolOutcome("one\n", False)))
    assert load(rt, Turn, turn_id).phase == TurnPhase.MODEL
    [answer] = tool_messages(rt, turn_id)
    assert answer.content == "from elsewhere"
    assert load(rt, StoredCall, row.id).output == "from elsewhere"


@pytest.mark.parametrize("case", DECLINED)
def test_the_end_of_a_batch_goes_on_only_under_its_fence_at_its_step_with_no_cancel(rt, model_server, case):
    ws_id, turn_id, claim, row = started_batch(rt, model_server, case)
    changed = update(Turn).where(col(Turn.id) == turn_id)
    with rt.db.session() as s:
        if case == "superseded":
            s.exec(changed.values(attempt=Turn.attempt + 1))
        elif case == "cancel asked":
            s.exec(changed.values(cancel_requested=True))
    before = load(rt, Turn, turn_id)
    step = 1 if case == "another step" else 0
    assert ended_at_once(rt, claim, row, ToolOutcome("one\n", False), step=step) == (None, [])
    call = load(rt, StoredCall, row.id)
    assert (call.output, call.finished_at) == (None, None) and tool_messages(rt, turn_id) == []
    turn = load(rt, Turn, turn_id)
    assert (turn.phase, turn.step, turn.attempt) == (TurnPhase.TOOLS, 0, before.attempt)
    assert load(rt, Workstream, ws_id).state == WorkstreamState.RUNNING


@pytest.mark.parametrize("meanwhile", ["cancel", "call finished"])
def test_the_end_of_a_batch_waits_for_the_turn_and_then_writes_nothing_if_it_changed(
    rt, model_server, meanwhile
):
    """A writer holding the turn when the statement begins (a cancel; `calls.finish_waiting`,
    which locks the turn, then the call) commits while the statement waits: the statement sees
    what it wrote and writes nothing, not a turn handed on past a cancel or an unanswered call."""
    if not rt.db.is_postgresql:
        pytest.skip("one statement on PostgreSQL only; SQLite's writers take the whole file")
    ws_id, turn_id, claim, row = started_batch(rt, model_server, meanwhile)
    result: list[object] = []
    with rt.db.session() as s:
        s.get(Turn, turn_id, with_for_update=True)
        if meanwhile == "cancel":
            s.exec(update(Turn).where(col(Turn.id) == turn_id).values(cancel_requested=True))
        else:
            ended = {"status": CallStatus.DONE, "output": "from elsewhere"}
            s.exec(update(StoredCall).where(col(StoredCall.id) == row.id).values(**ended))
        ending = threading.Thread(
            target=lambda: result.append(ended_at_once(rt, claim, row, ToolOutcome("one\n", False)))
        )
        ending.start()
        wait_for_a_lock_wait(rt)
    ending.join(timeout=10)
    assert result == [(None, [])]
    assert tool_messages(rt, turn_id) == []
    turn = load(rt, Turn, turn_id)
    assert (turn.phase, turn.step, turn.attempt) == (TurnPhase.TOOLS, 0, claim.attempt)
    call = load(rt, StoredCall, row.id)
    assert call.status == (CallStatus.RUNNING if meanwhile == "cancel" else CallStatus.DONE)


def wait_for_a_lock_wait(rt: Runtime) -> None:
    """Return once a session of this database waits for a row lock (PostgreSQL)."""
    waiting = text(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE wait_event_type = 'Lock' AND datname = current_database()"
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with rt.db.reader() as s:
            if s.execute(waiting).scalar():
                return
        time.sleep(0.01)
    raise AssertionError("nothing waited for the turn's lock")


ASKED_BASH = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "bash", "arguments": '{"command": "echo one"}'},
}
AN_ANSWER = {
    "content": "running it",
    "reasoning": None,
    "usage": {"total_tokens": 5},
    "server_blocks": None,
    "model": None,
}


def at_the_store(rt: Runtime, name: str, auto_approve: bool = True) -> tuple[Fence, Workstream]:
    """A turn in its first model step, claimed by a worker that consumes every queue, and its
    workstream as the step read it."""
    rt.queue.local_queues = frozenset(QUEUES)
    ws = workstreams.create(rt, name=name, auto_approve=auto_approve)
    turn = turns.send(rt, ws.id, "run it")
    claimed = claim(rt, turn.id, TurnPhase.MODEL, 0)
    assert claimed is not None
    return claimed[0], load(rt, Workstream, ws.id)


def stored_at_once(  # type: ignore[no-untyped-def]
    rt: Runtime, fence: Fence, ws: Workstream, step: int = 0, keep: bool = True, needs_approval: bool = True
):
    """`asked.store` of an answer asking for `echo one`: what it returned, and its events."""
    p = PreparedCall("call_1", "bash", {"command": "echo one"}, "$ echo one", "", needs_approval)
    out = outbox.Outbox(ws.id)
    row = calls.new_row(ws, fence.turn_id, step, 0, p, "v1")
    decided = asked.Asked([row], [ASKED_BASH], sorted(ws.read_paths), None, [True])
    with handoff.keeping(fence.turn_id) if keep else contextlib.nullcontext():
        going = asked.store(rt, out, fence, ws, step, decided, AN_ANSWER)
    return going, [(e.type, e.fields.get("state")) for e in out.events]


def stored_calls(rt: Runtime, turn_id: str) -> list[StoredCall]:
    with rt.db.session() as s:
        return list(s.exec(select(StoredCall).where(StoredCall.turn_id == turn_id)).all())


@pytest.mark.parametrize(("keep", "needs_approval"), [(True, True), (False, True), (True, False)])
def test_an_answer_with_one_call_nobody_decides_is_stored_and_handed_on(rt, keep, needs_approval):
    fence, ws = at_the_store(rt, "at once", auto_approve=needs_approval)
    going, events = stored_at_once(rt, fence, ws, keep=keep, needs_approval=needs_approval)
    assert events == [(EventType.TOOL_INFO, None), (EventType.STATE_CHANGE, WorkstreamState.RUNNING)]
    [call] = stored_calls(rt, fence.turn_id)
    assert (call.call_id, call.func_name, call.args, call.header, call.catalog_version) == (
        "call_1",
        "bash",
        {"command": "echo one"},
        "$ echo one",
        "v1",
    )
    assert (call.decided_how, call.needs_approval) == ("auto" if needs_approval else None, False)
    [answer] = assistant_messages(rt, ws.id)
    assert (answer.content, answer.usage) == ("running it", {"total_tokens": 5})
    assert answer.tool_calls == [ASKED_BASH]
    turn = load(rt, Turn, fence.turn_id)
    assert (turn.phase, turn.step) == (TurnPhase.TOOLS, 0)
    assert load(rt, Workstream, ws.id).state == WorkstreamState.RUNNING
    if not keep:  # let go, for the batch task sent to claim; the call waits for it approved
        assert going == (None, None)
        assert (call.status, turn.attempt, turn.heartbeat_at) == (CallStatus.APPROVED, fence.attempt, None)
        return
    claim_, started = going
    assert claim_ == Fence(fence.turn_id, fence.attempt + 1) == Fence(turn.id, turn.attempt)
    assert (call.status, call.runner, call.started_at is not None) == (CallStatus.RUNNING, calls.RUNNER, True)
    assert (started.row.id, started.row.status) == (call.id, CallStatus.RUNNING)
    fresh = (started.ws.id, started.ws.state, started.ws.working_dir)  # the workstream as written
    assert fresh == (ws.id, WorkstreamState.RUNNING, ws.working_dir)


STORE_DECLINED = ["superseded", "cancel asked", "approval turned off", "another step"]


@pytest.mark.parametrize("case", STORE_DECLINED)
def test_an_answer_with_a_call_is_stored_only_under_its_fence_and_as_its_approval_stands(rt, case):
    fence, ws = at_the_store(rt, case)
    with rt.db.session() as s:
        turn_row = update(Turn).where(col(Turn.id) == fence.turn_id)
        if case == "superseded":
            s.exec(turn_row.values(attempt=Turn.attempt + 1))
        elif case == "cancel asked":
            s.exec(turn_row.values(cancel_requested=True))
        elif case == "approval turned off":  # while the model answered: the step read it on
            s.exec(update(Workstream).where(col(Workstream.id) == ws.id).values(auto_approve=False))
    before = load(rt, Turn, fence.turn_id)
    assert stored_at_once(rt, fence, ws, step=1 if case == "another step" else 0) == (False, [])
    assert (assistant_messages(rt, ws.id), stored_calls(rt, fence.turn_id)) == ([], [])
    turn = load(rt, Turn, fence.turn_id)
    assert (turn.phase, turn.attempt) == (TurnPhase.MODEL, before.attempt)
    assert load(rt, Workstream, ws.id).state == WorkstreamState.THINKING


@pytest.mark.parametrize("meanwhile", ["cancel", "approval turned off"])
def test_an_answer_with_a_call_waits_for_what_holds_the_turn_or_workstream(rt, meanwhile):
    """A writer holding the turn (a cancel) or the workstream (approval turned off) when the
    statement begins commits while it waits: it sees what they wrote and writes nothing."""
    if not rt.db.is_postgresql:
        pytest.skip("one statement on PostgreSQL only; SQLite's writers take the whole file")
    fence, ws = at_the_store(rt, meanwhile)
    result: list[object] = []
    with rt.db.session() as s:
        if meanwhile == "cancel":
            s.exec(update(Turn).where(col(Turn.id) == fence.turn_id).values(cancel_requested=True))
        else:
            s.exec(update(Workstream).where(col(Workstream.id) == ws.id).values(auto_approve=False))
        storing = threading.Thread(target=lambda: result.append(stored_at_once(rt, fence, ws)))
        storing.start()
        wait_for_a_lock_wait(rt)
    storing.join(timeout=10)
    assert result == [(False, [])]
    assert (assistant_messages(rt, ws.id), stored_calls(rt, fence.turn_id)) == ([], [])
    assert load(rt, Turn, fence.turn_id).phase == TurnPhase.MODEL


# A batch's end as it goes on: the turn held under its fence, the call finished, the tool
# messages, the turn handed on, the workstream `thinking` (SQLite; one statement on PostgreSQL).
BATCH_END = ["SELECT", "UPDATE tool_calls", "INSERT messages", "UPDATE turns", "UPDATE workstreams"]


def test_a_batch_of_one_call_starts_it_as_it_reads_it_and_ends_without_rereading(rt, model_server, tmp_path):
    ws = workstreams.create(rt, name="bash", auto_approve=True, working_dir=str(tmp_path))
    turn_id = turns.send(rt, ws.id, "run it").id
    model_server.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo hello"})]))
    model_step.run(rt, turn_id, 0)
    asked = Statements(rt)
    tool_batch.run(rt, turn_id, 0)
    assert asked.reads == []
    assert asked.committed() == [
        ["UPDATE turns"],  # the claim
        # under the fence: the workstream and the step's calls read, the one call started
        ["UPDATE turns", "SELECT", "SELECT", "UPDATE tool_calls"],
        ["UPDATE tool_calls"],  # its command started: its process group (calls.note_process)
        # the batch's end (`tool_batch._ends`): on PostgreSQL one statement
        ["WITH"] if rt.db.is_postgresql else BATCH_END,
    ]
    assert load(rt, Turn, turn_id).phase == TurnPhase.MODEL
    # A batch whose call read a file keeps it among the workstream's read paths.
    (tmp_path / "notes.txt").write_text("remember this\n")
    model_server.enqueue(Reply(tool_calls=[ToolCall("read_file", {"path": str(tmp_path / "notes.txt")})]))
    model_step.run(rt, turn_id, 1)
    tool_batch.run(rt, turn_id, 1)
    assert str(tmp_path / "notes.txt") in load(rt, Workstream, ws.id).read_paths


def test_a_send_to_an_idle_workstream_whose_older_turn_still_waits_queues_behind_it(rt):
    # A turn's end commits before it starts the next queued one: a send in between finds the
    # workstream idle, and must not start its own turn before the one that waited longer.
    ws = workstreams.create(rt, name="fifo")
    with rt.db.session() as s:
        s.add(Turn(id="older", ws_id=ws.id, message="first in line"))
    sent = turns.send(rt, ws.id, "second in line")
    assert sent.status == TurnStatus.QUEUED
    assert load(rt, Turn, "older").status == TurnStatus.ACTIVE
    assert load(rt, Workstream, ws.id).active_turn_id == "older"
    assert load(rt, Turn, sent.id).status == TurnStatus.QUEUED


def test_a_racing_activator_cannot_restart_a_finished_turn(rt):
    if not rt.db.is_postgresql:
        pytest.skip("SQLite runs each activation as one write-locked transaction: no race")
    ws = workstreams.create(rt, name="race")
    with rt.db.session() as s:
        s.add(Turn(id="t1", ws_id=ws.id, message="once"))
    result: list[str | None] = []
    # Another activator holds the queued turn as ours picks it, then starts it, runs it to the
    # end and frees the workstream: ours waits for it, and finds nothing left to start.
    with psycopg.connect(rt.settings.database_url) as other:
        other.execute("SELECT id FROM turns WHERE id = 't1' FOR UPDATE")
        activating = threading.Thread(target=lambda: result.append(turns.activate_next(rt, ws.id)))
        activating.start()
        wait_for_a_lock_wait(rt)
        other.execute("UPDATE turns SET status = 'done', phase = 'finished' WHERE id = 't1'")
        other.commit()
    activating.join(timeout=10)
    assert result == [None]
    assert load(rt, Turn, "t1").status == TurnStatus.DONE
    assert load(rt, Workstream, ws.id).active_turn_id is None
    assert not [m for m in rt.events.replay(ws.id, 0)[0] if m["type"] == EventType.MESSAGE]


def test_a_quick_approval_is_announced_after_the_request_it_answers(rt, model_server, monkeypatch):
    ws_id, turn_id = new_turn(rt, "run it")
    model_server.enqueue(Reply(tool_calls=[ToolCall("bash", "echo hi")]))
    visible = threading.Event()
    publish_many = rt.events.publish_many

    def slow_announcement(ws, events, **options):  # type: ignore[no-untyped-def]
        if any(e.type == EventType.APPROVE_REQUEST for e in events):
            visible.set()  # the calls are committed: a client may decide now
            time.sleep(0.3)
        return publish_many(ws, events, **options)

    monkeypatch.setattr(rt.events, "publish_many", slow_announcement)
    step = threading.Thread(target=model_step.run, args=(rt, turn_id, 0))
    step.start()
    assert visible.wait(10)
    approvals.decide(rt, ws_id, approvals.Decision(approved=True))
    step.join(10)
    order = event_types(rt, ws_id)
    assert order.index(("state_change", "attention")) < order.index(("approval_resolved", None))
    assert order.index(("approval_resolved", None)) < order.index(("state_change", "running"))


def test_fail_turn_leaves_alone_a_turn_that_a_newer_attempt_holds(rt):
    ws_id, turn_id = new_turn(rt)
    old, *_ = claim(rt, turn_id, TurnPhase.MODEL, 0)
    time.sleep(0.4)  # its worker stopped beating; the sweeper gave the step to another
    new, *_ = claim(rt, turn_id, TurnPhase.MODEL, 0)
    fail_turn(rt, old, "the old attempt crashed")
    turn = load(rt, Turn, turn_id)
    assert turn.status == TurnStatus.ACTIVE and turn.attempt == new.attempt
    fail_turn(rt, new, "the current attempt crashed")
    assert load(rt, Turn, turn_id).status == TurnStatus.ERROR


def test_a_started_turns_first_step_is_sent_before_its_events_and_its_claim_waits_for_them(rt, monkeypatch):
    ws = workstreams.create(rt, name="early")
    queued_when_published: list[int] = []
    publish_many = rt.events.publish_many

    def watched(ws_id, events, **kwargs):  # type: ignore[no-untyped-def]
        queued_when_published.append(rt.redis.llen(MODEL_QUEUE))
        return publish_many(ws_id, events, **kwargs)

    monkeypatch.setattr(rt.events, "publish_many", watched)
    turn_id = turns.send(rt, ws.id, "hi").id
    assert queued_when_published == [1]  # a worker could start while `thinking` goes out

    # A worker that takes the step while the send still holds the ordering lock (its events
    # not out yet) publishes nothing before them: its claim returns once the lock is free.
    lock = rt.redis.lock(redis_keys.ws_order(ws.id), timeout=10)
    assert lock.acquire(blocking=False)
    claimed: list[object] = []
    claimer = threading.Thread(target=lambda: claimed.append(claim(rt, turn_id, TurnPhase.MODEL, 0)))
    claimer.start()
    claimer.join(0.5)
    assert claimer.is_alive() and claimed == []
    lock.release()
    claimer.join(2)
    assert not claimer.is_alive() and claimed[0] is not None


def test_a_claim_waits_out_an_ordering_lock_no_longer_than_the_lock_lasts(rt, monkeypatch, caplog):
    ws_id, turn_id = new_turn(rt)
    monkeypatch.setattr(outbox, "ORDER_LOCK_SECONDS", 0.3)
    rt.redis.set(redis_keys.ws_order(ws_id), "a holder that died", px=60_000)
    started = time.monotonic()
    assert claim(rt, turn_id, TurnPhase.MODEL, 0) is not None
    assert 0.3 <= time.monotonic() - started < 2
    assert "ordering lock held over 0.3 s; going on" in caplog.text


def test_the_sweeper_resends_a_stalled_step_once_per_stale_period(rt):
    ws_id, turn_id = new_turn(rt)
    rt.redis.delete(MODEL_QUEUE)  # the send's own task: no worker runs here
    claim(rt, turn_id, TurnPhase.MODEL, 0)
    time.sleep(0.4)  # the claim's worker died
    assert sweeper.requeue_stale(rt) == 1
    assert sweeper.requeue_stale(rt) == 0  # already sent; not again on the next sweep
    assert rt.redis.llen(MODEL_QUEUE) == 1
    time.sleep(0.4)  # and nobody took it up
    assert sweeper.requeue_stale(rt) == 1


def test_leases_read_one_clock_whatever_the_machines_clocks_say(rt, monkeypatch):
    if not rt.db.is_postgresql:
        pytest.skip("a SQLite file is only shared by one machine's processes")
    ws_id, turn_id = new_turn(rt)
    claim(rt, turn_id, TurnPhase.MODEL, 0)

    class AnHourAhead(datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[no-untyped-def]
            return datetime.now(tz) + timedelta(hours=1)

    monkeypatch.setattr("app.storage.database.datetime", AnHourAhead)
    monkeypatch.setattr("app.storage.models.datetime", AnHourAhead)
    assert sweeper.requeue_stale(rt) == 0  # a live claim, by the database's clock


def test_a_reader_does_not_queue_behind_a_writer(rt):
    if rt.db.is_postgresql:
        pytest.skip("PostgreSQL readers never wait for writers")
    ws = workstreams.create(rt, name="busy")
    done = threading.Event()
    with rt.db.session() as writer:  # holds SQLite's write lock until it commits
        writer.exec(update(Workstream).where(col(Workstream.id) == ws.id).values(name="renamed"))

        def read() -> None:
            workstreams.describe(rt, ws.id)
            done.set()

        threading.Thread(target=read, daemon=True).start()
        assert done.wait(3), "a read waited for the writer's lock"
    assert load(rt, Workstream, ws.id).name == "renamed"


def test_text_no_database_can_store_is_stored_escaped(rt, model_server):
    ws_id, turn_id = new_turn(rt, "say something odd")
    model_server.enqueue(Reply(chunks=["nul\x00here ", "lone\ud800surrogate"]))
    model_step.run(rt, turn_id, 0)
    assert load(rt, Turn, turn_id).status == TurnStatus.DONE
    with rt.db.session() as s:
        answer = s.exec(select(Message).where(Message.role == "assistant")).first()
    assert answer.content == "nul\\x00here lone\ufffdsurrogate"


def test_a_send_whose_idempotency_key_raced_in_first_writes_nothing_and_answers_the_first(rt, monkeypatch):
    ws = workstreams.create(rt, name="raced")
    with rt.db.session() as s:  # a send with the key, stored (and done) by another request
        s.add(Turn(id="first", ws_id=ws.id, message="once", status=TurnStatus.DONE, idempotency_key="k"))
    looked_up = turns._turn_for_key
    asked: list[str] = []

    def not_yet_on_the_first_look(rt_: Runtime, ws_id: str, key: str) -> Turn | None:
        asked.append(key)
        return None if len(asked) == 1 else looked_up(rt_, ws_id, key)

    monkeypatch.setattr(turns, "_turn_for_key", not_yet_on_the_first_look)
    sent = turns.send(rt, ws.id, "once", idempotency_key="k")
    assert sent == turns.Sent("first", TurnStatus.DONE) and len(asked) == 2
    # the clash undid the whole start: the workstream was not taken, no message was stored
    stored = load(rt, Workstream, ws.id)
    assert (stored.active_turn_id, stored.state) == (None, WorkstreamState.IDLE)
    with rt.db.session() as s:
        assert s.exec(select(Message).where(Message.ws_id == ws.id)).all() == []
        assert [t.id for t in s.exec(select(Turn).where(Turn.ws_id == ws.id)).all()] == ["first"]


def test_a_passing_database_fault_leaves_the_step_to_be_run_again(rt, monkeypatch):
    from sqlalchemy.exc import OperationalError

    from app.engine.running.phases import run_phase

    ws_id, turn_id = new_turn(rt)

    def connection_lost(fence, cancelled):  # type: ignore[no-untyped-def]
        raise OperationalError("SELECT 1", {}, ConnectionError("server closed the connection"))

    run_phase(rt, turn_id, TurnPhase.MODEL, 0, connection_lost)
    turn = load(rt, Turn, turn_id)
    assert turn.status == TurnStatus.ACTIVE and turn.phase == TurnPhase.MODEL  # not failed
    time.sleep(0.4)
    assert sweeper.requeue_stale(rt) == 1  # and the sweeper sends it again


def test_a_bug_fails_the_turn_and_a_step_that_keeps_failing_stops_being_retried(rt):
    from app.engine.running.phases import MAX_PHASE_ATTEMPTS, run_phase

    ws_id, turn_id = new_turn(rt)

    def bug(fence, cancelled):  # type: ignore[no-untyped-def]
        raise ValueError("a bug")

    run_phase(rt, turn_id, TurnPhase.MODEL, 0, bug)
    assert load(rt, Turn, turn_id).status == TurnStatus.ERROR
    errors = [e for e in rt.events.replay(ws_id, 0)[0] if e["type"] == EventType.ERROR]
    assert errors[-1]["message"] == "internal error while running this turn; see the worker log"

    ws_id, turn_id = new_turn(rt, name="poison")
    ran = []

    def passing_fault(fence, cancelled):  # type: ignore[no-untyped-def]
        ran.append(fence.attempt)
        raise redis.exceptions.ConnectionError("Redis went away")

    for _ in range(MAX_PHASE_ATTEMPTS + 1):  # each attempt meets a passing fault
        run_phase(rt, turn_id, TurnPhase.MODEL, 0, passing_fault)
        with rt.db.session() as s:  # the sweeper's part: the claim has gone stale
            s.exec(update(Turn).where(col(Turn.id) == turn_id).values(heartbeat_at=None))
    assert len(ran) == MAX_PHASE_ATTEMPTS
    turn = load(rt, Turn, turn_id)
    assert turn.status == TurnStatus.ERROR
    assert (
        f"model step raised a passing fault (of the database or Redis) {MAX_PHASE_ATTEMPTS} times"
        in turn.error
    )


def test_a_step_whose_worker_is_killed_again_and_again_is_no_poison_until_the_claims_run_out(rt):
    """An operator killing workers five times in a row must not fail a healthy turn with words
    that blame the step; a step that takes its worker down every time still ends."""
    from app.engine.running.phases import MAX_PHASE_ATTEMPTS, MAX_PHASE_CLAIMS, run_phase

    _ws_id, turn_id = new_turn(rt, name="killed")
    ran = []

    def killed(fence, cancelled):  # type: ignore[no-untyped-def]
        ran.append(fence.attempt)  # and then its worker dies: nothing raised, nothing ended

    for n in range(MAX_PHASE_CLAIMS + 1):
        with rt.db.session() as s:
            s.exec(update(Turn).where(col(Turn.id) == turn_id).values(heartbeat_at=None))
        run_phase(rt, turn_id, TurnPhase.MODEL, 0, killed)
        if n == MAX_PHASE_ATTEMPTS:
            assert load(rt, Turn, turn_id).status == TurnStatus.ACTIVE  # five kills: still its turn
    assert len(ran) == MAX_PHASE_CLAIMS
    turn = load(rt, Turn, turn_id)
    assert turn.status == TurnStatus.ERROR
    assert f"started {MAX_PHASE_CLAIMS} times and its worker stopped each time" in turn.error


def test_a_step_clears_only_its_own_stream_mark(rt):
    from app import redis_keys
    from app.engine.publishing.streaming import StreamMark, history_cursor

    ws = workstreams.create(rt, name="marks")
    rt.events.publish(ws.id, EventType.MESSAGE, content="first")
    with StreamMark(rt, ws.id):
        rt.events.publish(ws.id, EventType.CONTENT, text="a delta")
        # the turn ends inside the step; the next turn's step starts streaming at once
        rt.events.publish(ws.id, EventType.STATE_CHANGE, state="thinking")
        next_mark = rt.events.last_id(ws.id)
        rt.redis.set(redis_keys.stream_from(ws.id), next_mark)
    rt.events.publish(ws.id, EventType.CONTENT, text="the next step's first delta")
    assert history_cursor(rt, ws.id) == next_mark  # the next step's deltas stay reachable


def test_a_service_without_a_search_backend_offers_no_web_search(rt):
    offered = [t.name for t in rt.registry.offered("interactive")]
    assert "web_fetch" in offered and "web_search" not in offered
    with_backend = Runtime.create(
        rt.settings.with_changes(tools=replace(rt.settings.tools, searxng_url="http://127.0.0.1:9"))
    )
    try:
        assert "web_search" in [t.name for t in with_backend.registry.offered("interactive")]
    finally:
        with_backend.close()


def test_a_send_stores_and_starts_its_turn_in_one_transaction_and_says_queued_before_the_next_start(rt):
    ws = workstreams.create(rt, name="one write")
    commits: list[str] = []
    event.listen(rt.db.engine, "commit", lambda _conn: commits.append("commit"))
    first = turns.send(rt, ws.id, "first")
    # stored and started at once (on PostgreSQL in one statement, a transaction of its own)
    at_once = 0 if rt.db.is_postgresql else 1
    assert first.status == TurnStatus.ACTIVE and len(commits) == at_once
    second = turns.send(rt, ws.id, "second")  # stored queued, the same way
    assert second.status == TurnStatus.QUEUED and len(commits) == 2 * at_once
    with rt.db.session() as s:  # the first turn ends (as a model step would end it) ...
        s.exec(update(Turn).where(col(Turn.id) == first.id).values(status=TurnStatus.DONE))
        s.exec(update(Workstream).where(col(Workstream.id) == ws.id).values(active_turn_id=None))
    assert turns.activate_next(rt, ws.id) == second.id  # ... and the queued one starts
    events, _ = rt.events.replay(ws.id, 0)
    said = [(e["type"], e.get("turn_id")) for e in events if e["type"] in ("message", "turn_queued")]
    assert said == [("message", first.id), ("turn_queued", second.id), ("message", second.id)]


def test_a_turn_ends_in_its_replys_transaction_and_starts_the_next_only_when_one_waits(rt, model_server):
    ws = workstreams.create(rt, name="one end")
    first = turns.send(rt, ws.id, "first")
    model_server.enqueue(Reply(text="one"))
    writes = WriteTransactions(rt)
    model_step.run(rt, first.id, 0)
    assert writes.count == 2  # the step's claim, then its answer stored with the turn's end
    assert load(rt, Turn, first.id).status == TurnStatus.DONE
    second = turns.send(rt, ws.id, "second")
    third = turns.send(rt, ws.id, "third")
    assert (second.status, third.status) == (TurnStatus.ACTIVE, TurnStatus.QUEUED)
    model_server.enqueue(Reply(text="two"))
    model_step.run(rt, second.id, 0)
    assert load(rt, Turn, second.id).status == TurnStatus.DONE
    assert load(rt, Turn, third.id).status == TurnStatus.ACTIVE  # the end started the one waiting
    assert load(rt, Workstream, ws.id).active_turn_id == third.id


def test_a_batch_of_one_call_stores_its_result_in_the_transaction_that_ends_the_batch(rt, model_server):
    ws = workstreams.create(rt, name="one call", auto_approve=True)
    turn = turns.send(rt, ws.id, "run it")
    model_server.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo one"})]))
    model_step.run(rt, turn.id, 0)
    writes = WriteTransactions(rt)
    batch_reads: list[str] = []
    event.listen(
        rt.db.engine,
        "before_cursor_execute",
        lambda _c, _cur, sql, *_a: batch_reads.append(sql) if "FROM tool_calls" in sql else None,
    )
    tool_batch.run(rt, turn.id, 0)
    # the claim, the call marked running, its command's process group once it started
    # (calls.note_process), its result with the batch's end
    assert writes.count == 4
    # the batch read to run it, and to end it: on SQLite the end's check for a waiting call and
    # its tool messages, on PostgreSQL both in its one statement
    assert len(batch_reads) == (2 if rt.db.is_postgresql else 3)
    events, _ = rt.events.replay(ws.id, 0)
    said = [(e["type"], e.get("output", e.get("state"))) for e in events]
    assert said[-2:] == [("tool_result", "one"), ("state_change", "thinking")]
    with rt.db.session() as s:
        stored = s.exec(select(Message).where(Message.ws_id == ws.id, Message.role == "tool")).one()
    assert stored.content.strip() == "one"
    assert load(rt, Turn, turn.id).phase == TurnPhase.MODEL and load(rt, Turn, turn.id).step == 1


def test_a_reader_on_postgresql_holds_no_transaction_open_between_its_statements(rt):
    if not rt.db.is_postgresql:
        pytest.skip("a SQLite reader keeps one snapshot for its session, and there is no server")
    with rt.db.reader() as s:
        pid = s.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with rt.db.engine.connect() as other:
            state = other.execute(text("SELECT state FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid})
            seen = state.scalar_one()
    # Not "idle in transaction": no BEGIN went before the read, so no ROLLBACK need follow it.
    assert seen == "idle"


def test_a_cancel_raised_before_a_phase_starts_stops_it_and_the_phase_asks_redis_only_later(
    rt, model_server, monkeypatch, tmp_path
):
    from app import redis_keys
    from app.engine.running import stop_check

    # The flag is raised only after `cancel_requested` is committed, and a phase reads that
    # first: its check of the flag is not asked again until the interval has passed.
    monkeypatch.setattr(stop_check, "CHECK_EVERY_SECONDS", 60.0)
    asked: list[str] = []
    exists = rt.redis.exists
    monkeypatch.setattr(rt.redis, "exists", lambda *names: asked.extend(names) or exists(*names))
    ws = workstreams.create(rt, name="cancel first", auto_approve=True)
    turn = turns.send(rt, ws.id, "touch it")
    model_server.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "touch ran"})]))
    model_step.run(rt, turn.id, 0)
    assert load(rt, Turn, turn.id).phase == TurnPhase.TOOLS  # the batch is next
    cancel.cancel(rt, ws.id)  # before the batch claims its phase
    tool_batch.run(rt, turn.id, 0)
    assert load(rt, Turn, turn.id).status == TurnStatus.CANCELLED
    assert not (tmp_path / "ran").exists()  # the command never ran
    [result] = [e for e in rt.events.replay(ws.id, 0)[0] if e["type"] == EventType.TOOL_RESULT]
    assert result["is_error"] is True
    second = turns.send(rt, ws.id, "and this")
    cancel.cancel(rt, ws.id)  # before its step claims its phase
    model_step.run(rt, second.id, 0)
    assert load(rt, Turn, second.id).status == TurnStatus.CANCELLED
    assert len(model_server.history) == 1  # the model was not asked for the second turn
    assert redis_keys.turn_cancel(turn.id) not in asked and redis_keys.turn_cancel(second.id) not in asked


def test_a_phase_that_the_same_task_runs_next_is_claimed_by_the_hand_off(rt, model_server, monkeypatch):
    ws = workstreams.create(rt, name="carried", auto_approve=True)
    turn = turns.send(rt, ws.id, "run it")
    model_server.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo one"})]))
    model_server.enqueue(Reply(text="it said one"))
    rt.queue.local_queues = frozenset(QUEUES)  # a worker that consumes every queue
    sent: list[tuple[str, str, int]] = []
    monkeypatch.setattr(rt.queue, "send_phase", lambda *args: sent.append(args))
    writes, asked = WriteTransactions(rt), Statements(rt)
    chain.run(rt, MODEL_STEP_TASK, turn.id, 0)
    # the first step's claim, its answer with the batch's claim and its one call stored
    # running, the result with the next step's claim, the answer with the turn's end: no
    # claim of their own, and the batch writes nothing before it runs the call (but its
    # command's process group, once it has started: calls.note_process)
    assert writes.count == 5
    assert asked.committed()[2] == ["UPDATE tool_calls"]
    # The batch's end (`tool_batch._ends`): on PostgreSQL one statement that commits by itself;
    # on SQLite one transaction, the turn read under its fence first, with no fence check of its own.
    assert asked.committed()[3] == (["WITH"] if rt.db.is_postgresql else BATCH_END)
    # So is the answer with its call (`asked.store`).
    stored = ["SELECT", "UPDATE workstreams", "INSERT messages", "INSERT tool_calls", "UPDATE turns"]
    assert asked.committed()[1] == (["WITH"] if rt.db.is_postgresql else stored)
    done = load(rt, Turn, turn.id)
    assert done.status == TurnStatus.DONE and sent == []
    assert done.attempt == 3  # three phases, each claimed once
    with rt.db.session() as s:
        (call,) = s.exec(select(StoredCall).where(StoredCall.turn_id == turn.id)).all()
    assert (call.status, call.output.strip(), call.runner) == (CallStatus.DONE, "one", calls.RUNNER)
    assert call.started_at is not None and call.finished_at is not None
    events, _ = rt.events.replay(ws.id, 0)
    (info,) = [e for e in events if e["type"] == "tool_info"]
    assert [i["status"] for i in info["items"]] == ["running"]  # as stored when it was said


def kept_batch_then(rt: Runtime, monkeypatch, meanwhile) -> None:  # type: ignore[no-untyped-def]
    """Run a model step in a worker consuming every queue, with `meanwhile()` done after its
    answer and the batch's hand-off have committed, before the batch it kept runs."""
    rt.queue.local_queues = frozenset(QUEUES)
    store_reply = model_step._store_reply

    def then(*args, **kwargs):  # type: ignore[no-untyped-def]
        store_reply(*args, **kwargs)
        meanwhile()

    monkeypatch.setattr(model_step, "_store_reply", then)


def test_a_cancel_raised_after_the_hand_off_started_the_call_leaves_it_unrun(
    rt, model_server, monkeypatch, tmp_path
):
    ws = workstreams.create(rt, name="cancelled early", auto_approve=True, working_dir=str(tmp_path))
    turn = turns.send(rt, ws.id, "touch it")
    model_server.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "touch ran.txt"})]))
    kept_batch_then(rt, monkeypatch, lambda: cancel.cancel(rt, ws.id))
    chain.run(rt, MODEL_STEP_TASK, turn.id, 0)
    assert not (tmp_path / "ran.txt").exists()  # asked of Redis before it ran, not 50 ms into it
    with rt.db.session() as s:
        (call,) = s.exec(select(StoredCall).where(StoredCall.turn_id == turn.id)).all()
    assert (call.status, call.output) == (CallStatus.CANCELLED, calls.CANCELLED_OUTPUT)
    assert load(rt, Turn, turn.id).status == TurnStatus.CANCELLED
    assert len(model_server.history) == 1  # the model was not asked again


def test_a_call_started_by_a_hand_off_whose_worker_died_is_never_run(rt, model_server, monkeypatch, tmp_path):
    ws = workstreams.create(rt, name="died", auto_approve=True, working_dir=str(tmp_path))
    turn = turns.send(rt, ws.id, "touch it")
    model_server.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "touch ran.txt"})]))

    class Died(BaseException):  # the worker gone between the hand-off and the batch
        pass

    def die() -> None:
        raise Died

    kept_batch_then(rt, monkeypatch, die)
    with pytest.raises(Died):
        chain.run(rt, MODEL_STEP_TASK, turn.id, 0)
    monkeypatch.undo()
    rt.queue.local_queues = frozenset()
    time.sleep(0.4)  # its claim goes stale; the sweeper sends the batch again
    tool_batch.run(rt, turn.id, 0)
    assert not (tmp_path / "ran.txt").exists()
    with rt.db.session() as s:
        (call,) = s.exec(select(StoredCall).where(StoredCall.turn_id == turn.id)).all()
    assert call.status == CallStatus.INTERRUPTED  # at most once: marked running, so never run again


def test_a_claimed_hand_off_that_the_worker_will_not_run_is_released_before_it_is_sent(
    rt, model_server, monkeypatch
):
    ws = workstreams.create(rt, name="released", auto_approve=True)
    turn = turns.send(rt, ws.id, "run it")
    model_server.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo one"})]))
    rt.queue.local_queues = frozenset(QUEUES)
    store_reply = model_step._store_reply

    def then_shutting_down(*args, **kwargs):  # type: ignore[no-untyped-def]
        store_reply(*args, **kwargs)  # the batch is claimed for this task as it is handed on ...
        rt.queue.local_queues = frozenset()  # ... and then the worker begins to shut down

    monkeypatch.setattr(model_step, "_store_reply", then_shutting_down)
    sent: list[tuple[str, str, int]] = []
    monkeypatch.setattr(rt.queue, "send_phase", lambda *args: sent.append(args))
    chain.run(rt, MODEL_STEP_TASK, turn.id, 0)
    assert sent == [(TOOL_BATCH_TASK, turn.id, 0)]
    handed = load(rt, Turn, turn.id)
    assert (handed.phase, handed.heartbeat_at) == (TurnPhase.TOOLS, None)  # released: free to claim
    assert handed.step_claims == 0  # and not counted as an attempt at the batch
    tool_batch.run(rt, turn.id, 0)  # the task sent, taken by another worker at once
    events, _ = rt.events.replay(ws.id, 0)
    assert [e["output"] for e in events if e["type"] == "tool_result"] == ["one"]
    assert load(rt, Turn, turn.id).phase == TurnPhase.MODEL


def test_a_long_sweep_keeps_its_lock_and_an_error_of_its_own_is_not_hidden(rt, monkeypatch):
    from app.engine.running import sweeper

    monkeypatch.setattr(sweeper, "SWEEP_LOCK_SECONDS", 0.5)
    monkeypatch.setattr(rt, "settings", rt.settings.with_changes(sweep_interval_seconds=0.1))
    entered = []

    def slow(runtime):  # type: ignore[no-untyped-def]
        entered.append(1)
        time.sleep(0.4)  # each part in time, the pass as a whole past the lock's 0.5 s
        if len(entered) <= 3:  # a second pass meanwhile: it must not start (nor recurse for ever)
            sweeper.sweep(runtime)

    for part in ("resume_finished_waits", "start_orphaned_turns", "time_out_approvals"):
        monkeypatch.setattr(sweeper, part, slow)
    sweeper.sweep(rt)
    assert len(entered) == 3  # the three parts of the one pass, and no part of another

    def broken(runtime):  # type: ignore[no-untyped-def]
        time.sleep(0.7)  # past the lock: its release fails, and must not hide this error
        raise ValueError("the pass's own error")

    monkeypatch.setattr(sweeper, "time_out_approvals", broken)
    monkeypatch.setattr(sweeper, "start_orphaned_turns", lambda runtime: None)
    monkeypatch.setattr(sweeper, "resume_finished_waits", lambda runtime: None)
    with pytest.raises(ValueError, match="the pass's own error"):
        sweeper.sweep(rt)
