"""Streaming: coalescing deltas and output chunks (flush at most every 25 ms or at 4,096
characters), and the mark that keeps a streaming answer's deltas reachable from history."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import redis

from app import keys
from app.runtime import Runtime
from app.settings import STREAM_FLUSH_CHARS, STREAM_FLUSH_SECONDS

log = logging.getLogger(__name__)


_CLEAR_OWN_MARK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
"""


class StreamMark:
    """While a model step streams, the id of the last event before its deltas.

    Deltas are published as they arrive but stored only with the finished answer;
    history read meanwhile returns this id as its cursor, so that a client
    replaying after it gets the deltas the stored history does not yet hold.
    """

    def __init__(self, rt: Runtime, ws_id: str) -> None:
        self._redis = rt.redis
        self._key = keys.stream_from(ws_id)
        self._rt = rt
        self._ws_id = ws_id

    def __enter__(self) -> StreamMark:
        self._value: int | None = None
        try:
            self._value = self._rt.events.last_id(self._ws_id)
            self._redis.set(self._key, self._value, ex=keys.STREAM_FROM_TTL_SECONDS)
        except redis.RedisError as exc:  # a cursor a little late costs a reload, not the answer
            log.warning("could not mark the stream start of %s: %s", self._ws_id, exc)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._value is None:
            return
        try:
            # Only our own mark: the next turn's step may have set its own meanwhile.
            self._redis.eval(_CLEAR_OWN_MARK, 1, self._key, self._value)
        except redis.RedisError as exc:
            log.warning("could not clear the stream mark of %s: %s", self._ws_id, exc)


def history_cursor(rt: Runtime, ws_id: str) -> int:
    """The event id to read history against: replaying after it may repeat what history
    holds, never miss what it does not. Read before the messages are."""
    last = rt.events.last_id(ws_id)
    mark = rt.redis.get(keys.stream_from(ws_id))
    return min(last, int(mark)) if mark is not None else last


class Coalescer:
    """Buffers text and hands it to `flush` in pieces; one event per line is what it prevents.

    Text that arrives after a quiet spell goes out at once; text that follows
    closely is held for up to `interval` (a timer thread sees to that).
    """

    def __init__(
        self,
        flush: Callable[[str], object],
        interval: float = STREAM_FLUSH_SECONDS,
        max_chars: int = STREAM_FLUSH_CHARS,
    ) -> None:
        self._flush = flush
        self._interval = interval
        self._max_chars = max_chars
        self._parts: list[str] = []
        self._size = 0
        self._last_flush = 0.0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._closed = False
        self._timer: threading.Thread | None = None

    def add(self, text: str) -> None:
        if not text:
            return
        with self._lock:
            self._parts.append(text)
            self._size += len(text)
            due = time.monotonic() - self._last_flush >= self._interval
            if self._size >= self._max_chars or due:
                self._flush_locked()
            elif self._timer is None:
                self._timer = threading.Thread(target=self._run_timer, daemon=True)
                self._timer.start()
        self._wake.set()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def close(self) -> None:
        """Flush what is pending and stop the timer."""
        with self._lock:
            self._flush_locked()
            self._closed = True
        self._closing.set()
        self._wake.set()
        if self._timer is not None:
            self._timer.join(timeout=1)

    def _flush_locked(self) -> None:
        if self._parts:
            text = "".join(self._parts)
            self._parts.clear()
            self._size = 0
            self._flush(text)
        self._last_flush = time.monotonic()

    def _run_timer(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._closing.wait(self._interval):
                return  # close() flushed already; do not make it wait out the interval
            with self._lock:
                if self._closed:
                    return
                self._flush_locked()
