"""An MCP server for tests, written with the `mcp` SDK: stdio or streamable HTTP.

    python -m tests.fakes.mcp_server --control DIR [--http PORT] [--without METHOD ...]

It offers tools (`echo`, `fail`, `big`, `crash`, `hang`, `slow_echo`, `search`), two
resources, two resource templates (`fake://items/{item}`, `fake://files{/path*}`) and a
prompt, and declares `listChanged` for all three. `--without` drops a list method's
handler (the server answers it "Method not found") while still declaring its
capability, as some servers do. The test drives it through files in DIR:

- `lists.json` `{"tools": [...], "resources": [...], "prompts": [...]}`: extra names;
  the server watches the file and, when it changes, updates its lists while
  connected and sends the list_changed notifications;
- `calls.log` gets one line per tool call it receives (what ran, and how often);
- `cancelled.log` gets a line when a call is cancelled by the client
  (`notifications/cancelled`);
- `faults.json` `{"tools/list": "fail" | "hang", ...}`: while a list method is named
  there, its requests fail (an internal error) or never answer (until cancelled);
  `faults.log` gets a line when one starts to hang;
- `pid` holds the process id of the server that started last.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import anyio
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts import Prompt
from mcp.server.mcpserver.resources import TextResource
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR

LIST_METHODS = ("tools/list", "resources/list", "resources/templates/list", "prompts/list")


class FakeServer:
    def __init__(self, control: Path) -> None:
        self.control = control
        self.server = MCPServer("fake")
        self.sessions: list[Any] = []
        self.extra: dict[str, list[str]] = {"tools": [], "resources": [], "prompts": []}
        lowlevel = self.server._lowlevel_server
        plain = lowlevel.create_initialization_options
        lowlevel.create_initialization_options = lambda *a, **k: plain(  # type: ignore[method-assign]
            NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
        )
        self._define()

    def _log(self, name: str, line: str) -> None:
        with open(self.control / name, "a") as f:
            f.write(line + "\n")

    def _define(self) -> None:
        server = self.server

        @server.tool(description="Echo the text back.")
        async def echo(text: str, ctx: Context) -> str:
            self._remember(ctx)
            self._log("calls.log", f"echo {text}")
            return f"echo: {text}"

        @server.tool(description="Echo after a pause (seconds).")
        async def slow_echo(text: str, seconds: float, ctx: Context) -> str:
            self._remember(ctx)
            self._log("calls.log", f"slow_echo {text}")
            await anyio.sleep(seconds)
            return f"echo: {text}"

        @server.tool(
            description="Search the web (fake): a portal and a result per word (JSON); 'plain ...' gets text."
        )
        def search(query: str) -> str:
            self._log("calls.log", f"search {query}")
            if query.startswith("plain"):
                return f"Plain answer about {query!r}: see https://plain.example/answer"
            words = query.split() or ["nothing"]
            # A first result that matches nothing: a reranker moves it down, SearxNG order keeps it.
            portal = {
                "title": "Unrelated portal",
                "url": "https://portal.example/",
                "snippet": "Nothing here.",
            }
            results = [portal] + [
                {
                    "title": f"{w.title()} guide",
                    "url": f"https://{w}.example/guide",
                    "snippet": f"All about {w}.",
                }
                for w in words
            ]
            return json.dumps({"results": results})

        @server.tool(description="Always fails.")
        def fail(reason: str) -> str:
            self._log("calls.log", f"fail {reason}")
            raise ValueError(f"it failed: {reason}")

        @server.tool(description="A very large output.")
        def big(chars: int) -> str:
            self._log("calls.log", f"big {chars}")
            return "x" * chars

        @server.tool(description="The server process dies while answering.")
        def crash() -> str:
            self._log("calls.log", "crash")
            os._exit(3)

        @server.tool(description="Never answers until cancelled.")
        async def hang(ctx: Context) -> str:
            self._log("calls.log", "hang")
            try:
                await anyio.sleep(3600)
            except anyio.get_cancelled_exc_class():
                self._log("cancelled.log", "hang")
                raise
            return "woke"

        @server.resource(
            "fake://readme", name="readme", description="The fake readme", mime_type="text/plain"
        )
        def readme() -> str:
            return "Hello from the fake readme."

        @server.resource(
            "fake://blob", name="blob", description="Some bytes", mime_type="application/octet-stream"
        )
        def blob() -> bytes:
            return b"\x00\x01\x02binary"

        @server.resource("fake://items/{item}", name="item", description="One item by name")
        def item(item: str) -> str:
            return f"item {item}"

        @server.resource("fake://files{/path*}", name="file", description="A file by its path")
        def file(path: list[str]) -> str:
            return f"file {'/'.join(path)}"

        @server.prompt(description="Review some code")
        def review(code: str, language: str = "python") -> list[dict[str, Any]]:
            return [
                {"role": "user", "content": f"Review this {language} code:\n{code}"},
                {"role": "assistant", "content": "I will review it."},
            ]

    def faulty(self, method: str) -> None:
        """`method` (a list) answers as `faults.json` says. Any list request also tells us the
        client's session: a client that never calls a tool must still hear of list changes."""
        lowlevel = self.server._lowlevel_server
        entry = lowlevel.get_request_handler(method)
        assert entry is not None

        async def listing(ctx: Any, params: Any) -> Any:
            if ctx.session not in self.sessions:
                self.sessions.append(ctx.session)
            path = self.control / "faults.json"
            fault = json.loads(path.read_text()).get(method) if path.exists() else None
            if fault == "fail":
                raise MCPError(INTERNAL_ERROR, f"{method} is broken right now")
            if fault == "hang":
                self._log("faults.log", f"hang {method}")
                try:
                    await anyio.sleep(3600)
                except anyio.get_cancelled_exc_class():
                    self._log("cancelled.log", method)
                    raise
            return await entry.handler(ctx, params)

        lowlevel.add_request_handler(method, entry.params_type, listing)

    def drop(self, methods: tuple[str, ...]) -> None:
        """Remove these methods' handlers, still declaring the capabilities they belong to."""
        if not methods:
            return
        lowlevel = self.server._lowlevel_server
        options = lowlevel.create_initialization_options()  # the capabilities, while all are there
        lowlevel.create_initialization_options = lambda *a, **k: options  # type: ignore[method-assign]
        for method in methods:
            del lowlevel._request_handlers[method]

    def _remember(self, ctx: Context) -> None:
        if ctx.session not in self.sessions:
            self.sessions.append(ctx.session)

    async def watch(self) -> None:
        """Apply `lists.json` whenever it changes, and tell every client that called us."""
        path = self.control / "lists.json"
        seen = ""
        while True:
            await anyio.sleep(0.05)
            text = path.read_text() if path.exists() else ""
            if text == seen:
                continue
            seen = text
            try:
                wanted = json.loads(text) if text else {}
            except json.JSONDecodeError:
                continue
            changed = self._apply({k: list(wanted.get(k, [])) for k in self.extra})
            for session in list(self.sessions):
                try:
                    if "tools" in changed:
                        await session.send_tool_list_changed()
                    if "resources" in changed:
                        await session.send_resource_list_changed()
                    if "prompts" in changed:
                        await session.send_prompt_list_changed()
                except Exception:
                    self.sessions.remove(session)
            self._log("lists.log", json.dumps(sorted(changed)))

    def _apply(self, wanted: dict[str, list[str]]) -> set[str]:
        changed = {kind for kind in wanted if wanted[kind] != self.extra[kind]}
        for name in set(self.extra["tools"]) - set(wanted["tools"]):
            self.server.remove_tool(name)
        for name in set(wanted["tools"]) - set(self.extra["tools"]):
            self.server.add_tool(_extra_tool(name), name=name, description=f"Extra tool {name}.")
        for name in set(self.extra["prompts"]) - set(wanted["prompts"]):
            self.server.remove_prompt(name)
        for name in set(wanted["prompts"]) - set(self.extra["prompts"]):
            self.server.add_prompt(
                Prompt.from_function(_extra_prompt(name), name=name, description=f"Extra {name}")
            )
        resources = self.server._resource_manager._resources
        for name in set(self.extra["resources"]) - set(wanted["resources"]):
            resources.pop(f"fake://extra/{name}", None)
        for name in set(wanted["resources"]) - set(self.extra["resources"]):
            self.server.add_resource(
                TextResource(uri=f"fake://extra/{name}", name=name, text=f"extra {name}")
            )
        self.extra = wanted
        return changed


def _extra_tool(name: str) -> Any:
    def tool(ctx: Context) -> str:
        return f"{name} ran"

    return tool


def _extra_prompt(name: str) -> Any:
    def prompt() -> str:
        return f"The {name} prompt."

    return prompt


async def main(control: Path, http_port: int | None, many: int = 0, without: tuple[str, ...] = ()) -> None:
    fake = FakeServer(control)
    (control / "pid.new").write_text(str(os.getpid()))
    (control / "pid.new").replace(control / "pid")  # never seen half written
    for n in range(many):  # the benchmark's servers: `many` more echo tools
        fake.server.add_tool(
            _extra_tool(f"tool_{n:03d}"), name=f"tool_{n:03d}", description=f"Bench tool {n}."
        )
    for method in LIST_METHODS:
        fake.faulty(method)
    fake.drop(without)
    async with anyio.create_task_group() as tg:
        tg.start_soon(fake.watch)
        if http_port is None:
            await fake.server.run_stdio_async()
        else:
            await fake.server.run_streamable_http_async(port=http_port)
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--control", required=True, type=Path)
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--tools", type=int, default=0, help="this many extra tools (benchmarks)")
    parser.add_argument("--without", action="append", default=[], choices=LIST_METHODS)
    ns = parser.parse_args()
    ns.control.mkdir(parents=True, exist_ok=True)
    anyio.run(main, ns.control, ns.http, ns.tools, tuple(ns.without))
