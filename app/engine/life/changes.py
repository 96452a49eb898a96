"""A workstream's settings changed after its creation (`PATCH /workstreams/{id}`): which may
change, when, and the `workstream_changed` event that tells its open sockets.

Two kinds. The sidebar's own (name, pinned, archived) change at any time: no turn reads them.
What a turn runs with (its model, auto_approve) changes only between turns: a step reads the
model and a batch reads auto_approve, so changing them under a running or queued turn would
decide one turn's calls, or write one turn's answer, under two settings. That change is one
conditional UPDATE (`active_turn_id IS NULL`), so a turn starting at the same moment either
sees the new settings or the change is a 409.

Not changeable: working_dir and network (the sandbox a workstream's shells and files were made
for, chosen under the creator's rights), kind (a coordinator's tools and children), skill
(rendered into the system prompt at creation) and tool_search (its found tools are kept by it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, update
from sqlmodel import col

from app.engine.life import workstreams
from app.errors import ConflictError
from app.events import EventType
from app.runtime import Runtime
from app.storage.models import NameOrigin, Workstream, utcnow

# What no turn reads, or reads only where a change is checked for (smart_approve: asked.store).
ANYTIME = ("name", "pinned", "archived", "smart_approve", "notify_approvals")
BETWEEN_TURNS = ("model", "auto_approve")  # what a running turn reads


def change(rt: Runtime, ws_id: str, asked: dict[str, Any]) -> dict[str, Any]:
    """Apply `asked` (fields of ANYTIME and BETWEEN_TURNS, already checked for type); the
    workstream as the API shows it. A BETWEEN_TURNS field while a turn runs or waits is a 409
    and nothing changes."""
    values = _values(rt, asked)
    if values:
        query = update(Workstream).where(col(Workstream.id) == ws_id)
        if any(key in asked for key in BETWEEN_TURNS):
            query = query.where(col(Workstream.active_turn_id).is_(None))
        with rt.db.session() as s:
            changed = cast(CursorResult[Any], s.execute(query.values(**values))).rowcount
        if not changed:
            workstreams.get(rt, ws_id)  # a 404 if it is gone
            raise ConflictError(
                f"workstream {ws_id} has a turn running or queued: "
                f"{', '.join(k for k in BETWEEN_TURNS if k in asked)} may change once it has ended"
            )
        rt.events.publish(ws_id, EventType.WORKSTREAM_CHANGED, **_shown(asked, values))
    return workstreams.summary(workstreams.get(rt, ws_id))


def rename(rt: Runtime, ws_id: str, name: str, origin: NameOrigin, unless_named: bool = False) -> bool:
    """Set the name; with `unless_named`, only over a default name (the titler's way: a name
    the user gave meanwhile stays). Whether it changed."""
    query = update(Workstream).where(col(Workstream.id) == ws_id)
    if unless_named:
        query = query.where(col(Workstream.name_origin) == NameOrigin.DEFAULT)
    with rt.db.session() as s:
        changed = cast(CursorResult[Any], s.execute(query.values(name=name, name_origin=origin))).rowcount
    if changed:
        rt.events.publish(ws_id, EventType.WORKSTREAM_CHANGED, name=name)
    return bool(changed)


def _values(rt: Runtime, asked: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if "name" in asked:
        values.update(name=asked["name"], name_origin=NameOrigin.USER)
    if "pinned" in asked:
        values["pinned"] = asked["pinned"]
    if "archived" in asked:
        values["archived_at"] = utcnow() if asked["archived"] else None
    if "model" in asked:
        model = asked["model"] or None  # "": the default model
        workstreams.chat_model(rt, model)
        values["model"] = model
    if "auto_approve" in asked:
        values["auto_approve"] = asked["auto_approve"]
    for key in ("smart_approve", "notify_approvals"):
        if key in asked:
            values[key] = asked[key]
    return values


def _shown(asked: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The event's fields: what changed, as the API shows it."""
    keys = ("name", "pinned", "model", "auto_approve", "smart_approve", "notify_approvals")
    shown = {key: values[key] for key in keys if key in values}
    if "archived" in asked:
        shown["archived"] = isinstance(values["archived_at"], datetime)
    return shown
