"""Workstreams: creating them and describing them to API clients."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from sqlmodel import col, func, select

from app.engine import calls as call_store
from app.engine.turns import new_id
from app.errors import BadRequestError, NotFoundError
from app.runtime import Runtime
from app.skills import store as skills
from app.skills.fields import render
from app.storage.models import CallStatus, Message, Turn, TurnStatus, Workstream


def create(
    rt: Runtime,
    name: str | None = None,
    model: str | None = None,
    auto_approve: bool = False,
    working_dir: str | None = None,
    skill: str | None = None,
) -> Workstream:
    if model is not None and rt.settings.model(model) is None:
        known = ", ".join(sorted(rt.settings.models)) or "none"
        raise BadRequestError(f"model: {model!r} is not configured (configured: {known})", field="model")
    folder = os.path.abspath(os.path.expanduser(working_dir or rt.settings.working_dir))
    if not os.path.isdir(folder):
        raise BadRequestError(f"working_dir: {folder} is not a directory", field="working_dir")
    ws_id = new_id()
    ws = Workstream(
        id=ws_id,
        name=name or f"workstream {ws_id[:6]}",
        model=model,
        auto_approve=auto_approve,
        working_dir=folder,
    )
    chosen = skills.chosen_at_creation(rt.db, skill)
    if chosen is not None:
        settings = rt.settings.model(model)
        ws.skill = chosen.name
        ws.skill_content = render(chosen.content, settings.model if settings else "", ws_id)
    with rt.db.session() as s:
        s.add(ws)
    return ws


def get(rt: Runtime, ws_id: str) -> Workstream:
    with rt.db.reader() as s:
        ws = s.get(Workstream, ws_id)
    if ws is None:
        raise NotFoundError(f"no workstream {ws_id}")
    return ws


def list_all(rt: Runtime) -> list[dict[str, Any]]:
    with rt.db.reader() as s:
        rows = s.exec(select(Workstream).order_by(col(Workstream.created_at))).all()
    return [summary(ws) for ws in rows]


def summary(ws: Workstream) -> dict[str, Any]:
    return {
        "ws_id": ws.id,
        "name": ws.name,
        "kind": ws.kind,
        "model": ws.model,
        "auto_approve": ws.auto_approve,
        "auto_approve_tools": list(ws.auto_approve_tools),
        "working_dir": ws.working_dir,
        "state": ws.state,
        "active_turn_id": ws.active_turn_id,
        "created_at": ws.created_at.isoformat(),
        "skill": ws.skill,
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
        usages = s.exec(
            select(Message.usage).where(
                Message.ws_id == ws_id, Message.role == "assistant", col(Message.usage).is_not(None)
            )
        ).all()
    out = summary(ws)
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
    out["queued_messages"] = int(queued)
    out["usage"] = total_usage(dict(u) for u in usages if u)
    return out


def total_usage(usages: Iterable[dict[str, int]]) -> dict[str, int]:
    """Token counts of every model step added up, key by key (input, output, cache...)."""
    total: dict[str, int] = {"input_tokens": 0, "output_tokens": 0}
    for usage in usages:
        for key, value in usage.items():
            if isinstance(value, int):
                total[key] = total.get(key, 0) + value
    return total
