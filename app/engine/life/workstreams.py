"""Workstreams: creating them, describing them to API clients, and deleting them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete as delete_rows
from sqlmodel import col, func, select

from app.engine.life import calls as call_store
from app.engine.life.turns import new_id
from app.engine.subagents import family
from app.errors import BadRequestError, ConflictError, ForbiddenError, NotFoundError
from app.previews import store as preview_store
from app.runtime import Runtime
from app.sandbox import folders
from app.settings import ModelSettings
from app.skills import store as skills
from app.skills.fields import render
from app.storage.models import (
    BackgroundShell,
    Branch,
    CallStatus,
    CoordinatorTask,
    Memory,
    Message,
    NameOrigin,
    Run,
    ShellChunk,
    ToolCall,
    Turn,
    TurnStatus,
    Watch,
    Workstream,
    WorkstreamState,
)
from app.tools import client_tools
from app.tools.core import tool_search_plan
from app.tools.core import toolset as toolsets
from app.tools.core.tool import COORDINATOR, INTERACTIVE
from app.users.known_owners import Owner

CREATABLE_KINDS = (INTERACTIVE, COORDINATOR)  # what a client (or a coordinator) may create


def create(
    rt: Runtime,
    name: str | None = None,
    model: str | None = None,
    auto_approve: bool = False,
    working_dir: str | None = None,
    tool_search: dict[str, Any] | None = None,
    owner_id: str | None = None,
    skill: str | None = None,
    network: str | None = None,
    is_admin: bool = True,
    kind: str = INTERACTIVE,
    parent_id: str | None = None,
    auto_approve_tools: list[str] | None = None,
    smart_approve: bool = False,
    notify_approvals: bool = False,
) -> Workstream:
    """A new workstream in a folder of its own (app/sandbox/folders.py), or in `working_dir`;
    `network` (default `[sandbox] default_network`) and `working_dir` checked against what the
    policy lets its creator choose (`is_admin`: the operator or an admin user). `kind` is
    interactive or coordinator (a task sub-agent is started by its parent's call);
    `parent_id`, a coordinator's child."""
    if kind not in CREATABLE_KINDS:
        raise BadRequestError(f"kind: expected one of {', '.join(CREATABLE_KINDS)}", field="kind")
    chosen = chat_model(rt, model)
    try:
        search = tool_search_plan.check_override(tool_search)
    except tool_search_plan.SearchOverrideError as exc:
        raise BadRequestError(str(exc), field="tool_search") from None
    network = _network(rt, network, is_admin)
    ws_id = new_id()
    if working_dir is not None:
        folder = folders.named(rt.settings, working_dir, is_admin)
    else:
        folder = folders.make(rt.settings, owner_id, ws_id)
    ws = Workstream(
        id=ws_id,
        name=name or f"workstream {ws_id[:6]}",
        name_origin=NameOrigin.USER if name else NameOrigin.DEFAULT,
        model=model,
        auto_approve=auto_approve,
        working_dir=folder,
        tool_search=search,
        owner_id=owner_id,
        network=network,
        kind=kind,
        parent_id=parent_id,
        auto_approve_tools=list(auto_approve_tools or []),
        smart_approve=smart_approve,
        notify_approvals=notify_approvals,
    )
    template = skills.chosen_at_creation(rt.db, skill)
    if template is not None:
        ws.skill = template.name
        ws.skill_content = render(template.content, chosen.model if chosen else "", ws_id)
    with rt.db.session() as s:
        s.add(ws)
    rt.owners.add(ws_id, Owner(owner_id))  # its owner's next request need not read it
    return ws


def chat_model(rt: Runtime, model: str | None) -> ModelSettings | None:
    """The configured chat model `model` names (None: the default), else a 400 naming `model`."""
    chosen = rt.settings.model(model)
    if model is not None and chosen is None:
        known = ", ".join(sorted(rt.settings.models)) or "none"
        raise BadRequestError(f"model: {model!r} is not configured (configured: {known})", field="model")
    if model is not None and chosen is not None and not chosen.is_chat_model:
        raise BadRequestError(f"model: {model!r} only reranks; it cannot hold a conversation", field="model")
    return chosen


def _network(rt: Runtime, network: str | None, is_admin: bool) -> str:
    policy = rt.settings.sandbox
    if network is None:
        return policy.default_network
    if network == "host":
        if not is_admin:
            raise ForbiddenError("network: only an administrator may give a workstream the host's network")
        return network
    if network not in policy.networks:
        allowed = ", ".join(policy.networks)
        raise BadRequestError(f"network: {network!r} is not allowed (allowed: {allowed})", field="network")
    return network


def get(rt: Runtime, ws_id: str) -> Workstream:
    with rt.db.reader() as s:
        ws = s.get(Workstream, ws_id)
    if ws is None:
        raise NotFoundError(f"no workstream {ws_id}")
    return ws


def list_all(rt: Runtime, where: Any = None) -> list[dict[str, Any]]:
    """Every workstream, or those `where` (a clause from app.users.ownership) lets through."""
    query = select(Workstream).order_by(col(Workstream.created_at))
    with rt.db.reader() as s:
        rows = s.exec(query if where is None else query.where(where)).all()
        waiting = family.parents_waiting(s)
    return [summary(ws, children_waiting=ws.id in waiting) for ws in rows]


def summary(ws: Workstream, children_waiting: bool = False) -> dict[str, Any]:
    """How the API shows a workstream. A running one whose sub-agent waits for a decision is in
    `attention`: that decision is made here (`children_waiting`)."""
    waiting = children_waiting and ws.state == WorkstreamState.RUNNING
    state = WorkstreamState.ATTENTION if waiting else ws.state
    return {
        "ws_id": ws.id,
        "name": ws.name,
        "kind": ws.kind,
        "model": ws.model,
        "auto_approve": ws.auto_approve,
        "smart_approve": ws.smart_approve,
        "notify_approvals": ws.notify_approvals,
        "auto_approve_tools": list(ws.auto_approve_tools),
        "working_dir": ws.working_dir,
        "network": ws.network,
        "tool_search": ws.tool_search,
        "state": state,
        "active_turn_id": ws.active_turn_id,
        "created_at": ws.created_at.isoformat(),
        "owner_id": ws.owner_id,
        "skill": ws.skill,
        **({"forked_from": ws.forked_from, "forked_at": ws.forked_at} if ws.forked_from else {}),
        "parent_id": ws.parent_id,
        "closed": ws.closed_at is not None,
        "pinned": ws.pinned,
        "archived": ws.archived_at is not None,
        "last_activity_at": ws.updated_at.isoformat(),
    }


def describe(rt: Runtime, ws_id: str) -> dict[str, Any]:
    """One workstream with its state, its pending approvals and its queued messages."""
    with rt.db.reader() as s:
        ws = s.get(Workstream, ws_id)
        if ws is None:
            raise NotFoundError(f"no workstream {ws_id}")
        turn = s.get(Turn, ws.active_turn_id) if ws.active_turn_id else None
        rows = call_store.batch(s, turn.id, turn.step) if turn else []
        queued = s.exec(
            select(func.count())
            .select_from(Turn)
            .where(Turn.ws_id == ws_id, Turn.status == TurnStatus.QUEUED)
        ).one()
        child_pending = family.pending_items(s, ws_id)
        children_waiting = bool(family.parents_waiting(s, [ws_id]))
        usages = s.exec(
            select(Message.usage).where(
                Message.ws_id == ws_id, Message.role == "assistant", col(Message.usage).is_not(None)
            )
        ).all()
    out = summary(ws, children_waiting)
    out["turn"] = (
        {
            "turn_id": turn.id,
            "phase": turn.phase,
            "step": turn.step,
            "cancel_requested": turn.cancel_requested,
        }
        if turn
        else None
    )
    out["pending_approvals"] = [call_store.item(r) for r in rows if r.status == CallStatus.PENDING]
    out["pending_approvals"] += child_pending  # its sub-agents' calls are decided here too
    out["queued_messages"] = int(queued)
    out["usage"] = total_usage(dict(u) for u in usages if u)
    out.update(tool_counts(rt, ws))
    return out


def tool_counts(rt: Runtime, ws: Workstream) -> dict[str, Any]:
    """What the workstream's model is offered: tools visible of all it could have, whether
    tool search is on (and its tier), and the tools search has found so far."""
    search = tool_search_plan.plan(rt.settings.tools, ws.tool_search, rt.settings.model(ws.model))
    with rt.db.reader() as s:
        sources = client_tools.sources(rt.tool_sources, s, ws, ws.active_turn_id)
    tools = toolsets.build(rt.registry, sources, ws.kind, ws.expanded_tools, search)
    return {
        "tools": {**tools.counts(), "search": tools.tier},
        "expanded_tools": list(ws.expanded_tools),
    }


def total_usage(usages: Iterable[dict[str, int]]) -> dict[str, int]:
    """Token counts of every model step added up, key by key (input, output, cache...)."""
    total: dict[str, int] = {"input_tokens": 0, "output_tokens": 0}
    for usage in usages:
        for key, value in usage.items():
            if isinstance(value, int):
                total[key] = total.get(key, 0) + value
    return total


def delete(rt: Runtime, ws_id: str) -> list[str]:
    """Remove a workstream that is at rest, with its sub-agents' workstreams, its conversation,
    previews and attachments, and its event log; the ids removed. A workstream with a turn
    running or queued is a 409: cancel it first, so that no worker is left holding it."""
    with rt.db.session() as s:
        ws = s.exec(select(Workstream).where(Workstream.id == ws_id).with_for_update()).first()
        if ws is None:
            raise NotFoundError(f"no workstream {ws_id}")
        members = _family(s, ws_id)
        busy = s.exec(
            select(func.count())
            .select_from(Turn)
            .where(col(Turn.ws_id).in_(members), col(Turn.status).in_([TurnStatus.QUEUED, TurnStatus.ACTIVE]))
        ).one()
        if busy:
            raise ConflictError(f"workstream {ws_id} has a turn running or queued: cancel it first")
        for member in reversed(members):  # sub-agents before their parents
            preview_store.forget_workstream(s, member)
            # its background shells: their workers find the rows gone and stop them
            shells = select(BackgroundShell.id).where(col(BackgroundShell.ws_id) == member)
            s.execute(delete_rows(ShellChunk).where(col(ShellChunk.shell_id).in_(shells)))
            for table in (
                Memory,
                Watch,
                ToolCall,
                Message,
                Branch,
                Run,
                Turn,
                CoordinatorTask,
            ):  # its memories are workstream-scoped; its runs are its turns' contracts
                s.execute(delete_rows(table).where(col(table.ws_id) == member))
            s.execute(delete_rows(Workstream).where(col(Workstream.id) == member))
    rt.owners.forget(members)
    for member in members:
        rt.events.publish(member, "workstream_deleted")  # open sockets hear it before the log goes
        rt.events.delete(member)
    return members


def _family(s: Any, ws_id: str) -> list[str]:
    """The workstream and every workstream started under it (sub-agents), parents first."""
    members, frontier = [ws_id], [ws_id]
    while frontier:
        children = s.exec(select(Workstream.id).where(col(Workstream.parent_id).in_(frontier))).all()
        frontier = [child for child in children if child not in members]
        members.extend(frontier)
    return members


def state_now(rt: Runtime, ws_id: str) -> tuple[str, str | None]:
    """The workstream's state as stored, and the turn it concerns: the active one, else the one
    that ended last (None for a workstream that never ran one)."""
    with rt.db.reader() as s:
        ws = s.get(Workstream, ws_id)
        if ws is None:
            raise NotFoundError(f"no workstream {ws_id}")
        turn_id = ws.active_turn_id
        if turn_id is None:
            ended = select(Turn.id).where(Turn.ws_id == ws_id, col(Turn.ended_at).is_not(None))
            turn_id = s.exec(ended.order_by(col(Turn.ended_at).desc()).limit(1)).first()
    return ws.state, turn_id
