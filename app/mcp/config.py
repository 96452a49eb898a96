"""MCP server definitions: `[mcp.servers.NAME]` in config.toml, an `mcpServers` JSON file, the
admin API. One checker for all three, so a bad entry is refused with the same words everywhere."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

STDIO = "stdio"
HTTP = "http"
TRANSPORTS = (STDIO, HTTP)
# Where a definition came from; a stored (admin API) definition may replace a file's.
ORIGIN_CONFIG = "config"
ORIGIN_FILE = "file"
ORIGIN_DB = "db"

SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
MAX_ARGS = 200
MAX_VALUE_CHARS = 8192


class ServerConfigError(ValueError):
    """A server definition is unusable; `field` names the offending key."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server. `env` and `headers` hold secrets: never shown, never logged."""

    name: str
    transport: str = STDIO
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    origin: str = ORIGIN_CONFIG

    def public(self) -> dict[str, Any]:
        """What the API may show: everything but the values of env and headers."""
        return {
            "name": self.name,
            "transport": self.transport,
            "command": self.command,
            "args": list(self.args),
            "cwd": self.cwd,
            "url": self.url,
            "env_keys": sorted(self.env),
            "header_keys": sorted(self.headers),
            "origin": self.origin,
        }

    def fingerprint(self) -> str:
        """Equal for two definitions that would start the same server (secrets included)."""
        return json.dumps(
            [
                self.transport,
                self.command,
                list(self.args),
                dict(self.env),
                self.cwd,
                self.url,
                dict(self.headers),
            ],
            sort_keys=True,
        )


def parse_server(name: Any, entry: Any, origin: str) -> ServerConfig:
    """A checked definition from a TOML table, a JSON object or an API body."""
    if not isinstance(name, str) or "__" in name or not SERVER_NAME.match(name):
        raise ServerConfigError(
            f"server name {str(name)[:60]!r} must be 1-40 letters, digits, '_' or '-', without '__'", "name"
        )
    if not isinstance(entry, Mapping):
        raise ServerConfigError(f"server {name}: the definition must be an object", "name")
    transport = entry.get("type", entry.get("transport"))
    if transport is None:
        transport = HTTP if "url" in entry else STDIO
    if transport in ("streamable-http", "streamable_http"):
        transport = HTTP
    if transport not in TRANSPORTS:
        raise ServerConfigError(f"server {name}: type must be 'stdio' or 'http', not {transport!r}", "type")
    if transport == STDIO:
        command = _text(name, entry.get("command"), "command")
        if not command:
            raise ServerConfigError(f"server {name}: a stdio server needs a 'command'", "command")
        return ServerConfig(
            name=name,
            transport=STDIO,
            command=command,
            args=tuple(_strings(name, entry.get("args", []), "args")),
            env=_mapping(name, entry.get("env", {}), "env"),
            cwd=_text(name, entry.get("cwd"), "cwd") or None,
            origin=origin,
        )
    url = _text(name, entry.get("url"), "url")
    if not url or not url.startswith(("http://", "https://")):
        raise ServerConfigError(f"server {name}: an http server needs an http(s) 'url'", "url")
    return ServerConfig(
        name=name,
        transport=HTTP,
        url=url,
        headers=_mapping(name, entry.get("headers", {}), "headers"),
        origin=origin,
    )


def parse_servers(section: Any, where: str, origin: str) -> dict[str, ServerConfig]:
    """Every server of a `{name: definition}` table; errors name `where` and the server."""
    if not isinstance(section, Mapping):
        raise ServerConfigError(f"{where}: must be a table of servers", "servers")
    servers = {}
    for name, entry in section.items():
        try:
            servers[name] = parse_server(name, entry, origin)
        except ServerConfigError as exc:
            raise ServerConfigError(f"{where}: {exc}", exc.field) from None
    return servers


def parse_json_file(text: str, path: str) -> dict[str, ServerConfig]:
    """The standard `{"mcpServers": {...}}` file."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ServerConfigError(f"{path}: not valid JSON: {exc}", "mcpServers") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("mcpServers"), Mapping):
        raise ServerConfigError(f"{path}: expected an object with an 'mcpServers' object", "mcpServers")
    return parse_servers(data["mcpServers"], path, ORIGIN_FILE)


def _text(name: str, value: Any, key: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or "\x00" in value or len(value) > MAX_VALUE_CHARS:
        raise ServerConfigError(f"server {name}: {key!r} must be a string without NUL", key)
    return value


def _strings(name: str, value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_ARGS:
        raise ServerConfigError(f"server {name}: {key!r} must be a list of at most {MAX_ARGS} strings", key)
    return [_text(name, v, key) if isinstance(v, str) else _bad(name, key) for v in value]


def _mapping(name: str, value: Any, key: str) -> dict[str, str]:
    if not isinstance(value, Mapping) or len(value) > MAX_ARGS:
        raise ServerConfigError(f"server {name}: {key!r} must be an object of strings", key)
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or not k or not isinstance(v, str):
            _bad(name, key)
        out[_text(name, k, key)] = _text(name, v, key)
    return out


def _bad(name: str, key: str) -> str:
    raise ServerConfigError(f"server {name}: {key!r} must hold only strings", key)
