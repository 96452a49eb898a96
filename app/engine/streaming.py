"""Coalescing of deltas and output chunks: flush at most every 25 ms or at 4,096 characters."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from app.settings import STREAM_FLUSH_CHARS, STREAM_FLUSH_SECONDS


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
