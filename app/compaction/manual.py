"""Compaction asked for by a person (`POST .../compact`, `/compact` in the chat client): the
request checks there is something to summarise and sends a task; the task summarises the
conversation as it stood then. Safe beside a running turn: a summary only adds a row, and a
step uses the summary that covers the most (app/compaction/plan.py)."""

from __future__ import annotations

from typing import Any

from app.compaction import plan
from app.compaction import run as compacting
from app.engine.conversation import stored
from app.engine.life import workstreams
from app.errors import ConflictError
from app.runtime import Runtime


def request(rt: Runtime, ws_id: str) -> dict[str, Any]:
    """Send the compaction of the workstream's conversation up to its newest message; 409 when
    it has nothing to summarise yet."""
    ws = workstreams.get(rt, ws_id)
    model = rt.settings.model(ws.model)
    with rt.db.reader() as s:
        rows = stored.messages(s, ws_id)
    keep_last = rt.settings.compaction.rules(model.name if model else "").keep_last
    chosen = plan.cover(rows, keep_last)
    if chosen is None or model is None:
        raise ConflictError(
            f"nothing to compact yet: the newest {keep_last} messages always stay whole, and a "
            "tool call is never separated from its result"
        )
    upto = max(row.id or 0 for row in rows)
    rt.queue.compact(ws_id, upto)
    return {"ws_id": ws_id, "upto": upto, "messages": chosen.count, "status": "compacting"}


def run(rt: Runtime, ws_id: str, upto: int) -> str:
    """The task: summarise what `request` saw. Run again (a redelivery), it finds the summary
    stored and does nothing."""
    ws = workstreams.get(rt, ws_id)
    with rt.db.reader() as s:
        rows = stored.messages(s, ws_id)
    return compacting.compact(rt, ws, rows, reason="manual", upto=upto).value
