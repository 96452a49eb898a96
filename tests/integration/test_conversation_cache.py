"""The worker's copy of a conversation against a real database: every read gives what a whole
reload would, whatever order rows commit in, and loads only the rows it has not seen."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import event

from app.engine.conversation import stored
from app.engine.conversation.cache import ConversationCache
from app.storage.database import Database
from app.storage.models import Message
from tests.integration.storage import add_message, add_workstream, migrated

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    yield from migrated(request.param, tmp_path)


def fields(rows: list[Message]) -> list[tuple[object, ...]]:
    return [(r.id, r.role, r.content, r.tool_calls, r.tool_call_id) for r in rows]


def read(db: Database, cache: ConversationCache, ws_id: str) -> list[Message]:
    with db.reader() as s:
        return cache.messages(s, ws_id)


def read_noting_queries(
    db: Database, cache: ConversationCache, ws_id: str
) -> tuple[list[Message], list[tuple[str, object]]]:
    """`read`, and the SELECTs it ran (statement, parameters); not SQLite's BEGIN."""
    queries: list[tuple[str, object]] = []

    def note(_conn, _cursor, statement, params, _context, _many):
        if statement.lstrip().upper().startswith("SELECT"):
            queries.append((statement, params))

    event.listen(db._reader_engine, "before_cursor_execute", note)
    try:
        return read(db, cache, ws_id), queries
    finally:
        event.remove(db._reader_engine, "before_cursor_execute", note)


def whole(db: Database, ws_id: str) -> list[Message]:
    with db.reader() as s:
        return stored.messages(s, ws_id)


def test_each_read_is_the_whole_conversation_with_the_new_rows(db):
    ws = add_workstream(db, "ws1")
    other = add_workstream(db, "ws2")
    cache = ConversationCache()
    assert read(db, cache, ws) == []
    add_message(db, ws, "user", "hello")
    add_message(db, other, "user", "not this one")
    call = [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]
    add_message(db, ws, "assistant", "", tool_calls=call)
    assert fields(read(db, cache, ws)) == fields(whole(db, ws))
    add_message(db, ws, "tool", "done", tool_call_id="c1", name="bash")
    add_message(db, ws, "assistant", "it is done")
    rows = read(db, cache, ws)
    assert [r.content for r in rows] == ["hello", "", "done", "it is done"]
    assert fields(rows) == fields(whole(db, ws))


def test_a_row_that_commits_below_one_already_read_is_not_missed(db):
    # On PostgreSQL a transaction that took a lower id may commit after one with a higher id
    # (a watch's message written while a batch stores its result): the copy must not skip it.
    ws = add_workstream(db, "ws1")
    cache = ConversationCache()
    with db.session() as s:
        s.add(Message(id=1000, ws_id=ws, role="user", content="first"))
        s.add(Message(id=1002, ws_id=ws, role="user", content="third"))
    assert [r.content for r in read(db, cache, ws)] == ["first", "third"]
    with db.session() as s:
        s.add(Message(id=1001, ws_id=ws, role="user", content="second, committed last"))
    assert [r.content for r in read(db, cache, ws)] == ["first", "second, committed last", "third"]


def loaded_noting(db: Database, cache: ConversationCache, ws_id: str) -> tuple[list[Message], int, list[int]]:
    """`read`, the SELECTs it ran, and the ids of the message rows it loaded from the database."""
    loaded: list[int] = []

    def note(target: Message, _context: object) -> None:
        loaded.append(target.id)  # type: ignore[arg-type]

    event.listen(Message, "load", note)
    try:
        rows, queries = read_noting_queries(db, cache, ws_id)
    finally:
        event.remove(Message, "load", note)
    return rows, len(queries), loaded


def test_a_read_loads_only_the_rows_it_has_not_seen_in_one_query(db):
    ws = add_workstream(db, "ws1")
    for n in range(50):
        add_message(db, ws, "user", f"message {n}")
    cache = ConversationCache()
    read(db, cache, ws)
    newest = [add_message(db, ws, "user", "the new one"), add_message(db, ws, "user", "and another")]
    rows, queries, loaded = loaded_noting(db, cache, ws)
    assert len(rows) == 52 and [r.content for r in rows[-2:]] == ["the new one", "and another"]
    assert queries == 1 and loaded == newest


def test_a_deleted_workstream_leaves_nothing_behind_and_others_are_dropped_when_many(db):
    ws = add_workstream(db, "ws1")
    add_message(db, ws, "user", "hello")
    cache = ConversationCache(kept=1)
    assert len(read(db, cache, ws)) == 1
    with db.session() as s:
        for row in s.exec(stored.select(Message).where(Message.ws_id == ws)).all():
            s.delete(row)
    assert read(db, cache, ws) == []
    other = add_workstream(db, "ws2")
    add_message(db, other, "user", "there")
    assert [r.content for r in read(db, cache, other)] == ["there"]
    add_message(db, ws, "user", "again")
    assert [r.content for r in read(db, cache, ws)] == ["again"]


def test_each_rows_entry_for_the_model_is_made_once_and_matches_a_whole_reload(db):
    ws = add_workstream(db, "ws1")
    cache = ConversationCache()
    made: list[int | None] = []

    def make(row: Message) -> dict[str, object]:
        made.append(row.id)
        return stored.model_entry(row)

    def entries() -> list[dict[str, object]]:
        with db.reader() as s:
            return cache.model_entries(s, ws, make)

    first = add_message(db, ws, "user", "hello")
    call = [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]
    add_message(db, ws, "assistant", "", tool_calls=call)
    before = entries()
    assert before == stored.for_model("s", whole(db, ws))[1:]
    last = add_message(db, ws, "tool", "done", tool_call_id="c1", name="bash")
    after = entries()
    assert after == stored.for_model("s", whole(db, ws))[1:]
    assert all(a is b for a, b in zip(before, after, strict=False))  # the same objects, not made again
    assert made == [first, first + 1, last]
    with db.session() as s:  # a lower id committing late is still seen
        s.add(Message(id=first - 1, ws_id=ws, role="user", content="late"))
    assert [e["content"] for e in entries()] == ["late", "hello", "", "done"]


def test_a_read_with_nothing_new_is_one_query_that_loads_no_row(db):
    ws = add_workstream(db, "ws1")
    for n in range(20):
        add_message(db, ws, "user", f"message {n}")
    cache = ConversationCache()
    read(db, cache, ws)
    rows, queries, loaded = loaded_noting(db, cache, ws)
    assert len(rows) == 20 and queries == 1 and loaded == []
    assert read(db, ConversationCache(), ws) == rows  # a new copy reads them all, the same


def test_a_restore_that_swaps_as_many_rows_as_it_takes_is_read_anew(db):
    """A restore (app/engine/life/branches.py) marks the conversation's tail as a branch and
    unmarks another as many rows long, adding none: the count alone cannot tell, the
    workstream's history version does."""
    from sqlalchemy import update

    from app.storage.models import Workstream

    ws = add_workstream(db, "ws1")
    cache = ConversationCache()
    first = [add_message(db, ws, "user", "q"), add_message(db, ws, "assistant", "a")]
    old = [add_message(db, ws, "user", "q2"), add_message(db, ws, "assistant", "old answer")]
    assert [r.id for r in read(db, cache, ws)] == first + old

    def move(tail: list[int], branch: str | None, back: list[int] | None = None) -> None:
        with db.session() as s:
            s.exec(update(Message).where(Message.id.in_(tail)).values(branch_id=branch))
            if back:
                s.exec(update(Message).where(Message.id.in_(back)).values(branch_id=None))
            s.exec(
                update(Workstream)
                .where(Workstream.id == ws)
                .values(history_version=Workstream.history_version + 1)
            )

    move(old, "b1")  # rewound
    new = [add_message(db, ws, "user", "q2"), add_message(db, ws, "assistant", "new answer")]
    assert [r.content for r in read(db, cache, ws)] == ["q", "a", "q2", "new answer"]
    move(new, "b2", back=old)  # the old answer restored
    assert fields(read(db, cache, ws)) == fields(whole(db, ws))
    assert [r.content for r in read(db, cache, ws)] == ["q", "a", "q2", "old answer"]
