"""The MCP servers kept in the database (the admin API's), as `ServerConfig`s."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlmodel import select

from app.mcp.config import ORIGIN_DB, ServerConfig, parse_server
from app.storage.database import Database
from app.storage.models import McpServer, utcnow

log = logging.getLogger(__name__)


def load(db: Database) -> dict[str, ServerConfig]:
    """Every stored server; a database that cannot be read yet (not migrated) holds none."""
    try:
        with db.reader() as s:
            rows = list(s.exec(select(McpServer)).all())
    except SQLAlchemyError as exc:
        log.warning("reading the stored MCP servers: %s", type(exc).__name__)
        return {}
    servers = {}
    for row in rows:
        try:
            servers[row.name] = parse_server(row.name, _entry(row), ORIGIN_DB)
        except ValueError as exc:  # stored by an older version with other rules
            log.warning("stored MCP server %s is unusable: %s", row.name, exc)
    return servers


def changed_at(db: Database) -> dict[str, float]:
    """When each stored server's definition was last written, as a Unix time: a worker's report
    older than that speaks of the definition before it (or of a server deleted since)."""
    try:
        with db.reader() as s:
            rows = s.exec(select(McpServer.name, McpServer.updated_at)).all()
    except SQLAlchemyError as exc:
        log.warning("reading the stored MCP servers: %s", type(exc).__name__)
        return {}
    return {name: _aware(at).timestamp() for name, at in rows}


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)  # SQLite gives them back naive


def save(db: Database, config: ServerConfig, create: bool) -> bool:
    """Store `config`; False when `create` and the name is taken, or not `create` and it is not."""
    try:
        return _save(db, config, create)
    except IntegrityError:  # another request created the same name first
        return False


def _save(db: Database, config: ServerConfig, create: bool) -> bool:
    with db.session() as s:
        row = s.get(McpServer, config.name)
        if (row is None) != create:
            return False
        row = row or McpServer(name=config.name, transport=config.transport)
        row.transport = config.transport
        row.command = config.command
        row.args = list(config.args)
        row.env = dict(config.env)
        row.cwd = config.cwd
        row.url = config.url
        row.headers = dict(config.headers)
        row.updated_at = utcnow()
        s.add(row)
    return True


def delete(db: Database, name: str) -> bool:
    with db.session() as s:
        row = s.get(McpServer, name)
        if row is None:
            return False
        s.delete(row)
    return True


def _entry(row: McpServer) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": row.transport}
    if row.transport == "http":
        entry.update(url=row.url, headers=row.headers)
    else:
        entry.update(command=row.command, args=row.args, env=row.env, cwd=row.cwd)
    return entry
