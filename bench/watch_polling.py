"""Watches: how fast beat's pass claims due watches (alone, and with rival passes racing it), and
what one poll of a trivial command costs (bash under its guard, the claim, the writes).

Run: python -m bench.watch_polling [--backend sqlite|postgresql] [--watches 1000] [--polls 50]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from sqlalchemy import update

from app.engine.life import workstreams
from app.runtime import Runtime
from app.settings import Settings
from app.storage.migrate import upgrade
from app.storage.models import Watch
from app.watches import poller, store
from app.watches.store import WATCH_MAX_ACTIVE, WatchSpec
from bench.harness import ms_summary
from tests.integration.services import (
    REDIS_HOST,
    REDIS_PORT,
    Database,
    lease_redis_db,
    start_private_redis_if_absent,
)

RIVALS = 4  # passes racing for the same due watches (several beats, or a pass run twice)


def runtime(backend: str, tmp: Path) -> tuple[Runtime, Database]:
    db = Database(backend, tmp)
    upgrade(db.url)
    env = {
        "DATABASE_URL": db.url,
        "REDIS_URL": f"redis://{REDIS_HOST}:{REDIS_PORT}/{lease_redis_db()}",
        "TURNSTONE_WORKING_DIR": str(tmp),
    }
    return Runtime.create(Settings.from_mapping({}, env)), db


def make_watches(rt: Runtime, count: int, tmp: Path) -> None:
    for n in range(0, count, WATCH_MAX_ACTIVE):
        ws = workstreams.create(rt, name=f"bench {n}", working_dir=str(tmp))
        for k in range(min(WATCH_MAX_ACTIVE, count - n)):
            store.create(rt.db, ws.id, WatchSpec(f"w{k}", "true", 3600, "False", 100))


def release_all(rt: Runtime) -> None:
    with rt.db.session() as s:
        s.exec(update(Watch).values(claim_token=None, claimed_at=None))


def bench_claims(rt: Runtime, count: int) -> None:
    passes: list[float] = []
    claimed = 0
    while True:
        started = time.perf_counter()
        got = poller.claim_due(rt)
        if not got:
            break
        passes.append(time.perf_counter() - started)
        claimed += len(got)
    print(ms_summary(f"one pass claiming 100 of {count} due", passes))
    assert claimed == count, claimed
    release_all(rt)
    rivals = [Runtime.create(rt.settings) for _ in range(RIVALS)]
    taken: list[list[str]] = [[] for _ in rivals]
    gate = threading.Barrier(len(rivals))

    def race(n: int) -> None:
        gate.wait()
        while got := poller.claim_due(rivals[n]):
            taken[n].extend(watch_id for watch_id, _ in got)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(len(rivals))]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    every = [w for t in taken for w in t]
    print(
        f"{RIVALS} rival passes claimed {len(every)} of {count} due watches in {elapsed * 1000:.0f} ms "
        f"({len(every) / elapsed:,.0f}/s); claimed twice: {len(every) - len(set(every))}; "
        f"split {[len(t) for t in taken]}"
    )
    for r in rivals:
        r.close()
    release_all(rt)


def bench_polls(rt: Runtime, polls: int) -> None:
    times: list[float] = []
    for _ in range(polls):
        got = poller.claim_due(rt, limit=1)
        if not got:
            break
        ((watch_id, token),) = got
        started = time.perf_counter()
        poller.poll(rt, watch_id, token)
        times.append(time.perf_counter() - started)
    print(ms_summary("one poll of `true` (bash, guard, writes)", times))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgresql"])
    parser.add_argument("--watches", type=int, default=1000)
    parser.add_argument("--polls", type=int, default=50)
    args = parser.parse_args()
    private = start_private_redis_if_absent()
    with tempfile.TemporaryDirectory() as folder:
        rt, db = runtime(args.backend, Path(folder))
        try:
            make_watches(rt, args.watches, Path(folder))
            print(f"{args.backend}: {args.watches} due watches")
            bench_claims(rt, args.watches)
            bench_polls(rt, args.polls)
        finally:
            rt.redis.flushdb()
            rt.close()
            db.drop()
            if private is not None:
                private.stop()


if __name__ == "__main__":
    main()
