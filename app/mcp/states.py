"""What the rest of the service knows of an MCP connection without loading the MCP SDK (slow
to import; only a worker that starts its servers needs it): states, timing, listings, errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import mcp_types as types

CONNECTING = "connecting"
CONNECTED = "connected"
ERROR = "error"
STATES = (CONNECTING, CONNECTED, ERROR)

KINDS = ("tools", "resources", "prompts")


@dataclass(frozen=True)
class Timing:
    """The supervisor's clock; `app.settings` has the defaults."""

    connect_seconds: float = 30.0
    request_seconds: float = 30.0
    health_seconds: float = 10.0
    debounce_seconds: float = 0.2
    backoff_first_seconds: float = 1.0
    backoff_max_seconds: float = 60.0


@dataclass(frozen=True)
class Listing:
    """What a server offered at its last discovery."""

    tools: tuple[types.Tool, ...] = ()
    resources: tuple[dict[str, Any], ...] = ()  # {uri, name, description, mimeType, server}
    templates: tuple[dict[str, Any], ...] = ()
    prompts: tuple[types.Prompt, ...] = ()
    # list methods whose capability the server declares but that it answers "Method not found"
    unlisted: tuple[str, ...] = ()


class ServerGoneError(Exception):
    """The server is not connected, or its connection broke during the request."""


class RequestTimeoutError(Exception):
    """The server did not answer in time; the request was cancelled on the server."""
