"""Recall's search over the `message_search` index (migration 0004): FTS5 on SQLite, a
tsvector with a GIN index on PostgreSQL. Newest matches first, within an owner's workstreams.

Newest first (not best first) keeps a query's cost bounded by the limit rather than by
how many messages match: both indexes hand out matches in message-id order.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import bindparam, text

from app.memory import owners
from app.recall.query import Query
from app.storage.database import Database

MARK_OPEN, MARK_CLOSE = "«", "»"  # around each match in a snippet
SNIPPET_WORDS = 24

_SQLITE = (
    "SELECT m.id, m.ws_id, w.name AS workstream, m.role, m.name AS tool, m.created_at, "
    f"snippet(message_search, 0, '{MARK_OPEN}', '{MARK_CLOSE}', '…', {SNIPPET_WORDS}) AS snippet "
    "FROM message_search JOIN messages m ON m.id = message_search.rowid "
    "JOIN workstreams w ON w.id = m.ws_id "
    "WHERE message_search MATCH :match AND m.ws_id IN ({owned}) "
    "AND (m.turn_id IS NULL OR m.turn_id != :turn) "
    "ORDER BY message_search.rowid DESC LIMIT :limit"
)
# The ids first, the headlines after: ts_headline re-reads a row's text, so it runs on the
# few rows the limit keeps, never on every match.
_POSTGRES = (
    "WITH q AS (SELECT {tsquery} AS query), hits AS ("
    "SELECT s.message_id FROM q, message_search s JOIN messages m ON m.id = s.message_id "
    "WHERE s.tsv @@ q.query AND m.ws_id IN ({owned}) "
    "AND (m.turn_id IS NULL OR m.turn_id != :turn) ORDER BY s.message_id DESC LIMIT :limit) "
    "SELECT m.id, m.ws_id, w.name AS workstream, m.role, m.name AS tool, m.created_at, "
    "ts_headline('simple', message_search_text(m.content, m.tool_calls), q.query, "
    f"'StartSel={MARK_OPEN}, StopSel={MARK_CLOSE}, MaxWords={SNIPPET_WORDS}, MinWords=8') AS snippet "
    "FROM hits JOIN messages m ON m.id = hits.message_id JOIN workstreams w ON w.id = m.ws_id, q "
    "ORDER BY m.id DESC"
)


@dataclass(frozen=True)
class Hit:
    message_id: int
    ws_id: str
    workstream: str
    role: str
    tool: str | None
    created_at: datetime
    snippet: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "message_id": self.message_id,
            "ws_id": self.ws_id,
            "workstream": self.workstream,
            "role": self.role,
            "tool": self.tool,
            "created_at": self.created_at.isoformat(),
            "snippet": self.snippet,
        }


def search(
    db: Database, query: Query, owner: str | None, limit: int, skip_turn: str | None = None
) -> list[Hit]:
    """Messages of `owner`'s workstreams matching every term of `query`, newest first;
    `skip_turn`'s own messages (the turn asking) left out."""
    owned = owners.owned_workstreams(owner)
    with db.reader() as s:
        owned_sql = owned.compile(s.get_bind(), compile_kwargs={"literal_binds": True})
        params: dict[str, Any] = {"turn": skip_turn or "", "limit": limit}
        if db.is_postgresql:
            terms = [f"phraseto_tsquery('simple', :t{n})" for n in range(len(query.texts))]
            params.update({f"t{n}": t for n, t in enumerate(query.texts)})
            sql = _POSTGRES.format(tsquery=" && ".join(terms), owned=owned_sql)
        else:
            params["match"] = query.fts5()
            sql = _SQLITE.format(owned=owned_sql)
        statement = text(sql).bindparams(*(bindparam(k) for k in params))
        rows = s.connection().execute(statement, params).all()
    return [_hit(row) for row in rows]


def _hit(row: Any) -> Hit:
    created = row.created_at
    if isinstance(created, str):  # SQLite through a text() query: no column type to convert it
        created = datetime.fromisoformat(created)
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return Hit(row.id, row.ws_id, row.workstream, row.role, row.tool, created, " ".join(row.snippet.split()))
