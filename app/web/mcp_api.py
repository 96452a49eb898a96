"""The MCP admin API under /v1/api/mcp: status from the workers, servers kept in the database.

The web tier never starts a server: it stores definitions, tells every worker on the
control channel, and reads what the workers publish."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify

from app.errors import ConflictError, NotFoundError, ServiceError, UnprocessableError
from app.mcp import status, store
from app.mcp.config import ORIGIN_DB, ServerConfig, ServerConfigError, parse_server
from app.mcp.service import announce
from app.runtime import Runtime
from app.web import shapes
from app.web.contract import operation

mcp_api = Blueprint("mcp_api", __name__, url_prefix="/v1/api/mcp")

WRITE_ONLY = ("env", "headers")


class ForbiddenError(ServiceError):
    status = 403


def _rt() -> Runtime:
    return current_app.extensions["runtime"]


@mcp_api.get("")
@operation("Every MCP server's state as the workers report it", answers={200: shapes.McpOverview})
def overview() -> Any:
    rt = _rt()
    merged = status.read(rt.redis)
    reported = {s["name"]: s for s in merged["servers"]}
    changed = store.changed_at(rt.db)
    servers = []
    for name, config in sorted(rt.mcp.servers().items()):
        seen = reported.get(name)
        if seen and _reported_at(seen, merged) < changed.get(name, 0.0):
            seen = None  # of the definition before this one: no worker has caught up yet
        servers.append({**_unreported(config), **(seen or {}), "origin": config.origin})
    return jsonify(servers=servers, workers=merged["workers"], totals=status.summary({"servers": servers}))


@mcp_api.get("/servers")
@operation(
    "The MCP server definitions (env and headers: their keys only)", answers={200: shapes.McpServerList}
)
def list_servers() -> Any:
    return jsonify(servers=[c.public() for _, c in sorted(_rt().mcp.servers().items())])


@mcp_api.post("/servers")
@operation(
    "Add an MCP server: every worker connects to it",
    body=shapes.NewMcpServer,
    answers={201: shapes.McpServer},
    errors={409: "An MCP server of that name exists"},
    examples={"time": {"name": "time", "command": "uvx", "args": ["mcp-server-time"]}},
)
def create_server(body: shapes.NewMcpServer) -> Any:
    definition = body.given()
    config = _parse(definition.get("name"), definition)
    rt = _rt()
    if config.name in rt.mcp.servers() or not store.save(rt.db, config, create=True):
        raise ConflictError(f"an MCP server named {config.name!r} exists", field="name")
    announce(rt.redis, "reload")
    return jsonify(config.public()), 201


@mcp_api.get("/servers/<name>")
@operation("One MCP server's definition", answers={200: shapes.McpServer})
def get_server(name: str) -> Any:
    return jsonify(_existing(name).public())


@mcp_api.put("/servers/<name>")
@operation(
    "Replace an MCP server's definition (env and headers left out are kept)",
    body=shapes.McpServerFields,
    answers={200: shapes.McpServer},
    errors={
        403: "Defined in a file: change it there",
        422: "`name` differs from the path's: a server cannot be renamed",
    },
    examples={"over HTTP": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer x"}}},
)
def replace_server(name: str, body: shapes.McpServerFields) -> Any:
    old = _stored(name)
    definition = body.given()
    if "name" in definition and definition["name"] != name:
        # Well-formed (the document cannot say "the path's name"), so a 422, not a 400.
        raise UnprocessableError("name: a server cannot be renamed; delete it and add it again", field="name")
    for key in WRITE_ONLY:  # not shown, so a client cannot send them back: omitted keeps them
        definition.setdefault(key, dict(getattr(old, key)))
    config = _parse(name, definition)
    rt = _rt()
    if not store.save(rt.db, config, create=False):
        raise NotFoundError(f"no stored MCP server {name!r}")
    announce(rt.redis, "reload")
    return jsonify(config.public())


@mcp_api.delete("/servers/<name>")
@operation(
    "Delete an MCP server",
    answers={204: None},
    errors={403: "Defined in a file: change it there"},
)
def delete_server(name: str) -> Any:
    _stored(name)
    rt = _rt()
    store.delete(rt.db, name)
    announce(rt.redis, "reload")
    return "", 204


@mcp_api.post("/refresh")
@operation(
    "List every server's tools, resources and prompts again (reconnect: start it again too)",
    body=shapes.McpRefresh,
    answers={202: shapes.McpRefreshing},
    examples={"all": {}, "one, reconnected": {"server": "time", "reconnect": True}},
    errors={404: "No MCP server of that name"},
)
def refresh(body: shapes.McpRefresh) -> Any:
    server = body.server
    if server is not None:
        _existing(server)
    # reconnect: close the connection and start it again even where it is up (a server that
    # answers but misbehaves); without it a connected server only lists everything again.
    reconnect = bool(body.reconnect)
    heard = announce(_rt().redis, "refresh", server, reconnect=reconnect)
    return jsonify(refreshing=server or "all", reconnect=reconnect, workers=heard), 202


def _parse(name: Any, body: dict[str, Any]) -> ServerConfig:
    try:
        return parse_server(name, body, ORIGIN_DB)
    except ServerConfigError as exc:
        raise UnprocessableError(f"{exc.field}: {exc}", field=exc.field) from None


def _existing(name: str) -> ServerConfig:
    config = _rt().mcp.servers().get(name)
    if config is None:
        raise NotFoundError(f"no MCP server {name[:60]!r}")
    return config


def _stored(name: str) -> ServerConfig:
    config = _existing(name)
    if config.origin != ORIGIN_DB:
        raise ForbiddenError(f"MCP server {name!r} is defined in the {config.origin} file; change it there")
    return config


def _reported_at(seen: dict[str, Any], merged: dict[str, Any]) -> float:
    """The time of the newest worker report that speaks of this server."""
    workers = merged["workers"]
    return max((workers[w]["ts"] for w in seen.get("workers", {}) if w in workers), default=0.0)


def _unreported(config: ServerConfig) -> dict[str, Any]:
    """A server no worker has reported on yet (none running, or it was just added)."""
    return {
        "name": config.name,
        "transport": config.transport,
        "state": "connecting",
        "last_error": None,
        "counts": {"tools": 0, "resources": 0, "templates": 0, "prompts": 0},
        "tools": [],
        "resources": [],
        "templates": [],
        "prompts": [],
        "warnings": [],
        "workers": {},
    }
