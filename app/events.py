"""Workstream events: published live on Redis pub/sub and appended to a capped, expiring replay log.

One Lua script numbers, logs and publishes an event atomically, so the channel carries events in
id order and a reconnecting client can splice the log and the live channel without a gap or a
duplicate. docs/events.md says what a client sees; this module keeps those promises.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

import redis
from redis.commands.core import Script
from redis.exceptions import LockNotOwnedError, NoScriptError
from redis.lock import Lock

from app import redis_keys
from app.settings import (
    DEFAULT_REDIS_RETRY_SECONDS,
    DEFAULT_REPLAY_LOG_BYTES,
    EVENT_LOG_TTL_SECONDS,
    Settings,
)

REDIS_RETRY_FIRST_DELAY_SECONDS = 0.05  # doubled after each failed try
REDIS_RETRY_MAX_DELAY_SECONDS = 1.0

log = logging.getLogger(__name__)

T = TypeVar("T")

# What a Redis outage looks like to a client (BusyLoadingError, a server still loading its data
# after a restart, is a ConnectionError).
OUTAGE_ERRORS: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError)

# KEYS: seq, meta, log, channel, fence, published
# ARGV: fence attempt ('' = unfenced), body json, max events, max bytes, ttl, fence ttl,
#       published ttl ('0': not recorded, the caller never retries)
#
# - `published` makes a retry idempotent: a publish whose reply was lost returns the id it got.
# - The fence key holds the highest attempt seen: a lower one is refused, an equal or higher one
#   (or any, when Redis lost the key) is accepted and raised, so a wipe cannot silence a step.
# - A missing counter starts a new epoch: ids go on from the clock (ms x 1000, below 2^53 for
#   JavaScript), past every id a client can hold; `meta.origin` records where, so that replay can
#   tell a cursor from before the wipe. The old log (if the counter alone was lost) is dropped.
# - The log is trimmed from the oldest end to `max events` and `max bytes` (the newest stays).
# - Ids are formatted with %d: Lua's default number format would print 1.7e+15.
_PUBLISH = """
local done = redis.call('GET', KEYS[6])
if done then return tonumber(done) end
if ARGV[1] ~= '' then
  local held = tonumber(redis.call('GET', KEYS[5]) or '0')
  local mine = tonumber(ARGV[1])
  if held > mine then return -1 end
  if held < mine then redis.call('SET', KEYS[5], ARGV[1], 'EX', ARGV[6]) end
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  local now = redis.call('TIME')
  local origin = (tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)) * 1000
  local top = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)
  if top[1] then origin = math.max(origin, tonumber(string.match(top[1][1], '^%d+'))) end
  local o = string.format('%d', origin)
  redis.call('DEL', KEYS[3])
  redis.call('SET', KEYS[1], o)
  redis.call('HSET', KEYS[2], 'origin', o, 'bytes', 0)
end
local id = redis.call('INCR', KEYS[1])
local sid = string.format('%d', id)
local event = '{"id":' .. sid .. ',' .. string.sub(ARGV[2], 2)
redis.call('XADD', KEYS[3], sid .. '-0', 'e', event)
local bytes = redis.call('HINCRBY', KEYS[2], 'bytes', #event)
local n = redis.call('XLEN', KEYS[3])
while n > 1 and (n > tonumber(ARGV[3]) or bytes > tonumber(ARGV[4])) do
  local oldest = redis.call('XRANGE', KEYS[3], '-', '+', 'COUNT', 1)[1]
  redis.call('XDEL', KEYS[3], oldest[1])
  bytes = redis.call('HINCRBY', KEYS[2], 'bytes', -#oldest[2][2])
  n = n - 1
end
for i = 1, 3 do redis.call('EXPIRE', KEYS[i], ARGV[5]) end
redis.call('PUBLISH', KEYS[4], event)
if ARGV[7] ~= '0' then redis.call('SET', KEYS[6], sid, 'EX', ARGV[7]) end
return id
"""

# KEYS: fence[, a workstream's ordering lock]   ARGV: attempt, ttl. Raise only: a claim that
# lost a race must not lower the fence. Returns 1 when the lock is given and held, else 0.
_RAISE_FENCE = """
if tonumber(redis.call('GET', KEYS[1]) or '0') < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
end
if KEYS[2] then return redis.call('EXISTS', KEYS[2]) end
return 0
"""

# KEYS: lock   ARGV: token. redis-py's Lock.release check, run inside our own transaction
# (EventLog.publish_many): the key is deleted only while it still holds our token.
# Loaded only after _PUBLISH (EventLog._transaction): a transaction that finds this script found
# _PUBLISH too, so a lock is never let go while its events failed for want of their script.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

PUBLISHED_GRACE_SECONDS = 60  # a retry's marker outlives the retry window by this much


def event_time() -> float:
    """An event's `ts`: Unix seconds to the microsecond, so that two events of one hop a
    fraction of a millisecond apart still say which came first and how far apart."""
    return round(time.time(), 6)


class EventType:
    """The event type names clients see (docs/events.md describes each)."""

    STATE_CHANGE = "state_change"
    CONTENT = "content"
    REASONING = "reasoning"
    STREAM_END = "stream_end"
    MODEL_RETRY = "model_retry"  # a model request failed and is tried again: why, and after how long
    MODEL_FALLBACK = "model_fallback"  # the step moves on to the next model of its fallback chain
    MODEL_WAITING = "model_waiting"  # the step waits for a free slot of its model (max_concurrent)
    TOOL_INFO = "tool_info"
    APPROVE_REQUEST = "approve_request"
    APPROVAL_RESOLVED = "approval_resolved"
    VERDICT = "verdict"  # a judge model's verdict on a call that waits for a person (app/judge/model.py)
    TOOL_OUTPUT_CHUNK = "tool_output_chunk"
    TOOL_RESULT = "tool_result"
    # The output guard redacted credentials from a result or saw injection signs in it
    # (app/tools/core/guard.py); it precedes the call's `tool_result`.
    OUTPUT_WARNING = "output_warning"
    CANCELLED = "cancelled"
    ERROR = "error"
    REPLAY_TRUNCATED = "replay_truncated"
    TURN_QUEUED = "turn_queued"
    MESSAGE = "message"
    WATCH = "watch"  # a watch was created, polled, fired or cancelled: `watch` is its summary
    BRANCH_CHANGED = "branch_changed"  # a rewind, edit, retry or restore changed the conversation
    # Compaction (app/compaction): a summary is being written; it was stored (or failed: `error`).
    COMPACTION_STARTED = "compaction_started"
    COMPACTION_DONE = "compaction_done"
    # A client tool's call waits for its output (POST .../tool_outputs): app/tools/client_tools.py
    REQUIRES_ACTION = "requires_action"
    # Its name, model, auto_approve, pinned or archived changed (PATCH, or a generated title).
    WORKSTREAM_CHANGED = "workstream_changed"


@dataclass(frozen=True)
class Fence:
    """Who may publish for a turn: only its current attempt."""

    turn_id: str
    attempt: int


@dataclass
class NewEvent:
    """An event not yet published: the log gives it its `id`, `ws_id` and `ts`."""

    type: str
    turn_id: str | None = None
    fence: Fence | None = None
    fields: dict[str, Any] = field(default_factory=dict)


class ScriptCall(NamedTuple):
    script: Script
    keys: list[str]
    args: list[Any]


def retrying(call: Callable[[], T], seconds: float, what: str) -> T:
    """`call()`, retried with backoff through a Redis outage of up to `seconds`; then its last error."""
    deadline = time.monotonic() + seconds
    delay = REDIS_RETRY_FIRST_DELAY_SECONDS
    failed_at: float | None = None
    while True:
        try:
            result = call()
        except OUTAGE_ERRORS as exc:
            if failed_at is None:
                failed_at = time.monotonic()
                # The class only: a connection error's text names the server, and the URL is a secret.
                log.warning(
                    "%s: Redis unavailable (%s); retrying for up to %.0f s", what, type(exc).__name__, seconds
                )
            if time.monotonic() + delay > deadline:
                log.error("%s: Redis still unavailable after %.1f s; giving up", what, seconds)
                raise
            time.sleep(delay)
            delay = min(delay * 2, REDIS_RETRY_MAX_DELAY_SECONDS)
            continue
        if failed_at is not None:
            log.warning("%s: Redis is back after %.1f s", what, time.monotonic() - failed_at)
        return result


class EventLog:
    def __init__(
        self,
        client: redis.Redis,
        maxlen: int,
        *,
        max_bytes: int = DEFAULT_REPLAY_LOG_BYTES,
        ttl_seconds: int = EVENT_LOG_TTL_SECONDS,
        retry_seconds: float = DEFAULT_REDIS_RETRY_SECONDS,
    ) -> None:
        self.redis = client
        self.maxlen = maxlen
        self.max_bytes = max_bytes
        self.ttl_seconds = ttl_seconds
        self.retry_seconds = retry_seconds
        self._publish = client.register_script(_PUBLISH)
        self._raise_fence = client.register_script(_RAISE_FENCE)
        self._release = client.register_script(_RELEASE)

    @classmethod
    def from_settings(cls, client: redis.Redis, settings: Settings) -> EventLog:
        return cls(
            client,
            settings.replay_log_length,
            max_bytes=settings.replay_log_bytes,
            ttl_seconds=settings.event_log_ttl_seconds,
            retry_seconds=settings.redis_retry_seconds,
        )

    def publish(
        self,
        ws_id: str,
        type_: str,
        *,
        turn_id: str | None = None,
        fence: Fence | None = None,
        **fields: Any,
    ) -> int | None:
        """Append and publish one event; its id, or None when the fence refused it.

        Rides out a Redis outage of up to `retry_seconds` (a retry never publishes twice), then
        raises the last connection error."""
        token = uuid.uuid4().hex
        marker_ttl = int(self.retry_seconds) + PUBLISHED_GRACE_SECONDS
        return retrying(
            lambda: self._run(ws_id, NewEvent(type_, turn_id, fence, fields), token, marker_ttl),
            self.retry_seconds,
            f"publishing {type_} for {ws_id}",
        )

    def publish_best_effort(
        self,
        ws_id: str,
        type_: str,
        *,
        turn_id: str | None = None,
        fence: Fence | None = None,
        **fields: Any,
    ) -> int | None:
        """`publish` for what only a live viewer needs (output chunks, deltas): one try, never raises;
        None when it was not published. The stored result is what counts."""
        try:
            return self._run(ws_id, NewEvent(type_, turn_id, fence, fields), "-", 0)
        except (redis.RedisError, TypeError, ValueError) as exc:
            # Never the body: tool output may hold anything.
            log.warning("event %s for %s not published live (%s)", type_, ws_id, type(exc).__name__)
            return None

    def publish_many(
        self,
        ws_id: str,
        events: Sequence[NewEvent],
        *,
        then: Sequence[ScriptCall] = (),
        release: Lock | None = None,
    ) -> list[int | None]:
        """Append and publish `events` in order, in one round trip: their ids (None where a fence
        refused one). `then`, scripts whose effect belongs with the events (each safe to run
        twice), run in that round trip after them. `release`, a lock held until they are out, is
        released in it last, as `release.release()` would: LockNotOwnedError when it was no
        longer ours.

        Rides out an outage as `publish` does: each event has its own token, so a retry never
        publishes one twice. Should the outage outlast the retries, the lock is left to expire."""
        marker_ttl = int(self.retry_seconds) + PUBLISHED_GRACE_SECONDS
        calls = [self._publish_call(ws_id, event, uuid.uuid4().hex, marker_ttl) for event in events]
        calls += then
        if release is not None:
            calls.append(self._release_call(release))
        tries = 0

        def send() -> list[Any]:
            nonlocal tries
            tries += 1
            return self._transaction(calls)

        results = retrying(send, self.retry_seconds, f"publishing {len(events)} events for {ws_id}")
        # After a retry, a lock found gone may be the one our lost reply had released.
        if release is not None and not results[-1] and tries == 1:
            raise LockNotOwnedError("Cannot release a lock that's no longer owned", lock_name=release.name)
        return [None if int(r) < 0 else int(r) for r in results[: len(events)]]

    def _release_call(self, lock: Lock) -> ScriptCall:
        """The call releasing `lock`; as with `Lock.release`, the lock forgets its token: from
        here the release is this call's to send, and the lock's holder must not send another."""
        token = lock.local.token
        if token is None:
            raise redis.exceptions.LockError("Cannot release an unlocked lock", lock_name=lock.name)
        lock.local.token = None
        return ScriptCall(self._release, [lock.name], [token])

    def _transaction(self, calls: list[ScriptCall]) -> list[Any]:
        """The calls' replies, the calls run in one MULTI/EXEC; those that met a script Redis had
        lost (it restarted) run again, in order, once it is loaded.

        A transaction because no script can be loaded in the middle of one: a script missing for
        one call is missing for all its calls, so none of them ran and re-running them keeps
        their order. The first error a call met is raised."""
        results = self._execute(calls)
        lost = [i for i, result in enumerate(results) if isinstance(result, NoScriptError)]
        if lost:
            for script in _load_order([calls[i].script for i in lost], self._publish, self._release):
                self.redis.script_load(script.script)
            for i, result in zip(lost, self._execute([calls[i] for i in lost]), strict=True):
                results[i] = result
        for result in results:
            if isinstance(result, Exception):
                raise result
        return results

    def _execute(self, calls: list[ScriptCall]) -> list[Any]:
        with self.redis.pipeline(transaction=True) as pipe:
            for call in calls:
                pipe.evalsha(call.script.sha, len(call.keys), *call.keys, *call.args)
            return pipe.execute(raise_on_error=False)

    def _run(self, ws_id: str, event: NewEvent, token: str, marker_ttl: int) -> int | None:
        call = self._publish_call(ws_id, event, token, marker_ttl)
        result = call.script(keys=call.keys, args=call.args)
        return None if int(result) < 0 else int(result)

    def _publish_call(self, ws_id: str, event: NewEvent, token: str, marker_ttl: int) -> ScriptCall:
        body = {"ws_id": ws_id, "turn_id": event.turn_id, "type": event.type, "ts": event_time()}
        body.update(event.fields)
        fence = event.fence
        fence_key = redis_keys.turn_fence(fence.turn_id) if fence else redis_keys.turn_fence("-")
        return ScriptCall(
            self._publish,
            [
                redis_keys.event_seq(ws_id),
                redis_keys.event_meta(ws_id),
                redis_keys.event_log(ws_id),
                redis_keys.event_channel(ws_id),
                fence_key,
                redis_keys.published(token),
            ],
            [
                str(fence.attempt) if fence else "",
                json.dumps(body),
                self.maxlen,
                self.max_bytes,
                self.ttl_seconds,
                redis_keys.FENCE_TTL_SECONDS,
                marker_ttl,
            ],
        )

    def set_fence(self, fence: Fence, ws_id: str | None = None) -> bool:
        """A claim's attempt becomes the one allowed to publish (unless a newer one already is).
        With `ws_id`, in the same round trip: whether that workstream's ordering lock was held."""
        fence_keys = [redis_keys.turn_fence(fence.turn_id)] + ([redis_keys.ws_order(ws_id)] if ws_id else [])
        held = retrying(
            lambda: self._raise_fence(keys=fence_keys, args=[fence.attempt, redis_keys.FENCE_TTL_SECONDS]),
            self.retry_seconds,
            f"fencing turn {fence.turn_id}",
        )
        return bool(held)

    def last_id(self, ws_id: str) -> int:
        """The id of the workstream's last event; 0 when Redis holds none (never, or lost)."""
        value = self.redis.get(redis_keys.event_seq(ws_id))
        return int(value) if value else 0

    def replay(self, ws_id: str, after: int) -> tuple[list[dict[str, Any]], bool]:
        """Events with id > after, and whether the cursor cannot be continued from them alone
        (events after it were trimmed or lost): the client must then re-read the history."""
        # One transaction: a publish between reading the log and reading the counter would
        # otherwise look like a trimmed log.
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.xrange(redis_keys.event_log(ws_id), min=f"{after + 1}-0", max="+")
            pipe.get(redis_keys.event_seq(ws_id))
            pipe.hget(redis_keys.event_meta(ws_id), "origin")
            entries, seq, origin_value = pipe.execute()
        events = [json.loads(fields[b"e"]) for _id, fields in entries]
        return events, is_truncated(after, events, int(seq or 0), int(origin_value or 0))

    def delete(self, ws_id: str) -> None:
        self.redis.delete(
            redis_keys.event_seq(ws_id), redis_keys.event_meta(ws_id), redis_keys.event_log(ws_id)
        )


def _load_order(lost: list[Script], first: Script, last: Script) -> list[Script]:
    """The scripts of calls that met NOSCRIPT, each once, in the order to load them: `first`
    first and `last` last (see _RELEASE), the others as they came."""
    scripts = {script.sha: script for script in lost}.values()
    return sorted(scripts, key=lambda script: (script.sha != first.sha) + (script.sha == last.sha))


def is_truncated(after: int, events: list[dict[str, Any]], last: int, origin: int) -> bool:
    """Whether `events` (the log after `after`) fail to continue a client at `after` without a gap."""
    if 0 < after < origin:
        return True  # a cursor from before the counter's epoch: Redis lost the events after it
    if after > last:
        return True  # a cursor ahead of the counter: the log and counter were lost since
    first = events[0]["id"] if events else last + 1
    return bool(first > max(after, origin) + 1)  # trimmed past the cursor
