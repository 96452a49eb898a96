"""A worker's copy of recent workstreams' stored messages, so a model step loads only the rows
it has not seen instead of the whole conversation through the ORM (docs/durability.md:
messages are only ever added, and the database stays the truth), and turns each row into what
the model is sent once, not on every step. A rewind or a restore (app/engine/life/branches.py)
takes messages out of a conversation or puts them back; it bumps the workstream's
`history_version`, and a copy of another version is read anew."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from sqlalchemy import and_, bindparam
from sqlmodel import Session, col, func, select

from app.providers.content import SharedMessage
from app.storage.models import Message, Workstream

# Workstreams kept per process: the most recently stepped ones. A message row costs about
# 2 KB here, so 64 workstreams of 500 messages stay under 70 MB; most hold far fewer.
WORKSTREAMS_KEPT = 64


# The workstream's message count, and each row after `after` (none: one row, its message None).
# Built once: a step runs it every time, and building it costs more than running it.
_IN_CONVERSATION = and_(col(Message.ws_id) == bindparam("ws_id"), col(Message.branch_id).is_(None))
_TOTAL = select(
    func.count(col(Message.id)).label("total"),
    select(Workstream.history_version)
    .where(col(Workstream.id) == bindparam("ws_id"))
    .scalar_subquery()
    .label("version"),
).where(_IN_CONVERSATION)
_COUNTED = _TOTAL.subquery()
_NEWER = (
    select(_COUNTED.c.total, _COUNTED.c.version, Message)
    .select_from(_COUNTED)
    .outerjoin(Message, and_(_IN_CONVERSATION, col(Message.id) > bindparam("after")))
    .order_by(col(Message.id))
)


class ConversationCache:
    """Each workstream's message rows by id, shared by a worker's threads (rows are read, never
    changed). A read asks for the workstream's message count and the rows after the highest
    id the copy holds (one statement, one snapshot): when the copy and the new rows make that
    count, they are the whole conversation (messages are only ever added).
    Otherwise it lists the ids (one narrow index scan): a row missing from the copy, whatever
    its id (on PostgreSQL a lower id can commit after a higher one, which changes the count),
    is loaded; one no longer there is dropped."""

    def __init__(self, kept: int = WORKSTREAMS_KEPT) -> None:
        self._kept = kept
        self._rows: OrderedDict[str, dict[int, Message]] = OrderedDict()
        self._versions: dict[str, int | None] = {}
        self._entries: dict[str, dict[int, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def messages(self, s: Session, ws_id: str) -> list[Message]:
        """The workstream's messages in id order, as the session's transaction sees them."""
        return list(self._read(s, ws_id).values())

    def model_entries(
        self, s: Session, ws_id: str, make: Callable[[Message], dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """`make(row)` of each message `messages` reads (what the model is sent of it), made
        once per row while the workstream is kept: shared, so it cannot be changed."""
        return [entry for _row, entry in self.model_pairs(s, ws_id, make)]

    def model_pairs(
        self, s: Session, ws_id: str, make: Callable[[Message], dict[str, Any]]
    ) -> list[tuple[Message, dict[str, Any]]]:
        """Each row `messages` reads with its `model_entries` entry."""
        rows = self._read(s, ws_id)
        with self._lock:
            made = self._entries.setdefault(ws_id, {}) if ws_id in self._rows else {}
        out = []
        for row_id, row in rows.items():
            entry = made.get(row_id)
            if entry is None:
                entry = made[row_id] = SharedMessage(make(row))
            out.append((row, entry))
        return out

    def _read(self, s: Session, ws_id: str) -> dict[int, Message]:
        with self._lock:
            known = self._rows.get(ws_id, {})
            known_version = self._versions.get(ws_id)
        after = next(reversed(known), 0)  # ids ascend in the copy as in the table
        found = s.exec(_NEWER, params={"ws_id": ws_id, "after": after}).all()
        total, version = found[0][0], found[0][1]
        new: dict[int, Message] = {
            row.id: row for _, _, row in found if row is not None and row.id is not None
        }
        if version != known_version and known:  # rewound or restored: read it all again
            kept = self._reload(s, ws_id, {})
        elif total == len(known) + len(new):
            kept = {**known, **new} if new else known
        else:
            kept = self._reload(s, ws_id, known)
        with self._lock:
            if version != known_version:
                self._entries.pop(ws_id, None)
            self._rows[ws_id] = kept
            self._versions[ws_id] = version
            self._rows.move_to_end(ws_id)
            while len(self._rows) > self._kept:
                gone, _ = self._rows.popitem(last=False)
                self._entries.pop(gone, None)
                self._versions.pop(gone, None)
        return kept

    def _reload(self, s: Session, ws_id: str, known: dict[int, Message]) -> dict[int, Message]:
        ids = list(
            s.exec(
                select(Message.id)
                .where(Message.ws_id == ws_id, col(Message.branch_id).is_(None))
                .order_by(col(Message.id))
            ).all()
        )
        missing = [i for i in ids if i is not None and i not in known]
        rows = dict(known)
        if missing:
            query = select(Message).where(
                Message.ws_id == ws_id, col(Message.branch_id).is_(None), col(Message.id) >= min(missing)
            )
            for row in s.exec(query).all():
                if row.id is not None:
                    rows.setdefault(row.id, row)
        return {i: rows[i] for i in ids if i is not None and i in rows}

    def forget(self, ws_id: str) -> None:
        with self._lock:
            self._rows.pop(ws_id, None)
            self._entries.pop(ws_id, None)
            self._versions.pop(ws_id, None)
