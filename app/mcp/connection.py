"""One MCP server's connection, run on the worker's MCP event loop: connect, discover, keep it alive.

`ServerConnection.run()` is the server's supervisor task. It opens the transport and
the client session in that one task (anyio scopes must close where they opened), lists
what the server offers, and then serves: list_changed pushes become debounced refreshes,
a ping every health tick finds a dead server, and a dead or failed server is reconnected
after a jittered, doubling delay. Every (re)connection ends in a full discovery.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import tempfile
from collections.abc import AsyncIterator, Callable
from typing import IO, Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED, METHOD_NOT_FOUND, REQUEST_TIMEOUT

from app.mcp.config import STDIO, ServerConfig
from app.mcp.states import (
    CONNECTED,
    CONNECTING,
    ERROR,
    KINDS,
    Listing,
    RequestTimeoutError,
    ServerGoneError,
    Timing,
)

log = logging.getLogger(__name__)

MAX_PAGES = 50  # a server that pages for ever is cut off here
STDERR_TAIL_CHARS = 2000
MIN_SECRET_CHARS = 4  # shorter env/header values are not hunted for in error text
CLIENT_INFO = types.Implementation(name="turnstone-jobs", version="0.1")
LISTS = (  # kind (and capability), list method, the session's call, the result's field
    ("tools", "tools/list", "list_tools", "tools"),
    ("resources", "resources/list", "list_resources", "resources"),
    ("resources", "resources/templates/list", "list_resource_templates", "resource_templates"),
    ("prompts", "prompts/list", "list_prompts", "prompts"),
)


class ServerConnection:
    def __init__(self, config: ServerConfig, timing: Timing, on_change: Callable[[], None]) -> None:
        self.config = config
        self.timing = timing
        self._on_change = on_change
        self.state = CONNECTING
        self.last_error: str | None = None
        self.listing = Listing()
        self.refreshed_at: float | None = None
        self._session: ClientSession | None = None
        self._wake = asyncio.Event()
        self._pending: set[str] = set()
        self._reconnect = False
        self._dead = False
        self._stopping = False
        self._stderr = ""  # the tail of the last stdio process's stderr

    @property
    def name(self) -> str:
        return self.config.name

    # -- requests (any task on the loop) ----------------------------------------------

    async def call_tool(self, tool: str, args: dict[str, Any], timeout: float) -> types.CallToolResult:
        result = await self._request(lambda s: s.call_tool(tool, args, read_timeout_seconds=timeout))
        assert isinstance(result, types.CallToolResult)
        return result

    async def read_resource(self, uri: str, timeout: float) -> types.ReadResourceResult:
        return await self._request(lambda s: s.read_resource(uri), timeout)

    async def get_prompt(self, name: str, args: dict[str, str], timeout: float) -> types.GetPromptResult:
        return await self._request(lambda s: s.get_prompt(name, args), timeout)

    async def _request(self, send: Callable[[ClientSession], Any], timeout: float | None = None) -> Any:
        session = self._session
        if session is None or self.state != CONNECTED:
            raise ServerGoneError(f"MCP server {self.name!r} is not connected ({self._why()})")
        try:
            if timeout is None:
                return await send(session)
            with anyio.fail_after(timeout):
                return await send(session)
        except TimeoutError:
            raise RequestTimeoutError(
                f"MCP server {self.name!r} did not answer within {timeout:g} s"
            ) from None
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise RequestTimeoutError(f"MCP server {self.name!r} did not answer in time") from None
            if exc.code == CONNECTION_CLOSED:
                self.mark_dead()
                raise ServerGoneError(
                    f"MCP server {self.name!r} disconnected during the request; it is being reconnected"
                ) from None
            raise

    def _why(self) -> str:
        return f"{self.state}: {self.last_error}" if self.last_error else self.state

    # -- control (on the loop) -----------------------------------------------------------

    def request_refresh(self, kinds: tuple[str, ...] = KINDS, reconnect: bool = False) -> None:
        self._pending |= set(kinds)
        self._reconnect = self._reconnect or reconnect or self.state != CONNECTED
        self._wake.set()

    def mark_dead(self) -> None:
        self._dead = True
        self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    async def _on_message(self, message: Any) -> None:
        # On the session's receive loop: note what changed and return; the refresh runs
        # in the supervisor task, debounced (a burst of pushes makes one refresh).
        kind = {
            "notifications/tools/list_changed": "tools",
            "notifications/resources/list_changed": "resources",
            "notifications/prompts/list_changed": "prompts",
        }.get(getattr(message, "method", ""))
        if kind is not None:
            self._pending.add(kind)
            self._wake.set()

    # -- the supervisor --------------------------------------------------------------------

    async def run(self) -> None:
        delay = self.timing.backoff_first_seconds
        while not self._stopping:
            self._set(CONNECTING)
            try:
                await self._connect_and_serve()
                delay = self.timing.backoff_first_seconds
            except Exception as exc:  # a server's failure is its status, never the loop's
                self._failed(_first_leaf(exc))
            self._session = None
            self.listing = Listing()
            self._dead = False
            if self._stopping:
                break
            if self.state == ERROR:
                self._on_change()
                await self._sleep_or_wake(delay * random.uniform(0.8, 1.2))
                delay = min(delay * 2, self.timing.backoff_max_seconds)

    async def _connect_and_serve(self) -> None:
        async with contextlib.AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._transport())
            session = await stack.enter_async_context(
                ClientSession(read, write, message_handler=self._on_message, client_info=CLIENT_INFO)
            )
            with anyio.fail_after(self.timing.connect_seconds):
                await session.initialize()
                self._session = session
                self._pending.clear()
                self._reconnect = False
                await self._discover(session, KINDS)
            self.last_error = None
            self._set(CONNECTED)
            await self._serve(session)

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        cfg = self.config
        if cfg.transport == STDIO:
            assert cfg.command is not None
            self._stderr = ""
            with tempfile.TemporaryFile("w+", errors="replace") as errlog:
                params = StdioServerParameters(
                    command=cfg.command, args=list(cfg.args), env=dict(cfg.env), cwd=cfg.cwd
                )
                try:
                    async with stdio_client(params, errlog=errlog) as streams:
                        yield streams
                finally:
                    self._stderr = _tail(errlog)
        else:
            assert cfg.url is not None
            async with (
                create_mcp_http_client(headers=dict(cfg.headers)) as client,
                streamable_http_client(cfg.url, http_client=client) as streams,
            ):
                yield streams

    async def _serve(self, session: ClientSession) -> None:
        while True:
            with anyio.move_on_after(self.timing.health_seconds) as tick:
                await self._wake.wait()
            self._wake.clear()
            if self._stopping or self._reconnect or self._dead:
                if self._dead:
                    raise ServerGoneError("the connection broke")
                return
            if tick.cancelled_caught:
                await self._ping(session)  # even while a failed refresh waits: a hung server is found
            elif self._pending:
                await anyio.sleep(self.timing.debounce_seconds)
            if self._pending:
                await self._refresh(session)

    async def _ping(self, session: ClientSession) -> None:
        try:
            with anyio.fail_after(self.timing.request_seconds):
                await session.send_ping()
        except TimeoutError:
            raise ServerGoneError(f"no answer to a ping within {self.timing.request_seconds:g} s") from None

    async def _refresh(self, session: ClientSession) -> None:
        """Rediscover the pending kinds. A failure (an error, or no answer within the time limit)
        keeps the old lists and the kinds pending: the next health tick pings, then retries."""
        kinds, self._pending = tuple(self._pending), set()
        try:
            with anyio.fail_after(self.timing.request_seconds):
                await self._discover(session, kinds)
        except TimeoutError:
            self._refresh_failed(kinds, f"no answer within {self.timing.request_seconds:g} s")
            return
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise
            self._refresh_failed(kinds, str(exc))
            return
        self.last_error = None
        self._on_change()

    def _refresh_failed(self, kinds: tuple[str, ...], why: str) -> None:
        self._pending |= set(kinds)
        error = self._redacted(f"refresh failed: {why}")
        log.warning("MCP server %s: refreshing %s failed: %s", self.name, ", ".join(kinds), error)
        if error != self.last_error:
            self.last_error = error
            self._on_change()

    async def _discover(self, session: ClientSession, kinds: tuple[str, ...]) -> None:
        caps = session.server_capabilities
        found: dict[str, list[Any]] = {}
        unlisted = {m for kind, m, _, _ in LISTS if kind not in kinds and m in self.listing.unlisted}
        for kind, method, call, field in LISTS:
            if kind in kinds:
                declared = bool(caps and getattr(caps, kind))
                items = await self._list(getattr(session, call), method, field) if declared else []
                if items is None:
                    unlisted.add(method)
                found[method] = items or []
        changes: dict[str, Any] = {"unlisted": tuple(m for _, m, _, _ in LISTS if m in unlisted)}
        if "tools" in kinds:
            changes["tools"] = tuple(found["tools/list"])
        if "resources" in kinds:
            changes["resources"] = tuple(self._resource(r, str(r.uri)) for r in found["resources/list"])
            changes["templates"] = tuple(
                self._resource(t, t.uri_template) for t in found["resources/templates/list"]
            )
        if "prompts" in kinds:
            changes["prompts"] = tuple(found["prompts/list"])
        self.listing = _replace(self.listing, **changes)  # one assignment: readers see old or new, whole
        self.refreshed_at = anyio.current_time()

    async def _list(self, fetch: Callable[..., Any], method: str, field: str) -> list[Any] | None:
        """Every page of one list; None when the server does not implement it."""
        try:
            return await _pages(fetch, field)
        except MCPError as exc:
            # A server may declare a capability and leave one of its lists out (templates, most
            # often): nothing is listed from it, the rest of the server is usable. Only -32601
            # says so; any other error is a real failure of the listing.
            if exc.code != METHOD_NOT_FOUND:
                raise
            log.warning("MCP server %s does not implement %s: nothing listed from it", self.name, method)
            return None

    def _resource(self, r: Any, uri: str) -> dict[str, Any]:
        return {
            "uri": uri,
            "name": r.name,
            "description": r.description or "",
            "mimeType": r.mime_type,
            "server": self.name,
        }

    def _set(self, state: str) -> None:
        self.state = state
        self._on_change()

    def _failed(self, exc: BaseException) -> None:
        self.state = ERROR
        message = str(exc) or type(exc).__name__
        if isinstance(exc, TimeoutError):
            message = f"no answer within {self.timing.connect_seconds:g} s"
        tail = self._stderr if self.config.transport == STDIO else ""
        self.last_error = self._redacted(f"{message}; stderr: {tail}" if tail else message)
        log.warning("MCP server %s: %s", self.name, self._redacted(message))

    def _redacted(self, text: str) -> str:
        """`text` without the values of the server's env and headers (a server may print them)."""
        for value in (*self.config.env.values(), *self.config.headers.values()):
            if len(value) >= MIN_SECRET_CHARS:
                text = text.replace(value, "[redacted]")
        return text

    async def _sleep_or_wake(self, seconds: float) -> None:
        with anyio.move_on_after(seconds):
            await self._wake.wait()
        self._wake.clear()


async def _pages(fetch: Callable[..., Any], attr: str) -> list[Any]:
    items: list[Any] = []
    cursor = None
    for _ in range(MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        result = await fetch(params=params)
        items.extend(getattr(result, attr))
        cursor = result.next_cursor
        if not cursor:
            break
    return items


def _replace(listing: Listing, **changes: Any) -> Listing:
    from dataclasses import replace

    return replace(listing, **changes)


def _tail(errlog: IO[str]) -> str:
    try:
        errlog.flush()
        errlog.seek(0)
        return errlog.read()[-STDERR_TAIL_CHARS:].strip()
    except (OSError, ValueError):
        return ""


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
