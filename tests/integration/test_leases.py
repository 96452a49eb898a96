"""Claims, heartbeats and fencing against a real database and Redis, without a worker."""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from datetime import timedelta

import pytest
from sqlalchemy import event

from app.engine.running.leases import beat, check, claim, kept_alive
from app.errors import StaleAttemptError
from app.runtime import Runtime
from app.settings import Settings
from app.storage.migrate import upgrade
from app.storage.models import Turn, TurnPhase, TurnStatus, Workstream
from tests.integration.services import REDIS_HOST, REDIS_PORT, Database, lease_redis_db, postgres_available
from tests.process_table import wait_until

pytestmark = pytest.mark.integration

HEARTBEAT_SECONDS = 0.05  # six refreshes in the claims' stale period of 0.3 s


@pytest.fixture(
    params=[("sqlite", True), ("sqlite", False), ("postgresql", True), ("postgresql", False)],
    ids=["sqlite", "sqlite-without-returning", "postgresql", "postgresql-without-returning"],
)
def rt(request, tmp_path):
    """Each database as it is, and as one that returns no rows from an update (SQLite before
    3.35), where a claim and a fence check read the turn back with a second statement."""
    backend, returning = request.param
    if backend == "postgresql" and not postgres_available():
        pytest.skip("PostgreSQL is not reachable")
    db = Database(backend, tmp_path)
    request.addfinalizer(db.drop)
    url = db.url
    upgrade(url)
    settings = Settings.from_mapping({}, {}).with_changes(
        database_url=url,
        redis_url=f"redis://{REDIS_HOST}:{REDIS_PORT}/{lease_redis_db()}",
        stale_after_seconds=0.3,
        heartbeat_seconds=HEARTBEAT_SECONDS,
    )
    runtime = Runtime.create(settings)
    runtime.db.engine.dialect.update_returning = returning
    with runtime.db.session() as s:
        s.add(Workstream(id="ws", name="ws", working_dir=str(tmp_path)))
        s.flush()
        s.add(Turn(id="t", ws_id="ws", message="hi", status=TurnStatus.ACTIVE, phase=TurnPhase.MODEL))
    yield runtime
    runtime.redis.flushdb()  # the lease goes with it
    runtime.close()


def _end_phase(rt: Runtime) -> None:
    """What a step's last transaction does: move the turn on and release the claim."""
    with rt.db.session() as s:
        turn = s.get(Turn, "t")
        turn.phase, turn.heartbeat_at = TurnPhase.TOOLS, None
        s.add(turn)


def fence_of(claimed):
    assert claimed is not None
    return claimed[0]


def test_a_claim_on_postgresql_is_one_statement_that_commits_by_itself(rt):
    commits: list[str] = []
    event.listen(rt.db.engine, "commit", lambda _conn: commits.append("commit"))
    fence, attempts, _failures = claim(rt, "t", TurnPhase.MODEL, 0) or (None, 0, 0)
    assert fence is not None and (fence.attempt, attempts) == (1, 1)
    # an update that returns the turn needs no transaction around it there (no BEGIN, no
    # COMMIT); one read back with a second statement does, and SQLite's writers take turns
    by_itself = rt.db.is_postgresql and rt.db.engine.dialect.update_returning
    assert commits == ([] if by_itself else ["commit"])
    with rt.db.session() as s:
        turn = s.get(Turn, "t")
        assert turn is not None and turn.attempt == 1 and turn.heartbeat_at is not None


def test_a_live_claim_keeps_a_duplicate_delivery_out(rt):
    assert claim(rt, "t", TurnPhase.MODEL, 0) is not None
    assert claim(rt, "t", TurnPhase.MODEL, 0) is None  # the same task delivered twice


def test_a_claim_gone_stale_is_taken_over_and_the_old_attempt_fenced_out(rt):
    old, first, _ = claim(rt, "t", TurnPhase.MODEL, 0)
    time.sleep(0.4)  # its worker stopped beating
    new, second, _ = claim(rt, "t", TurnPhase.MODEL, 0)
    assert new.attempt == old.attempt + 1 and (first, second) == (1, 2)
    with rt.db.session() as s, pytest.raises(StaleAttemptError):
        check(rt, s, old)
    assert rt.events.publish("ws", "content", fence=old) is None
    assert rt.events.publish("ws", "content", fence=new) is not None


def test_a_beat_after_the_phase_ended_does_not_block_the_next_claim(rt):
    fence = fence_of(claim(rt, "t", TurnPhase.MODEL, 0))
    _end_phase(rt)
    with rt.db.session() as s:
        assert beat(rt, s, fence) is False  # released: the heartbeat thread stops
    with rt.db.session() as s:
        assert s.get(Turn, "t").heartbeat_at is None
    assert claim(rt, "t", TurnPhase.TOOLS, 0) is not None  # at once, not after the sweeper


def test_a_claim_for_a_phase_or_step_that_moved_on_is_refused(rt):
    _end_phase(rt)
    assert claim(rt, "t", TurnPhase.MODEL, 0) is None
    assert claim(rt, "t", TurnPhase.TOOLS, 1) is None


def _add_turns(rt: Runtime, ids: list[str]) -> None:
    with rt.db.session() as s:
        for turn_id in ids:
            s.add(Turn(id=turn_id, ws_id="ws", message="hi", status=TurnStatus.ACTIVE, phase=TurnPhase.MODEL))


def _heartbeat_threads() -> list[threading.Thread]:
    # "heartbeats", and the "heartbeat-<turn>" a phase's own thread was named before it
    return [t for t in threading.enumerate() if t.name.startswith("heartbeat")]


def test_a_held_claim_stays_fresh_past_its_stale_period(rt):
    fence = fence_of(claim(rt, "t", TurnPhase.MODEL, 0))
    with kept_alive(rt, fence) as held:
        time.sleep(1.0)  # over three stale periods
        assert claim(rt, "t", TurnPhase.MODEL, 0) is None  # still ours: a duplicate is kept out
        assert not held.superseded
    time.sleep(0.4)  # nothing refreshes it now
    assert claim(rt, "t", TurnPhase.MODEL, 0) is not None


def test_a_held_claim_taken_over_is_marked_superseded(rt):
    fence = fence_of(claim(rt, "t", TurnPhase.MODEL, 0))
    with kept_alive(rt, fence) as held:
        with rt.db.session() as s:  # as if the worker had stalled past the stale period
            turn = s.get(Turn, "t")
            turn.heartbeat_at = rt.db.now() - timedelta(seconds=10)
            s.add(turn)
        new = fence_of(claim(rt, "t", TurnPhase.MODEL, 0))
        assert wait_until(lambda: held.superseded, 2)
        with rt.db.session() as s:  # the old attempt's refresh did not touch the new claim's turn
            assert s.get(Turn, "t").attempt == new.attempt


def test_one_thread_keeps_every_held_claim_and_goes_once_none_is_held(rt):
    ids = ["t1", "t2", "t3", "t4"]
    _add_turns(rt, ids)
    before = set(_heartbeat_threads())  # another runtime's may still be ending
    fences = [fence_of(claim(rt, turn_id, TurnPhase.MODEL, 0)) for turn_id in ids]
    with ExitStack() as stack:
        helds = [stack.enter_context(kept_alive(rt, fence)) for fence in fences]
        started = set(_heartbeat_threads()) - before
        assert len(started) == 1  # one for four claims, not one each
        (thread,) = started
        time.sleep(1.0)
        assert [claim(rt, turn_id, TurnPhase.MODEL, 0) for turn_id in ids] == [None] * 4
        assert not any(held.superseded for held in helds)
    with kept_alive(rt, fences[0]):  # a phase right after another: the same thread, none started
        assert set(_heartbeat_threads()) - before == {thread}
    thread.join(timeout=2 * HEARTBEAT_SECONDS + 1)
    assert not thread.is_alive()  # a pass that found no claim held ended it
