"""Streaming: coalescing deltas and output chunks (one piece per 25 ms at most, of at most
1 MiB), and the mark that keeps a streaming answer's deltas reachable from history."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable

import redis

from app import redis_keys
from app.engine.publishing.outbox import Outbox
from app.events import NewEvent, ScriptCall
from app.runtime import Runtime

# Streaming: coalesce deltas and output chunks into at most one event per call (or per model
# step and kind) every STREAM_FLUSH_SECONDS: 40 a second, however fast the output. Pending text
# goes out at the first moment that allows, whatever its size: the resolution's other trigger,
# a flush at 4,096 characters, could only come sooner, so the rate wins and there is no such
# setting (docs/tools.md, bash, Streaming).
STREAM_FLUSH_SECONDS = 0.025
# The most text one such event carries: 40 MiB/s live. Past it the oldest of the interval is
# dropped for a marker (the stored result keeps head and tail whatever streamed).
STREAM_EVENT_MAX_CHARS = 1024 * 1024

log = logging.getLogger(__name__)


# KEYS: seq, mark   ARGV: ttl. The mark takes the last event id (0: none) in the same round trip.
_SET_MARK = """
local last = redis.call('GET', KEYS[1]) or '0'
redis.call('SET', KEYS[2], last, 'EX', ARGV[1])
return last
"""

# KEYS: mark   ARGV: the mark's value. Only our own mark: the next turn's step may have set its own.
_CLEAR_OWN_MARK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
"""


class StreamMark:
    """While a model step streams, the id of the last event before its deltas; and how the step's
    stream ends.

    Deltas are published as they arrive but stored only with the finished answer;
    history read meanwhile returns this id as its cursor, so that a client
    replaying after it gets the deltas the stored history does not yet hold.

    Once the answer is in, its `stream_end` (`end`) and the mark's clearing go out with the events
    of the transition that stores it (`send_with`), in their round trip, and so after its commit:
    the clearing must not come before the answer is stored. Should that transition fail before
    its events are sent (superseded, a bug), both go on their own as the step leaves the mark,
    the `stream_end` before whatever the task's error handling then says; should its events be
    sent and fail (Redis gone past the retries), the `stream_end` shares their fate (it may be
    out with them: not sent twice) and the clearing is tried again.
    """

    def __init__(self, rt: Runtime, ws_id: str) -> None:
        self._key = redis_keys.stream_from(ws_id)
        self._rt = rt
        self._ws_id = ws_id
        self._set = rt.redis.register_script(_SET_MARK)
        self._clear = rt.redis.register_script(_CLEAR_OWN_MARK)
        self._end: NewEvent | None = None
        self._box: Outbox | None = None

    def __enter__(self) -> StreamMark:
        self._value: int | None = None
        seq = redis_keys.event_seq(self._ws_id)
        try:
            self._value = int(self._set(keys=[seq, self._key], args=[redis_keys.STREAM_FROM_TTL_SECONDS]))
        except redis.RedisError as exc:  # a cursor a little late costs a reload, not the answer
            log.warning("could not mark the stream start of %s: %s", self._ws_id, exc)
        return self

    def end(self, event: NewEvent) -> None:
        """The step's answer is complete: `event` (its `stream_end`) says so."""
        self._end = event

    def send_with(self, out: Outbox) -> None:
        """The end and the clearing go out with `out`'s events: call it first in the transition."""
        if self._end is not None:
            out.events.insert(0, self._end)
        if self._value is not None:
            out.then.append(ScriptCall(self._clear, [self._key], [self._value]))
        self._box = out

    def __exit__(self, *exc: object) -> None:
        if self._box is not None and self._box.is_sent:
            return
        end = self._end
        if end is not None and not (self._box is not None and self._box.is_tried):
            send = self._rt.events.publish_best_effort  # one try: the step is failing already
            send(self._ws_id, end.type, turn_id=end.turn_id, fence=end.fence, **end.fields)
        if self._value is None:
            return
        try:
            self._clear(keys=[self._key], args=[self._value])
        except redis.RedisError as exc:
            log.warning("could not clear the stream mark of %s: %s", self._ws_id, exc)


def history_cursor(rt: Runtime, ws_id: str) -> int:
    """The event id to read history against: replaying after it may repeat what history
    holds, never miss what it does not. Read before the messages are."""
    last = rt.events.last_id(ws_id)
    mark = rt.redis.get(redis_keys.stream_from(ws_id))
    return min(last, int(mark)) if mark is not None else last


class Coalescer:
    """Buffers text and hands it to `flush` in pieces: at most one piece per `interval`, so that a
    producer makes at most 1/interval events a second however much it writes.

    Text after a quiet spell goes out at once (in the caller); text that follows closely waits
    for the next tick, which a timer thread sees to. A piece holds at most `max_chars`: when more
    arrives within one interval, the oldest is dropped for a marker saying how much. The live
    stream is for watching; dropping keeps it current and its memory bounded, where carrying the
    excess over would make every later line late (the stored result keeps head and tail whatever
    streamed). `clock` is for tests.
    """

    def __init__(
        self,
        flush: Callable[[str], object],
        interval: float = STREAM_FLUSH_SECONDS,
        max_chars: int = STREAM_EVENT_MAX_CHARS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._flush = flush
        self._interval = interval
        self._pending = Pending(max_chars)
        self._clock = clock
        self._last_flush = -math.inf
        self._lock = threading.Lock()  # the pending text and the time of the last flush
        self._sending = threading.Lock()  # one flush at a time, so pieces go out in order
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._timer: threading.Thread | None = None

    def add(self, text: str) -> None:
        if not text:
            return
        with self._lock:
            self._pending.add(text)
            is_due = self._is_due()
            if not is_due and self._timer is None and not self._closing.is_set():
                self._timer = threading.Thread(target=self._run_timer, daemon=True)
                self._timer.start()
        if is_due:
            self._send(force=False)
        else:
            self._wake.set()

    def flush(self) -> None:
        """Send what is pending now, whatever the cadence."""
        self._send(force=True)

    def close(self) -> None:
        """Flush what is pending and stop the timer."""
        self._closing.set()
        self._wake.set()
        self._send(force=True)
        if self._timer is not None:
            self._timer.join(timeout=1)

    def _is_due(self) -> bool:
        return self._clock() - self._last_flush >= self._interval

    def _send(self, force: bool) -> None:
        # The one place a piece leaves: the cadence is checked here, under the lock that
        # orders the pieces, so no interleaving of caller and timer sends two within `interval`.
        with self._sending:
            with self._lock:
                if not force and not self._is_due():
                    return
                text = self._pending.take()
                if text is None:
                    return
                self._last_flush = self._clock()
            self._flush(text)

    def _run_timer(self) -> None:
        while not self._closing.is_set():
            self._wake.wait()
            self._wake.clear()
            with self._lock:
                left = self._last_flush + self._interval - self._clock()
            if left > 0 and self._closing.wait(left):
                return  # close() flushes; do not make it wait out the interval
            self._send(force=False)
            with self._lock:
                if self._pending.has_text():  # a caller's send came first: this tick is not due yet
                    self._wake.set()


class Pending:
    """Text waiting to go out, at most `max_chars` of it: the newest, after a marker for the rest."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self._parts: deque[str] = deque()
        self._size = 0
        self._dropped = 0

    def add(self, text: str) -> None:
        self._parts.append(text)
        self._size += len(text)
        while self._size > self.max_chars:
            over = self._size - self.max_chars
            first = self._parts[0]
            if len(first) <= over:
                self._parts.popleft()
                cut = len(first)
            else:
                self._parts[0] = first[over:]
                cut = over
            self._size -= cut
            self._dropped += cut

    def has_text(self) -> bool:
        return bool(self._parts or self._dropped)

    def take(self) -> str | None:
        """All of it as one piece (None when there is nothing)."""
        if not self.has_text():
            return None
        marker = f"[... {self._dropped:,} characters not streamed: output outran the live stream ...]\n"
        text = (marker if self._dropped else "") + "".join(self._parts)
        self._parts.clear()
        self._size = self._dropped = 0
        return text
