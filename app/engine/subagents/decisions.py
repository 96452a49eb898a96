"""Decisions taken on a parent workstream that reach its sub-agents' calls.

A child's calls are decided through its parent's approve API, exactly like the parent's
own: one call (`call_id`, with `child_ws_id` where two workstreams use the same id), or
every pending call of the parent and of its working children at once. "Always" is the
parent's: what it approves (a tool, or for read_resource and use_prompt one resource or
prompt: `approval_label`) joins the parent's set and every working child's, and the
children's pending calls it covers are approved with it.
"""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import update
from sqlmodel import col

from app.engine.life import approvals
from app.engine.life.approvals import Decision, DecisionResult
from app.engine.subagents import family
from app.errors import ConflictError, NotFoundError
from app.runtime import Runtime
from app.storage.models import ToolCall, Workstream
from app.tools.core.tool import approval_label


def decide(rt: Runtime, ws_id: str, decision: Decision, child_ws_id: str | None = None) -> DecisionResult:
    if child_ws_id is not None:
        return _for_child(rt, ws_id, decision, child_ws_id)
    with rt.db.reader() as s:
        parent = s.get(Workstream, ws_id)
        if parent is None:
            raise NotFoundError(f"no workstream {ws_id}")
        own = {r.call_id: _label(r) for r in family.pending_rows(s, parent)}
        children = {
            c.id: {r.call_id: _label(r) for r in family.pending_rows(s, c)}
            for c in family.working_children(s, ws_id)
        }
    if decision.call_id is None:
        return _everything(rt, ws_id, decision, own, children)
    holders = [child for child, pending in children.items() if decision.call_id in pending]
    if decision.call_id in own or not holders:
        return _with_always(rt, ws_id, decision, approvals.decide(rt, ws_id, decision), own)
    if len(holders) > 1:
        raise ConflictError(
            f"call {decision.call_id} is pending in several sub-agents; name one with child_ws_id",
            pending=[decision.call_id],
        )
    return _child_decision(rt, ws_id, holders[0], decision, children[holders[0]])


def _for_child(rt: Runtime, ws_id: str, decision: Decision, child_ws_id: str) -> DecisionResult:
    with rt.db.reader() as s:
        child = s.get(Workstream, child_ws_id)
        if child is None or child.parent_id != ws_id:
            raise NotFoundError(f"workstream {ws_id} has no sub-agent {child_ws_id}")
        pending = {r.call_id: _label(r) for r in family.pending_rows(s, child)}
    return _child_decision(rt, ws_id, child_ws_id, decision, pending)


def _child_decision(
    rt: Runtime, ws_id: str, child_ws_id: str, decision: Decision, pending: dict[str, str]
) -> DecisionResult:
    return _with_always(rt, ws_id, decision, approvals.decide(rt, child_ws_id, decision), pending)


def _everything(
    rt: Runtime, ws_id: str, decision: Decision, own: dict[str, str], children: dict[str, dict[str, str]]
) -> DecisionResult:
    waiting = {child: pending for child, pending in children.items() if pending}
    results = []
    if own or not waiting:  # with nothing pending anywhere, the parent says what that means
        results.append(approvals.decide(rt, ws_id, decision))
    for child in waiting:
        try:
            results.append(approvals.decide(rt, child, decision))
        except ConflictError:
            continue  # decided meanwhile, or the child ended: nothing of it is pending now
    names = {**own, **{k: v for pending in waiting.values() for k, v in pending.items()}}
    return _with_always(rt, ws_id, decision, _merged(results), names)


def _with_always(
    rt: Runtime, ws_id: str, decision: Decision, result: DecisionResult, names: dict[str, str]
) -> DecisionResult:
    """After an "always", the parent and its working children approve what it covered (the
    labels in `names`, by call id) from now on."""
    if not (decision.always and decision.approved and result.decided):
        return result
    tools = {names[c] for c in result.decided if c in names}
    if not tools:
        return result
    more = _share_always(rt, ws_id, tools, decision)
    return _merged([result, *more])


def _share_always(rt: Runtime, ws_id: str, tools: set[str], decision: Decision) -> list[DecisionResult]:
    with rt.db.session() as s:
        members = [ws_id] + [c.id for c in family.working_children(s, ws_id)]
        for member in members:
            ws = s.get(Workstream, member, with_for_update=True)
            if ws is not None and not tools <= set(ws.auto_approve_tools):
                s.exec(
                    update(Workstream)
                    .where(col(Workstream.id) == member)
                    .values(auto_approve_tools=sorted(set(ws.auto_approve_tools) | tools))
                )
    results = []
    for member in members[1:]:
        with rt.db.reader() as s:
            child = s.get(Workstream, member)
            rows = family.pending_rows(s, child) if child else []
        due = [r.call_id for r in rows if _label(r) in tools]
        for call_id in due:
            try:
                results.append(approvals.decide(rt, member, replace(decision, call_id=call_id)))
            except ConflictError:
                continue
    return results


def _label(row: ToolCall) -> str:
    """What "always" on this call approves from then on: its tool, or for read_resource and
    use_prompt its one resource or prompt (`approval_label`), never every call of the tool."""
    return approval_label(row.func_name, row.args)


def _merged(results: list[DecisionResult]) -> DecisionResult:
    decided = [c for r in results for c in r.decided]
    pending = [c for r in results for c in r.pending if c not in decided]
    return DecisionResult(decided, pending, any(r.resumed for r in results))
