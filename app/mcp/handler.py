"""The one handler every MCP tool goes through: a generic approval card, then `tools/call`.

Whatever goes wrong on the server's side (not connected, a crash mid-call, no answer in
time, a cancelled turn) becomes an error result naming the server, never an exception.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from app.mcp.states import RequestTimeoutError, ServerGoneError
from app.tools.core.base import Preparation, ToolContext, ToolOutcome

if TYPE_CHECKING:
    from app.mcp.manager import MCPManager

PREVIEW_CHARS = 4000


class MCPToolHandler:
    def __init__(self, manager: MCPManager, server: str, tool: str) -> None:
        self.manager = manager
        self.server = server
        self.tool = tool

    def prepare(self, args: dict[str, Any], ctx: ToolContext) -> Preparation:
        shown = json.dumps(args, ensure_ascii=False, indent=2, default=str)
        if len(shown) > PREVIEW_CHARS:
            shown = shown[:PREVIEW_CHARS] + f"\n... ({len(shown) - PREVIEW_CHARS} more characters)"
        return Preparation(args, header=f"MCP {self.server}: {self.tool}", preview=shown, needs_approval=True)

    def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        from app.mcp.results import call_output

        timeout = float(ctx.settings.mcp_call_timeout)
        return run_request(
            self.server,
            f"tool {self.tool}",
            lambda: call_output(
                self.manager.call_tool(self.server, self.tool, args, timeout, ctx.is_cancelled)
            ),
        )


def run_request(server: str, what: str, send: Any) -> ToolOutcome:
    """`send()` -> (output, is_error), with the server's failures as error results."""
    from app.mcp.manager import CallCancelledError

    try:
        output, is_error = send()
    except ServerGoneError as exc:
        return ToolOutcome(f"Error: {exc}. The {what} may or may not have run.", is_error=True)
    except RequestTimeoutError as exc:
        return ToolOutcome(f"Error: {exc}; the {what} request was cancelled on the server.", is_error=True)
    except CallCancelledError:
        return ToolOutcome(
            f"Cancelled: the {what} request to MCP server {server!r} was cancelled.", is_error=True
        )
    except Exception as exc:  # an MCP error answer (unknown tool, bad arguments) or a bad reply
        return ToolOutcome(f"Error from MCP server {server!r} ({what}): {exc}", is_error=True)
    return ToolOutcome(output, is_error=is_error)
