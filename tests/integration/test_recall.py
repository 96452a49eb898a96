"""recall against a real database (SQLite FTS5 and PostgreSQL tsvector): a message is findable
as soon as it is stored, tool calls and results are found, a query is only ever words and
phrases, and another owner's workstreams are never searched."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from app.recall.query import parse
from app.recall.search import search
from app.tools.core.base import ToolContext
from app.tools.core.pipeline import execute_call, prepare_call
from app.tools.core.registry import build_registry
from tests.integration.storage import Owners, add_message, add_workstream, migrated

pytestmark = pytest.mark.integration

REGISTRY = build_registry()


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    yield from migrated(request.param, tmp_path)


def recall(db, ws_id: str, turn_id: str | None = None, **args) -> tuple[str, bool]:
    ctx = ToolContext(ws_id=ws_id, working_dir="/tmp", db=db, turn_id=turn_id)
    prepared = prepare_call(REGISTRY, "c1", "recall", json.dumps(args), ctx)
    outcome = execute_call(REGISTRY, prepared, ctx)
    return outcome.output, outcome.is_error


def test_a_stored_message_is_found_at_once_with_where_who_when_and_a_marked_snippet(db):
    ws = add_workstream(db, "ws_billing", "billing service")
    add_message(db, ws, "user", "Why does the invoice generator crash on leap years?")
    out, err = recall(db, ws, query="invoice generator")
    assert not err
    header, snippet = out.split("\n", 1)
    assert header.endswith("] billing service (ws_billing), user:") and header.startswith("[20")
    assert "«invoice» «generator» crash on leap years" in snippet


def test_tool_calls_and_tool_results_are_found(db):
    ws = add_workstream(db, "ws1")
    calls = [
        {
            "id": "c",
            "type": "function",
            "function": {"name": "bash", "arguments": '{"command": "pg_dump zebrafish"}'},
        }
    ]
    add_message(db, ws, "assistant", "", tool_calls=calls)
    add_message(db, ws, "tool", "dumped 42 tables of quokka", tool_call_id="c", name="bash")
    out, _ = recall(db, ws, query="zebrafish")
    assert "assistant:" in out and "«zebrafish»" in out
    out, _ = recall(db, ws, query="quokka")
    assert "tool result (bash):" in out and "«quokka»" in out
    out, _ = recall(db, ws, query="bash")  # the tool's name is indexed with its call
    assert "assistant:" in out


def test_newest_first_limit_and_the_asking_turn_left_out(db):
    ws = add_workstream(db, "ws1")
    for n in range(5):
        add_message(db, ws, "user", f"pelican report number {n}")
    add_message(db, ws, "user", "find pelican", turn_id="asking")
    out, _ = recall(db, ws, turn_id="asking", query="pelican", limit=3)
    entries = out.split("\n\n")
    assert [e.rsplit("number ", 1)[1][0] for e in entries] == ["4", "3", "2"]
    assert "find" not in out


def test_phrases_and_words(db):
    ws = add_workstream(db, "ws1")
    add_message(db, ws, "user", "the red kite flew over the green field")
    add_message(db, ws, "user", "a green kite and a red field")
    assert recall(db, ws, query='"red kite"')[0].count("\n\n") == 0  # one match: the phrase
    assert recall(db, ws, query="red kite")[0].count("\n\n") == 1  # both: every word, anywhere
    assert recall(db, ws, query="kite NEAR ostrich")[0].startswith("Nothing")  # NEAR is a word


HOSTILE = [
    '"',
    '""',
    '"unclosed phrase',
    "*",
    "kite*",
    "-kite",
    "NOT kite",
    "kite OR field",
    "kite AND",
    "(kite",
    "kite)",
    "NEAR(kite field)",
    "body:kite",
    "{body}: kite",
    "^kite",
    "kite:*",
    "kite & field | !x <-> y",
    "'; DROP TABLE messages; --",
    "kite' OR '1'='1",
    "\\",
    "kite\x00field",
    "kite \ud800",
    "\u202ekite",
    "キツネ kite",
    "a" * 999,
    " ".join(["kite"] * 16),
]


@pytest.mark.parametrize("query", HOSTILE)
def test_a_query_is_data_never_syntax(db, query):
    ws = add_workstream(db, "ws1")
    add_message(db, ws, "user", "the red kite flew over the green field")
    out, err = recall(db, ws, query=query)
    if err:  # no words at all: an error item that says so, never a crash
        assert out == "Error: recall: the query has no words to look for", out
        return
    assert not out.startswith("Error"), out
    words = parse(query).terms
    if all(w in ("kite", "field", "red", "green") for w in words):
        assert "«kite»" in out or "«field»" in out
    else:
        assert out.startswith("Nothing in the conversation history matches")
    rows = search(db, parse("kite"), None, 5)  # the table is still there and whole
    assert len(rows) == 1


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"query": ""}, "Error: recall needs 'query', a non-empty string"),
        ({"query": 42}, "Error: recall needs 'query', a non-empty string"),
        ({"query": "x", "limit": 0}, "Error: recall's limit must be a whole number from 1 to 100"),
        ({"query": "x", "limit": False}, "Error: recall's limit must be a whole number from 1 to 100"),
        ({"query": "x" * 1001}, "Error: recall: the query is 1001 characters; at most 1000"),
        ({"query": " ".join(f"w{n}" for n in range(17))}, "Error: recall: the query has 17 words or phrases"),
    ],
)
def test_wrong_arguments_are_error_items(db, args, error):
    ws = add_workstream(db, "ws1")
    out, err = recall(db, ws, **args)
    assert err and out.startswith(error)


def test_huge_and_odd_messages_are_stored_and_found(db):
    ws = add_workstream(db, "ws1")
    unique = " ".join(f"w{n}x" for n in range(60_000))  # far past what one tsvector may hold
    add_message(db, ws, "tool", unique + " needle", name="bash")
    add_message(db, ws, "user", "nul\x00 and \ud800 beside albatross")
    add_message(db, ws, "assistant", None, tool_calls=[{"function": {"name": "x"}}, "not an object", 7])
    assert "«w5x»" in recall(db, ws, query="w5x")[0]
    assert "«albatross»" in recall(db, ws, query="albatross")[0]


def test_another_owners_workstreams_are_never_searched(db):
    owners = Owners(db)
    mine, theirs = add_workstream(db, "mine"), add_workstream(db, "theirs")
    owners.set(mine="alice", theirs="bob")
    add_message(db, mine, "user", "alice's narwhal plan")
    add_message(db, theirs, "user", "bob's narwhal secret")
    out, _ = recall(db, mine, query="narwhal")
    assert "alice's" in out and "bob" not in out
    out, _ = recall(db, theirs, query="narwhal")
    assert "bob's" in out and "alice" not in out


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_messages_stored_before_the_migration_are_indexed_by_it(backend, tmp_path):
    from alembic import command

    from app.storage.database import Database
    from app.storage.migrate import alembic_config
    from tests.integration.services import Database as ScratchDatabase
    from tests.integration.services import postgres_available

    if backend == "postgresql" and not postgres_available():
        pytest.skip("PostgreSQL is not reachable")
    made = ScratchDatabase(backend, tmp_path)
    try:
        command.upgrade(alembic_config(made.url), "0003_durability_and_tools")
        db = Database(made.url)
        with db.session() as s:
            s.execute(
                text(
                    "INSERT INTO workstreams (id, name, kind, auto_approve, auto_approve_tools, read_paths, "
                    "expanded_tools, working_dir, state, created_at, updated_at) VALUES ('old', 'old', "
                    "'interactive', false, '[]', '[]', '[]', '/tmp', 'idle', :t, :t)"
                ),
                {"t": datetime.now(UTC)},
            )
            s.execute(
                text(
                    "INSERT INTO messages (ws_id, role, content, is_error, created_at) "
                    "VALUES ('old', 'user', 'an archaeopteryx before the index', false, :t)"
                ),
                {"t": datetime.now(UTC)},
            )
        command.upgrade(alembic_config(made.url), "head")
        assert "«archaeopteryx»" in recall(db, "old", query="archaeopteryx")[0]
        command.downgrade(alembic_config(made.url), "0003_durability_and_tools")  # and back cleanly
        db.dispose()
    finally:
        made.drop()


def test_an_owners_old_match_is_found_under_many_newer_ones_of_another(db):
    owners = Owners(db)
    mine, theirs = add_workstream(db, "mine"), add_workstream(db, "theirs")
    owners.set(mine="alice", theirs="bob")
    add_message(db, mine, "user", "alice's old okapi note")
    for n in range(120):  # more than the candidates PostgreSQL takes from the index first
        add_message(db, theirs, "user", f"bob's okapi note {n}")
    out, _ = recall(db, mine, query="okapi")
    assert out.count("\n\n") == 0 and "alice's old «okapi» note" in out


def test_messages_a_rewind_took_out_are_not_found(db):
    """recall follows the conversation: a message in a branch (app/engine/life/branches.py)
    is not found until it is restored."""
    ws = add_workstream(db, "ws_rewound", "rewound")
    kept = add_message(db, ws, "user", "the kept zeppelin plan")
    taken = add_message(db, ws, "user", "the discarded zeppelin plan", branch_id="b1")
    out, err = recall(db, ws, query="zeppelin")
    assert not err and "kept «zeppelin»" in out and "discarded" not in out, out
    assert kept < taken
