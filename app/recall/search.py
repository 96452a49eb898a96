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
    "WHERE message_search MATCH :match AND m.ws_id IN ({owned}) AND m.branch_id IS NULL "
    "AND (m.turn_id IS NULL OR m.turn_id != :turn) "
    "ORDER BY message_search.rowid DESC LIMIT :limit"
)
# PostgreSQL cannot walk a GIN index in id order, and its estimate of how many rows a rare
# word matches is too coarse to choose well between the GIN index and a walk down the ids.
# So the newest RECENT_WINDOW messages are tried first (a common word finds its `limit`
# there at once); only when they hold fewer matches is the GIN index asked for every match,
# which is then a word rare enough for that to be quick.
RECENT_WINDOW = 2_000
_RECENT = "(SELECT message_id, tsv FROM message_search ORDER BY message_id DESC LIMIT :window)"
CANDIDATES_PER_RESULT = 4
_PG_NEWEST = (
    "SELECT message_id FROM message_search WHERE tsv @@ ({tsquery}) ORDER BY message_id DESC LIMIT :few"
)
_PG_AMONG = "(SELECT message_id, tsv FROM message_search WHERE message_id = ANY(:ids))"
# The ids first, the headlines after: ts_headline re-reads a row's text, so it runs on the
# few rows the limit keeps, never on every match.
_POSTGRES = (
    "WITH hits AS (SELECT s.message_id FROM {source} s JOIN messages m ON m.id = s.message_id "
    "WHERE s.tsv @@ ({tsquery}) AND m.ws_id IN ({owned}) AND m.branch_id IS NULL "
    "AND (m.turn_id IS NULL OR m.turn_id != :turn) ORDER BY s.message_id DESC LIMIT :limit) "
    "SELECT m.id, m.ws_id, w.name AS workstream, m.role, m.name AS tool, m.created_at, "
    "ts_headline('simple', message_search_text(m.content, m.tool_calls), ({tsquery}), "
    f"'StartSel={MARK_OPEN}, StopSel={MARK_CLOSE}, MaxWords={SNIPPET_WORDS}, MinWords=8') AS snippet "
    "FROM hits JOIN messages m ON m.id = hits.message_id JOIN workstreams w ON w.id = m.ws_id "
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
        conn = s.connection()
        owned_sql = str(owned.compile(conn, compile_kwargs={"literal_binds": True}))
        params: dict[str, Any] = {"turn": skip_turn or "", "limit": limit}
        if db.is_postgresql:
            rows = _postgres(conn, query, owned_sql, params)
        else:
            params["match"] = query.fts5()
            rows = _run(conn, _SQLITE.format(owned=owned_sql), params)
    return [_hit(row) for row in rows]


def _postgres(conn: Any, query: Query, owned_sql: str, params: dict[str, Any]) -> list[Any]:
    tsquery = " && ".join(f"phraseto_tsquery('simple', :t{n})" for n in range(len(query.texts)))
    terms = {f"t{n}": t for n, t in enumerate(query.texts)}
    params = {**params, **terms}
    recent = _run(conn, _POSTGRES.format(source=_RECENT, tsquery=tsquery, owned=owned_sql),
                  {**params, "window": RECENT_WINDOW})  # fmt: skip
    if len(recent) >= params["limit"]:
        return recent
    # SET LOCAL: for this read's transaction only, which ends when the session closes.
    conn.exec_driver_sql("SET LOCAL enable_indexscan = off")  # the GIN index, as a bitmap
    conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
    # The newest few matching ids from the index alone, then the joins for those only: joining
    # every match to its message before the sort is what costs.
    few = CANDIDATES_PER_RESULT * params["limit"]
    ids = [row.message_id for row in _run(conn, _PG_NEWEST.format(tsquery=tsquery), {**terms, "few": few})]
    found = _run(
        conn, _POSTGRES.format(source=_PG_AMONG, tsquery=tsquery, owned=owned_sql), {**params, "ids": ids}
    )
    if len(found) >= params["limit"] or len(ids) < few:
        return found
    # most of the newest matches are in workstreams the caller may not search: every match, then
    return _run(conn, _POSTGRES.format(source="message_search", tsquery=tsquery, owned=owned_sql), params)


def _run(conn: Any, sql: str, params: dict[str, Any]) -> list[Any]:
    return list(conn.execute(text(sql).bindparams(*(bindparam(k) for k in params)), params).all())


def _hit(row: Any) -> Hit:
    created = row.created_at
    if isinstance(created, str):  # SQLite through a text() query: no column type to convert it
        created = datetime.fromisoformat(created)
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return Hit(row.id, row.ws_id, row.workstream, row.role, row.tool, created, " ".join(row.snippet.split()))
