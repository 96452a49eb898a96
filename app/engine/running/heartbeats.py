"""One thread per process keeps every claim its running phases hold alive.

A phase used to start a thread of its own to refresh its claim, and stop and join it at its
end: about 0.3 ms a phase, three times in a bash turn, and each time on the turn's way (the
hand-off from a model step to its batch waited for both). Now a phase only adds its claim to
the runtime's `Heartbeats` and takes it out again; the one thread refreshes every claim held,
one interval after the last pass, so no claim goes longer than an interval (plus the pass
itself) without a refresh, as before.

The thread is started by the first claim held and ends once a pass finds none: an idle
process has no thread waking. A claim whose refresh finds it gone (taken over, or let go by
its phase's end) is marked `superseded` and dropped; the phase reads that through its cancel
check and stops at its next look.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy.exc import DBAPIError

from app.events import Fence

log = logging.getLogger(__name__)

THREAD_NAME = "heartbeats"

Refresh = Callable[[Fence], bool]  # refresh a claim; False once it is no longer this attempt's


@dataclass(eq=False)  # each is itself: a set of them holds every one
class HeldClaim:
    """A claim a running phase holds; `superseded` once its refresh found it gone."""

    fence: Fence
    superseded: bool = False


class Heartbeats:
    """The claims this process holds, refreshed by one thread every `interval` seconds."""

    def __init__(self) -> None:
        self._held: set[HeldClaim] = set()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    @contextmanager
    def holding(self, fence: Fence, refresh: Refresh, interval: float) -> Iterator[HeldClaim]:
        """Keep `fence` refreshed while the block runs. `refresh` and `interval` are the
        runtime's: the thread runs with those of the claim that started it."""
        held = HeldClaim(fence)
        with self._changed:
            self._held.add(held)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, args=(refresh, interval), name=THREAD_NAME, daemon=True
                )
                self._thread.start()
        try:
            yield held
        finally:
            with self._changed:
                self._held.discard(held)

    def _run(self, refresh: Refresh, interval: float) -> None:
        while True:
            with self._changed:
                self._changed.wait(interval)
                due = list(self._held)
                if not due:
                    self._thread = None  # the next claim starts another
                    return
            for held in due:
                self._refresh(held, refresh)

    def _refresh(self, held: HeldClaim, refresh: Refresh) -> None:
        with self._changed:
            if held not in self._held:  # its phase ended during this pass
                return
        try:
            alive = refresh(held.fence)
        except DBAPIError:  # the database blinked: the next pass tries again
            return
        except Exception:  # one claim's fault must not stop the others' refreshes
            log.exception("turn %s: refreshing its claim failed", held.fence.turn_id)
            return
        if not alive:
            held.superseded = True
            with self._changed:
                self._held.discard(held)
