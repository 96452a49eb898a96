"""read_resource: read a resource an MCP server offers, by URI (text, or base64 for blobs)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.mcp.handler import run_request
from app.tools.core.base import Preparation, ToolContext, ToolOutcome

if TYPE_CHECKING:
    from app.mcp.manager import MCPManager

MAX_URI_CHARS = 8192


class Handler:
    """Bound to the worker's MCP manager and a way to find which server offers a URI."""

    def __init__(self, manager: MCPManager, owner: Any) -> None:
        self.manager = manager
        self.owner = owner  # (uri) -> server name or None

    def prepare(self, args: dict[str, Any], ctx: ToolContext) -> Preparation:
        uri = args.get("uri")
        if not isinstance(uri, str) or not uri.strip() or len(uri) > MAX_URI_CHARS or "\x00" in uri:
            return Preparation(
                args, "read_resource", error="Error: read_resource needs 'uri', a resource URI"
            )
        server = self.owner(uri)
        if server is None:
            return Preparation(
                args,
                f"read_resource {uri[:200]}",
                error=f"Error: no connected MCP server offers {uri[:200]!r}; "
                "the system message lists the resources there are",
            )
        return Preparation({"uri": uri}, header=f"MCP {server}: read {uri[:200]}", needs_approval=True)

    def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        uri = args["uri"]
        server = self.owner(uri)
        if server is None:
            return ToolOutcome(f"Error: no connected MCP server offers {uri[:200]!r} any more", is_error=True)
        from app.mcp.results import resource_output

        timeout = float(ctx.settings.mcp_call_timeout)
        return run_request(
            server,
            f"read of {uri[:200]}",
            lambda: (
                resource_output(self.manager.read_resource(server, uri, timeout, ctx.is_cancelled)),
                False,
            ),
        )
