"""Workstream events: published live on Redis pub/sub and appended to a capped replay log.

One Lua script numbers, logs and publishes an event atomically, so the channel
carries events in id order and a reconnecting client can splice the log and the
live channel without a gap or a duplicate. A fenced publish is dropped when a
newer attempt of the same turn has taken over (a stale worker's events).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import redis

from app import keys

# KEYS: seq, log, channel, fence   ARGV: fence attempt ('' = unfenced), body json, maxlen
_PUBLISH = """
if ARGV[1] ~= '' and redis.call('GET', KEYS[4]) ~= ARGV[1] then
  return -1
end
local id = redis.call('INCR', KEYS[1])
local event = '{"id":' .. id .. ',' .. string.sub(ARGV[2], 2)
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], id .. '-0', 'e', event)
redis.call('PUBLISH', KEYS[3], event)
return id
"""


class EventType:
    """The event type names clients see (docs/events.md describes each)."""

    STATE_CHANGE = "state_change"
    CONTENT = "content"
    REASONING = "reasoning"
    STREAM_END = "stream_end"
    TOOL_INFO = "tool_info"
    APPROVE_REQUEST = "approve_request"
    APPROVAL_RESOLVED = "approval_resolved"
    TOOL_OUTPUT_CHUNK = "tool_output_chunk"
    TOOL_RESULT = "tool_result"
    CANCELLED = "cancelled"
    ERROR = "error"
    REPLAY_TRUNCATED = "replay_truncated"
    TURN_QUEUED = "turn_queued"
    MESSAGE = "message"


@dataclass(frozen=True)
class Fence:
    """Who may publish for a turn: only its current attempt."""

    turn_id: str
    attempt: int


class EventLog:
    def __init__(self, client: redis.Redis, maxlen: int) -> None:
        self.redis = client
        self.maxlen = maxlen
        self._publish = client.register_script(_PUBLISH)

    def publish(
        self,
        ws_id: str,
        type_: str,
        *,
        turn_id: str | None = None,
        fence: Fence | None = None,
        **fields: Any,
    ) -> int | None:
        """Append and publish one event; its id, or None when the fence refused it."""
        body = {"ws_id": ws_id, "turn_id": turn_id, "type": type_, "ts": round(time.time(), 3)}
        body.update(fields)
        fence_key = keys.turn_fence(fence.turn_id) if fence else keys.turn_fence("-")
        result = self._publish(
            keys=[keys.event_seq(ws_id), keys.event_log(ws_id), keys.event_channel(ws_id), fence_key],
            args=[str(fence.attempt) if fence else "", json.dumps(body), self.maxlen],
        )
        return None if int(result) < 0 else int(result)

    def set_fence(self, fence: Fence) -> None:
        self.redis.set(keys.turn_fence(fence.turn_id), fence.attempt, ex=keys.FENCE_TTL_SECONDS)

    def last_id(self, ws_id: str) -> int:
        value = self.redis.get(keys.event_seq(ws_id))
        return int(value) if value else 0

    def replay(self, ws_id: str, after: int) -> tuple[list[dict[str, Any]], bool]:
        """Events with id > after, and whether some of them were already trimmed away."""
        # One transaction: a publish between reading the log and reading the
        # counter would otherwise look like a trimmed log.
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.xrange(keys.event_log(ws_id), min=f"{after + 1}-0", max="+")
            pipe.get(keys.event_seq(ws_id))
            entries, seq = pipe.execute()
        events = [json.loads(fields[b"e"]) for _id, fields in entries]
        last = int(seq) if seq else 0
        first = events[0]["id"] if events else last + 1
        # A cursor ahead of the log means the log was lost (Redis flushed): the
        # client must re-read history just as when the log was trimmed.
        return events, first > after + 1 or after > last

    def delete(self, ws_id: str) -> None:
        self.redis.delete(keys.event_seq(ws_id), keys.event_log(ws_id))
