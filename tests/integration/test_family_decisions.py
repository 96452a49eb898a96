"""An "always" decided on a parent reaches its working sub-agents (app/engine/subagents/decisions.py)
for what it approved and nothing more: for read_resource and use_prompt that is one resource or
one prompt, not every call of the tool. Both workstreams wait on calls stored as the engine
stores them; the decisions go through the parent's approve path on both databases."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlmodel import select

from app.engine.life.approvals import Decision
from app.engine.subagents import decisions
from app.runtime import Runtime
from app.storage.models import CallStatus, ToolCall, Turn, TurnPhase, TurnStatus, Workstream, WorkstreamState
from tests.integration.storage import runtime

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgresql"])
def rt(request, tmp_path, model_server) -> Iterator[Runtime]:
    yield from runtime(request.param, tmp_path, model_server)


def waiting(rt: Runtime, ws: Workstream, calls: list[tuple[str, str, dict]]) -> None:
    """`ws` with an active turn parked on `calls` (call id, tool, arguments), all pending."""
    turn_id = f"turn-{ws.id}"
    with rt.db.session() as s:
        ws.active_turn_id, ws.state = turn_id, WorkstreamState.ATTENTION
        s.add(ws)
        s.flush()
        s.add(Turn(id=turn_id, ws_id=ws.id, message="m", status=TurnStatus.ACTIVE, phase=TurnPhase.APPROVAL))
        s.flush()
        for position, (call_id, tool, args) in enumerate(calls):
            s.add(
                ToolCall(
                    ws_id=ws.id, turn_id=turn_id, step=0, position=position, call_id=call_id,
                    func_name=tool, args=args, status=CallStatus.PENDING,
                )
            )  # fmt: skip


def state(rt: Runtime) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Each call's status, and each workstream's always-approved labels."""
    with rt.db.reader() as s:
        calls = {r.call_id: r.status for r in s.exec(select(ToolCall)).all()}
        labels = {w.id: w.auto_approve_tools for w in s.exec(select(Workstream)).all()}
    return calls, labels


@pytest.fixture
def family(rt: Runtime, tmp_path) -> None:
    """A parent waiting on one resource read, its working sub-agent on a read of another
    resource, a read of the same one and a prompt."""
    rt.queue.tool_batch = lambda *_args, **_kwargs: None  # the batches are not what is tested
    parent = Workstream(id="parent", name="p", working_dir=str(tmp_path))
    child = Workstream(id="child", name="c", kind="task", parent_id="parent", working_dir=str(tmp_path))
    waiting(rt, parent, [("p1", "read_resource", {"uri": "demo://a"})])
    waiting(
        rt,
        child,
        [
            ("c1", "read_resource", {"uri": "secret://other"}),
            ("c2", "read_resource", {"uri": "demo://a"}),
            ("c3", "use_prompt", {"name": "mcp__s__x"}),
        ],
    )


@pytest.mark.usefixtures("family")
def test_always_on_a_resource_reaches_the_sub_agents_reads_of_that_resource_only(rt: Runtime) -> None:
    result = decisions.decide(rt, "parent", Decision(approved=True, always=True, call_id="p1"))
    assert sorted(result.decided) == ["c2", "p1"]
    calls, labels = state(rt)
    assert calls == {
        "p1": CallStatus.APPROVED,
        "c1": CallStatus.PENDING,  # another resource: still the person's to decide
        "c2": CallStatus.APPROVED,
        "c3": CallStatus.PENDING,
    }
    assert labels == {"parent": ["read_resource:demo://a"], "child": ["read_resource:demo://a"]}


@pytest.mark.usefixtures("family")
def test_always_on_everything_pending_covers_each_approved_resource_and_prompt(rt: Runtime) -> None:
    decisions.decide(rt, "parent", Decision(approved=True, always=True))
    calls, labels = state(rt)
    assert set(calls.values()) == {CallStatus.APPROVED}
    covered = ["read_resource:demo://a", "read_resource:secret://other", "use_prompt:mcp__s__x"]
    assert labels == {"parent": covered, "child": covered}
