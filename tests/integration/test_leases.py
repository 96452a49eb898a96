"""Claims, heartbeats and fencing against a real database and Redis, without a worker."""

from __future__ import annotations

import pytest
from sqlalchemy import event

from app.engine.leases import beat, check, claim
from app.errors import StaleAttemptError
from app.runtime import Runtime
from app.settings import Settings
from app.storage.migrate import upgrade
from app.storage.models import Turn, TurnPhase, TurnStatus, Workstream
from tests.integration.services import REDIS_HOST, REDIS_PORT, Database, lease_redis_db, postgres_available

pytestmark = pytest.mark.integration


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
    fence, attempts = claim(rt, "t", TurnPhase.MODEL, 0) or (None, 0)
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
    import time

    old, first = claim(rt, "t", TurnPhase.MODEL, 0)
    time.sleep(0.4)  # its worker stopped beating
    new, second = claim(rt, "t", TurnPhase.MODEL, 0)
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
