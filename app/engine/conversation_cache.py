"""A worker's copy of recent workstreams' stored messages, so a model step loads only the rows
it has not seen instead of the whole conversation through the ORM (docs/durability.md:
messages are only ever added, and the database stays the truth)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from sqlmodel import Session, col, select

from app.storage.models import Message

# Workstreams kept per process: the most recently stepped ones. A message row costs about
# 2 KB here, so 64 workstreams of 500 messages stay under 70 MB; most hold far fewer.
WORKSTREAMS_KEPT = 64


class ConversationCache:
    """Each workstream's message rows by id, shared by a worker's threads (rows are read, never
    changed). Every read first lists the workstream's message ids (one narrow index scan): a row
    missing from the copy, whatever its id (on PostgreSQL a lower id can commit after a higher
    one), is loaded; one no longer there is dropped."""

    def __init__(self, kept: int = WORKSTREAMS_KEPT) -> None:
        self._kept = kept
        self._rows: OrderedDict[str, dict[int, Message]] = OrderedDict()
        self._lock = threading.Lock()

    def messages(self, s: Session, ws_id: str) -> list[Message]:
        """The workstream's messages in id order, as the session's transaction sees them."""
        ids = list(s.exec(select(Message.id).where(Message.ws_id == ws_id).order_by(col(Message.id))).all())
        with self._lock:
            known = self._rows.get(ws_id, {})
        missing = [i for i in ids if i is not None and i not in known]
        rows = dict(known)
        if missing:
            query = select(Message).where(Message.ws_id == ws_id, col(Message.id) >= min(missing))
            for row in s.exec(query).all():
                if row.id is not None:
                    rows.setdefault(row.id, row)
        kept = {i: rows[i] for i in ids if i is not None and i in rows}
        with self._lock:
            self._rows[ws_id] = kept
            self._rows.move_to_end(ws_id)
            while len(self._rows) > self._kept:
                self._rows.popitem(last=False)
        return [kept[i] for i in ids if i is not None and i in kept]

    def forget(self, ws_id: str) -> None:
        with self._lock:
            self._rows.pop(ws_id, None)
