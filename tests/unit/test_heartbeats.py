"""The one heartbeat thread of a process, with refreshes that succeed, fail or find the claim
gone (the database's side is tests/integration/test_leases.py)."""

from __future__ import annotations

import logging
import threading
from collections import Counter

from sqlalchemy.exc import OperationalError

from app.engine.running.heartbeats import THREAD_NAME, Heartbeats
from app.events import Fence
from tests.process_table import wait_until

INTERVAL = 0.02
SECONDS = 2.0  # how long a wait for a pass may take


def test_a_refresh_that_fails_does_not_stop_the_others(caplog):
    refreshed: Counter[str] = Counter()

    def refresh(fence: Fence) -> bool:
        refreshed[fence.turn_id] += 1
        if fence.turn_id == "broken":
            raise RuntimeError("a bug in one claim's refresh")
        if fence.turn_id == "blinking":
            raise OperationalError("UPDATE turns", {}, Exception("server closed the connection"))
        return True

    beats = Heartbeats()
    caplog.set_level(logging.ERROR, logger="app.engine.running.heartbeats")
    with (
        beats.holding(Fence("broken", 1), refresh, INTERVAL) as broken,
        beats.holding(Fence("blinking", 1), refresh, INTERVAL) as blinking,
        beats.holding(Fence("fine", 1), refresh, INTERVAL) as fine,
    ):
        assert wait_until(lambda: min(refreshed.values(), default=0) >= 3, SECONDS)  # each, pass after pass
        assert not (broken.superseded or blinking.superseded or fine.superseded)
    broken_logs = [r for r in caplog.records if "broken" in r.getMessage()]
    assert broken_logs and all(r.exc_info for r in broken_logs)  # a bug is logged with its trace
    assert not [r for r in caplog.records if "blinking" in r.getMessage()]  # a passing fault is not


def test_a_claim_found_gone_is_marked_superseded_and_no_longer_refreshed():
    refreshed: Counter[str] = Counter()

    def refresh(fence: Fence) -> bool:
        refreshed[fence.turn_id] += 1
        return fence.turn_id != "taken over"

    beats = Heartbeats()
    with (
        beats.holding(Fence("taken over", 1), refresh, INTERVAL) as gone,
        beats.holding(Fence("kept", 1), refresh, INTERVAL) as kept,
    ):
        assert wait_until(lambda: gone.superseded, SECONDS)
        seen = refreshed["taken over"]
        assert wait_until(lambda: refreshed["kept"] >= seen + 3, SECONDS)
        assert refreshed["taken over"] == seen == 1 and not kept.superseded


def test_the_thread_ends_when_nothing_is_held_and_the_next_claim_starts_another():
    beats = Heartbeats()

    def threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == THREAD_NAME]

    before = set(threads())
    with beats.holding(Fence("t", 1), lambda _f: True, INTERVAL):
        (first,) = set(threads()) - before
    first.join(timeout=1)
    assert not first.is_alive()
    with beats.holding(Fence("t", 2), lambda _f: True, INTERVAL):
        (second,) = set(threads()) - before
        assert second is not first and second.is_alive()
