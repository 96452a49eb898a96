"""recall over a large history: query latency (p50/p95) on SQLite FTS5 and PostgreSQL tsvector,
and what the index costs each stored message.

Run: python -m bench.recall [--messages 1000000] [--backend sqlite|postgresql|both] [--queries 50]

Messages are generated fast (batched inserts; COPY on PostgreSQL) into a migrated database, so
the index triggers run for every one of them, as they do in service. Words follow a Zipf-like
law over a 50,000-word vocabulary, so queries range from a handful of matches to hundreds of
thousands. Prints figures; asserts nothing. PostgreSQL comes from TEST_PG_ADMIN_URL.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from sqlalchemy import text

from app.recall.query import parse
from app.recall.search import search
from app.storage.database import Database
from app.storage.migrate import upgrade
from bench.harness import ms_summary
from tests.integration.services import Database as ScratchDatabase
from tests.integration.services import postgres_available

VOCABULARY = 50_000
WORKSTREAMS = 200
WORDS_PER_MESSAGE = (8, 60)
BATCH = 20_000
ROLES = ("user", "assistant", "tool")
COST_MESSAGES = 20_000  # for the per-message index cost: batched
COST_SINGLE = 1_000  # and one commit per message, as the service stores them


def vocabulary(rng: random.Random) -> tuple[list[str], list[float]]:
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "xi", "ze", "po", "sa", "di", "fu", "gre", "tho"]
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    ordered = sorted(words)
    rng.shuffle(ordered)
    weights = [1 / (rank + 1) ** 1.07 for rank in range(VOCABULARY)]
    cumulative = []
    total = 0.0
    for w in weights:
        total += w
        cumulative.append(total)
    return ordered, cumulative


def messages(rng: random.Random, words: list[str], cum: list[float], count: int) -> Iterator[tuple]:
    now = datetime.now(UTC)
    for n in range(count):
        size = rng.randint(*WORDS_PER_MESSAGE)
        body = " ".join(rng.choices(words, cum_weights=cum, k=size))
        yield (f"ws{n % WORKSTREAMS:04d}", ROLES[n % 3], body, now)


def fill(db: Database, rows: Iterator[tuple], count: int) -> float:
    """Insert `count` messages (index triggers firing); seconds taken."""
    started = time.perf_counter()
    raw = db.engine.raw_connection()
    try:
        cur = raw.cursor()
        if db.is_postgresql:
            with cur.copy("COPY messages (ws_id, role, content, created_at, is_error) FROM STDIN") as copy:
                for ws_id, role, content, created in rows:
                    copy.write_row((ws_id, role, content, created, False))
        else:
            cur.execute("BEGIN")
            batch: list[tuple] = []
            for ws_id, role, content, created in rows:
                batch.append((ws_id, role, content, created.isoformat(sep=" "), 0))
                if len(batch) == BATCH:
                    cur.executemany(_SQLITE_INSERT, batch)
                    batch.clear()
            if batch:
                cur.executemany(_SQLITE_INSERT, batch)
            cur.execute("COMMIT")
        raw.commit()
    finally:
        raw.close()
    return time.perf_counter() - started


_SQLITE_INSERT = "INSERT INTO messages (ws_id, role, content, created_at, is_error) VALUES (?, ?, ?, ?, ?)"


def add_workstreams(db: Database) -> None:
    with db.session() as s:
        for n in range(WORKSTREAMS):
            s.execute(
                text(
                    "INSERT INTO workstreams (id, name, kind, auto_approve, auto_approve_tools, read_paths, "
                    "expanded_tools, working_dir, state, created_at, updated_at) VALUES (:id, :name, "
                    "'interactive', false, '[]', '[]', '[]', '/tmp', 'idle', :now, :now)"
                ),
                {"id": f"ws{n:04d}", "name": f"workstream {n}", "now": datetime.now(UTC)},
            )


def drop_index_triggers(db: Database) -> None:
    with db.session() as s:
        if db.is_postgresql:
            s.execute(text("DROP TRIGGER message_search_refresh ON messages"))
        else:
            for name in ("insert", "update", "delete"):
                s.execute(text(f"DROP TRIGGER message_search_{name}"))


def queries(rng: random.Random, words: list[str], db: Database) -> dict[str, list[str]]:
    with db.reader() as s:
        sample = [r[0] for r in s.execute(text("SELECT content FROM messages WHERE id % 9973 = 1 LIMIT 200"))]
    phrases = []
    for body in sample:
        parts = body.split()
        i = rng.randrange(len(parts) - 1)
        phrases.append(f'"{parts[i]} {parts[i + 1]}"')
    return {
        "common word (rank 1-20)": [words[rng.randrange(0, 20)] for _ in range(50)],
        "mid word (rank 200-2,000)": [words[rng.randrange(200, 2000)] for _ in range(50)],
        "rare word (rank 20,000-50,000)": [words[rng.randrange(20_000, VOCABULARY)] for _ in range(50)],
        "two mid words (AND)": [
            f"{words[rng.randrange(200, 2000)]} {words[rng.randrange(200, 2000)]}" for _ in range(50)
        ],
        "phrase from a stored message": phrases[:50],
        "no match": [f"zzq{n}" for n in range(50)],
    }


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def run_queries(db: Database, sets: dict[str, list[str]], per_set: int) -> None:
    everything: list[float] = []
    for label, qs in sets.items():
        search(db, parse(qs[0]), None, 20)  # warm
        seconds = [timed(partial(search, db, parse(q), None, 20)) for q in qs[:per_set]]
        everything += seconds
        print("  " + ms_summary(label, seconds))
    print("  " + ms_summary("all queries", everything))


def index_cost(backend: str, tmp: Path, rng: random.Random, words: list[str], cum: list[float]) -> None:
    """The same messages into a database with the index triggers and one without."""
    figures = {}
    for indexed in (True, False):
        with scratch(backend, tmp / f"cost-{indexed}") as db:
            add_workstreams(db)
            if not indexed:
                drop_index_triggers(db)
            batched = fill(db, messages(random.Random(7), words, cum, COST_MESSAGES), COST_MESSAGES)
            single = []
            for row in messages(random.Random(8), words, cum, COST_SINGLE):
                with db.session() as s:
                    started = time.perf_counter()
                    s.execute(
                        text(
                            "INSERT INTO messages (ws_id, role, content, created_at, is_error) "
                            "VALUES (:w, :r, :c, :t, false)"
                        ),
                        {"w": row[0], "r": row[1], "c": row[2], "t": row[3]},
                    )
                s.close()
                single.append(time.perf_counter() - started)
            figures[indexed] = (batched / COST_MESSAGES, sorted(single)[len(single) // 2])
    (b1, s1), (b0, s0) = figures[True], figures[False]
    each = f"{b1 * 1e6:7.1f} µs/message with the index, {b0 * 1e6:7.1f} without"
    print(f"  index cost, batched insert:      {each} (+{(b1 - b0) * 1e6:.1f} µs)")
    print(f"  index cost, one insert (median): {s1 * 1e3:7.3f} ms with the index, {s0 * 1e3:7.3f} without "
          f"(+{(s1 - s0) * 1e3:.3f} ms; the statement, commit not included)")  # fmt: skip


class scratch:  # noqa: N801 - a context manager
    def __init__(self, backend: str, tmp: Path) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        self.made = ScratchDatabase(backend, tmp)

    def __enter__(self) -> Database:
        upgrade(self.made.url)
        self.db = Database(self.made.url)
        return self.db

    def __exit__(self, *exc: object) -> None:
        self.db.dispose()
        self.made.drop()


def size_of_index(db: Database, path: Path | None) -> str:
    with db.reader() as s:
        if db.is_postgresql:
            index = s.execute(text("SELECT pg_total_relation_size('message_search')")).scalar_one()
            table = s.execute(text("SELECT pg_total_relation_size('messages')")).scalar_one()
            return f"message_search {index / 2**20:.0f} MiB beside messages {table / 2**20:.0f} MiB"
    assert path is not None
    return f"the whole SQLite file (messages and FTS5 index) {path.stat().st_size / 2**20:.0f} MiB"


def bench(backend: str, count: int, per_set: int) -> None:
    print(f"\n== {backend}: {count:,} messages")
    rng = random.Random(42)
    words, cum = vocabulary(rng)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with scratch(backend, tmp / "big") as db:
            add_workstreams(db)
            seconds = fill(db, messages(rng, words, cum, count), count)
            rate = f"{count / seconds:,.0f}/s, index triggers on"
            print(f"  stored {count:,} messages in {seconds:.1f} s ({rate})")
            if db.is_postgresql:
                with db.session() as s:
                    s.execute(text("ANALYZE"))
            print(
                "  size: "
                + size_of_index(db, None if db.is_postgresql else Path(db.url.removeprefix("sqlite:///")))
            )
            run_queries(db, queries(rng, words, db), per_set)
        index_cost(backend, tmp, rng, words, cum)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--queries", type=int, default=50, help="queries of each kind")
    args = parser.parse_args()
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    print(f"cpus: {os.cpu_count()}")
    for backend in backends:
        if backend == "postgresql" and not postgres_available():
            print("\n== postgresql: not reachable (set TEST_PG_ADMIN_URL); skipped")
            continue
        bench(backend, args.messages, args.queries)


if __name__ == "__main__":
    main()
