"""A sub-agent's events also go to its parent's stream, each wrapped in a `subagent` event
that names the parent's `task_agent` call and the child, so one page can follow both."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.lock import Lock
from sqlmodel import select

from app.events import EventLog, Fence, NewEvent, ScriptCall, event_time
from app.settings import Settings
from app.storage.database import Database
from app.storage.models import Workstream

SUBAGENT_EVENT = "subagent"
LINKS_KEPT = 10_000  # workstreams whose parent (or lack of one) a process remembers


# What of a coordinator's child reaches the coordinator's stream: what a person there decides
# or follows (its own events stay in its stream; the coordinator's model reads it with tools).
CHILD_TYPES_ECHOED = frozenset({"approve_request", "approval_resolved", "state_change", "error", "cancelled"})


@dataclass(frozen=True)
class Link:
    """Where a child's events are echoed: its parent, the parent's turn and call (a task
    sub-agent's), or, for a coordinator's child, neither, and only the types `only` names."""

    ws_id: str
    turn_id: str | None
    call_id: str | None
    only: frozenset[str] | None = None

    def carries(self, type_: str) -> bool:
        return self.only is None or type_ in self.only


class LinkCache:
    """`links(ws_id)`: the workstream's parent link, or None; read once per workstream from
    the database (a workstream's parent never changes; it is stored before its first event)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._known: OrderedDict[str, Link | None] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, ws_id: str) -> Link | None:
        with self._lock:
            if ws_id in self._known:
                self._known.move_to_end(ws_id)
                return self._known[ws_id]
        with self._db.reader() as s:
            row = s.exec(
                select(Workstream.parent_id, Workstream.parent_turn_id, Workstream.parent_call_id).where(
                    Workstream.id == ws_id
                )
            ).first()
        link = _link_of(row)
        with self._lock:
            self._known[ws_id] = link
            while len(self._known) > LINKS_KEPT:
                self._known.popitem(last=False)
        return link


def _link_of(row: Any) -> Link | None:
    if row is None or row[0] is None:
        return None
    if all(row):
        return Link(*row)
    return Link(row[0], None, None, CHILD_TYPES_ECHOED) if row[1] is None and row[2] is None else None


class FamilyEventLog(EventLog):
    """The event log, echoing each child's published events into its parent's stream."""

    links: Callable[[str], Link | None] | None = None

    @classmethod
    def with_links(cls, client: redis.Redis, settings: Settings, db: Database) -> FamilyEventLog:
        events = cls(
            client,
            settings.replay_log_length,
            max_bytes=settings.replay_log_bytes,
            ttl_seconds=settings.event_log_ttl_seconds,
            retry_seconds=settings.redis_retry_seconds,
        )
        events.links = LinkCache(db)
        return events

    def publish(
        self, ws_id: str, type_: str, *, turn_id: str | None = None, fence: Fence | None = None, **fields: Any
    ) -> int | None:
        event_id = super().publish(ws_id, type_, turn_id=turn_id, fence=fence, **fields)
        if event_id is not None:
            self._echo(super().publish, ws_id, event_id, type_, turn_id, fields)
        return event_id

    def publish_best_effort(
        self, ws_id: str, type_: str, *, turn_id: str | None = None, fence: Fence | None = None, **fields: Any
    ) -> int | None:
        event_id = super().publish_best_effort(ws_id, type_, turn_id=turn_id, fence=fence, **fields)
        if event_id is not None:
            self._echo(super().publish_best_effort, ws_id, event_id, type_, turn_id, fields)
        return event_id

    def publish_many(
        self,
        ws_id: str,
        events: Sequence[NewEvent],
        *,
        then: Sequence[ScriptCall] = (),
        release: Lock | None = None,
    ) -> list[int | None]:
        """A child's events (and `then`), then their echoes with the release after them: an echo
        carries its event's id, known only once the child's events are out (two round trips)."""
        link = self._link(ws_id)
        if link is None:
            return super().publish_many(ws_id, events, then=then, release=release)
        ids = super().publish_many(ws_id, events, then=then)
        echoes = [
            self._echo_of(link, ws_id, event_id, event.type, event.turn_id, event.fields)
            for event_id, event in zip(ids, events, strict=True)
            if event_id is not None and link.carries(event.type)
        ]
        super().publish_many(link.ws_id, echoes, release=release)
        return ids

    def _echo(
        self,
        send: Callable[..., int | None],
        ws_id: str,
        event_id: int,
        type_: str,
        turn_id: str | None,
        fields: dict[str, Any],
    ) -> None:
        link = self._link(ws_id)
        if link is None or not link.carries(type_):
            return
        echo = self._echo_of(link, ws_id, event_id, type_, turn_id, fields)
        send(link.ws_id, echo.type, turn_id=echo.turn_id, **echo.fields)

    def _link(self, ws_id: str) -> Link | None:
        return self.links(ws_id) if self.links is not None else None

    @staticmethod
    def _echo_of(
        link: Link, ws_id: str, event_id: int, type_: str, turn_id: str | None, fields: dict[str, Any]
    ) -> NewEvent:
        # Unfenced: the child's own publish was the fenced one. Its time is the echo's own, a
        # moment after the child's event's (whose `ts` the publish does not return).
        ts = event_time()
        event = {"id": event_id, "ws_id": ws_id, "turn_id": turn_id, "type": type_, "ts": ts, **fields}
        tags = {"call_id": link.call_id, "child_ws_id": ws_id}
        return NewEvent(SUBAGENT_EVENT, link.turn_id, None, {"event": event, **tags})
