"""memories, the recall full-text index over messages, skills (prompt_templates), the active skill

Revision ID: 0004_memory_recall_skills
Revises: 0004_mcp_servers
Create Date: 2026-12-03 09:30:00

The recall index is kept by triggers, so a message is findable in the transaction that
stores it, whoever stores it: SQLite gets an FTS5 table (`message_search`, rowid = the
message id), PostgreSQL a `message_search` table of tsvectors with a GIN index. Both index
the message's text and its tool calls' names and arguments, the first
RECALL_INDEXED_CHARS characters of them (app/recall/search.py queries them).
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0004_memory_recall_skills"
down_revision = "0004_mcp_servers"
branch_labels = None
depends_on = None

RECALL_INDEXED_CHARS = 100_000  # a tsvector holds at most 1 MB; more text adds little to find it by

_SQLITE_BODY = (
    "substr(coalesce({row}.content, '') || ' ' || coalesce((SELECT group_concat("
    "coalesce(json_extract(value, '$.function.name'), '') || ' ' || "
    "coalesce(json_extract(value, '$.function.arguments'), ''), ' ') "
    "FROM json_each(CASE WHEN json_type({row}.tool_calls) = 'array' "
    "THEN {row}.tool_calls ELSE '[]' END) WHERE type = 'object'), ''), "
    f"1, {RECALL_INDEXED_CHARS})"
)

SQLITE_UP = [
    "CREATE VIRTUAL TABLE message_search USING fts5(body, tokenize = 'unicode61 remove_diacritics 2')",
    "CREATE TRIGGER message_search_insert AFTER INSERT ON messages BEGIN "
    f"INSERT INTO message_search(rowid, body) VALUES (new.id, {_SQLITE_BODY.format(row='new')}); END",
    "CREATE TRIGGER message_search_update AFTER UPDATE OF content, tool_calls ON messages BEGIN "
    "DELETE FROM message_search WHERE rowid = old.id; "
    f"INSERT INTO message_search(rowid, body) VALUES (new.id, {_SQLITE_BODY.format(row='new')}); END",
    "CREATE TRIGGER message_search_delete AFTER DELETE ON messages BEGIN "
    "DELETE FROM message_search WHERE rowid = old.id; END",
    f"INSERT INTO message_search(rowid, body) SELECT id, {_SQLITE_BODY.format(row='messages')} FROM messages",
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS message_search_delete",
    "DROP TRIGGER IF EXISTS message_search_update",
    "DROP TRIGGER IF EXISTS message_search_insert",
    "DROP TABLE IF EXISTS message_search",
]

POSTGRES_UP = [
    # IMMUTABLE: recall's snippets (ts_headline) rebuild the same text from the same row.
    "CREATE FUNCTION message_search_text(content text, tool_calls json) RETURNS text "
    "LANGUAGE sql IMMUTABLE AS $$ SELECT left(coalesce(content, '') || ' ' || coalesce(("
    "SELECT string_agg(coalesce(c->'function'->>'name', '') || ' ' || "
    "coalesce(c->'function'->>'arguments', ''), ' ') FROM json_array_elements("
    "CASE WHEN json_typeof(tool_calls) = 'array' THEN tool_calls ELSE '[]'::json END) AS c), ''), "
    f"{RECALL_INDEXED_CHARS}) $$",
    "CREATE TABLE message_search (message_id integer PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE, "
    "tsv tsvector NOT NULL)",
    "CREATE INDEX ix_message_search_tsv ON message_search USING gin (tsv)",
    "CREATE FUNCTION message_search_refresh() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "INSERT INTO message_search(message_id, tsv) "
    "VALUES (NEW.id, to_tsvector('simple', message_search_text(NEW.content, NEW.tool_calls))) "
    "ON CONFLICT (message_id) DO UPDATE SET tsv = EXCLUDED.tsv; RETURN NULL; END $$",
    "CREATE TRIGGER message_search_refresh AFTER INSERT OR UPDATE OF content, tool_calls ON messages "
    "FOR EACH ROW EXECUTE FUNCTION message_search_refresh()",
    "INSERT INTO message_search(message_id, tsv) "
    "SELECT id, to_tsvector('simple', message_search_text(content, tool_calls)) FROM messages",
]
POSTGRES_DOWN = [
    "DROP TRIGGER IF EXISTS message_search_refresh ON messages",
    "DROP FUNCTION IF EXISTS message_search_refresh()",
    "DROP TABLE IF EXISTS message_search",
    "DROP FUNCTION IF EXISTS message_search_text(text, json)",
]


def upgrade() -> None:
    with op.batch_alter_table("workstreams", schema=None) as batch_op:
        batch_op.add_column(sa.Column("skill", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True))
        batch_op.add_column(sa.Column("skill_content", sa.Text(), nullable=True))
    op.create_table(
        "memories",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("type", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("scope", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("scope_key", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("ws_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True),
        sa.Column("owner_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("updated_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("scope", "scope_key", "name"),
    )
    op.create_index(op.f("ix_memories_ws_id"), "memories", ["ws_id"], unique=False)
    op.create_index(op.f("ix_memories_owner_id"), "memories", ["owner_id"], unique=False)
    # prompt_templates (skills) came with 0004_mcp_servers, which syncs MCP prompts into it.
    for statement in POSTGRES_UP if op.get_bind().dialect.name == "postgresql" else SQLITE_UP:
        op.execute(statement)


def downgrade() -> None:
    for statement in POSTGRES_DOWN if op.get_bind().dialect.name == "postgresql" else SQLITE_DOWN:
        op.execute(statement)
    op.drop_index(op.f("ix_memories_owner_id"), table_name="memories")
    op.drop_index(op.f("ix_memories_ws_id"), table_name="memories")
    op.drop_table("memories")
    # ALTER TABLE ... DROP COLUMN (SQLite 3.35+): a batch copy of workstreams would drop the
    # table that messages and turns refer to, which SQLite's foreign keys refuse.
    with op.batch_alter_table("workstreams", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("skill_content")
        batch_op.drop_column("skill")
