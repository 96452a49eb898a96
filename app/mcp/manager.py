"""The MCP client manager a worker process holds: one asyncio loop on a background thread, one
supervised connection per server, and blocking calls for the tool handlers' threads.

Nothing here starts on import or in the web tier: a worker calls `start()`. `generation`
grows on every change of any server's state or lists, so readers rebuild their views
(the catalog, the published status) only when something changed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from app.mcp.config import ServerConfig
from app.mcp.states import CONNECTING, KINDS, Listing, ServerGoneError, Timing

if TYPE_CHECKING:
    from app.mcp.connection import ServerConnection

log = logging.getLogger(__name__)

T = TypeVar("T")
POLL_SECONDS = 0.05  # how often a blocked caller looks at its cancel check


class CallCancelledError(Exception):
    """The caller's turn was cancelled; the request was cancelled on the server too."""


@dataclass(frozen=True)
class ServerView:
    """One server as readers see it: a consistent copy, safe on any thread."""

    config: ServerConfig
    state: str
    last_error: str | None
    listing: Listing


class MCPManager:
    def __init__(self, servers: Mapping[str, ServerConfig], timing: Timing | None = None) -> None:
        self.timing = timing or Timing()
        self._configs = dict(servers)
        self._connections: dict[str, ServerConnection] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._listeners: list[Callable[[], None]] = []
        self.generation = 0

    # -- life ------------------------------------------------------------------------

    @property
    def is_running(self) -> bool:
        return self._loop is not None

    def start(self) -> MCPManager:
        if self._loop is not None:
            return self
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="mcp-loop", daemon=True)
        self._thread.start()
        self._run(self._apply(self._configs))
        return self

    def stop(self, timeout: float = 10.0) -> None:
        loop = self._loop
        if loop is None:
            return
        try:
            self._run(self._apply({}), timeout=timeout)
        except Exception:  # stopping must not fail a worker's shutdown
            log.exception("stopping MCP servers")
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout)
        self._loop = None

    def add_listener(self, fn: Callable[[], None]) -> None:
        """`fn()` runs (on the MCP loop's thread) after every change; it must be quick."""
        self._listeners.append(fn)

    # -- configuration and refresh ---------------------------------------------------------

    def apply(self, servers: Mapping[str, ServerConfig]) -> None:
        """Make the running servers these: start new ones, stop removed ones, restart changed ones."""
        self._configs = dict(servers)
        if self._loop is not None:
            self._run(self._apply(self._configs))

    def refresh(self, name: str | None = None, reconnect: bool = False) -> list[str]:
        """Rediscover one server (or all); a disconnected one is reconnected. The names it asked."""
        names = [name] if name is not None else sorted(self._connections.copy())
        conns = [c for n in names if (c := self._connections.get(n)) is not None]
        if self._loop is not None:
            for conn in conns:
                self._loop.call_soon_threadsafe(conn.request_refresh, KINDS, reconnect)
        return [c.name for c in conns]

    async def _apply(self, servers: Mapping[str, ServerConfig]) -> None:
        going = []
        for name in list(self._connections):
            old = self._connections[name]
            if name not in servers or servers[name].fingerprint() != old.config.fingerprint():
                going.append(name)
            elif servers[name] != old.config:  # only where it came from changed
                old.config = servers[name]
        await asyncio.gather(*(self._stop_one(name) for name in going))  # each may take seconds
        starting = {name: config for name, config in servers.items() if name not in self._connections}
        if starting:
            # The SDK (about 25 MB with its HTTP stack) is loaded by the first server to start:
            # a worker with no MCP servers never pays for it.
            from app.mcp.connection import ServerConnection

            for name, config in starting.items():
                conn = ServerConnection(config, self.timing, self._bump)
                self._connections[name] = conn
                self._tasks[name] = asyncio.get_running_loop().create_task(conn.run(), name=f"mcp:{name}")
        self._bump()

    async def _stop_one(self, name: str) -> None:
        conn = self._connections.pop(name)
        task = self._tasks.pop(name)
        conn.stop()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=self.timing.connect_seconds)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()

    def _bump(self) -> None:
        with self._changed:
            self.generation += 1
            self._changed.notify_all()
        for fn in self._listeners:
            try:
                fn()
            except Exception:  # a listener's fault is its own
                log.exception("MCP change listener failed")

    # -- reading ----------------------------------------------------------------------------

    def servers(self) -> list[ServerView]:
        """Every server, sorted by name, as of now."""
        # dict.copy() is one step under the GIL: the loop thread may be adding or removing one
        conns = sorted(self._connections.copy().values(), key=lambda c: c.name)
        return [ServerView(c.config, c.state, c.last_error, c.listing) for c in conns]

    def wait_settled(self, timeout: float) -> bool:
        """Block until no server is connecting (tests, benchmarks, start-up); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while any(c.state == CONNECTING for c in self._connections.copy().values()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.5))
        return True

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.5))
        return True

    # -- blocking requests for tool handlers -------------------------------------------------

    def call_tool(
        self, server: str, tool: str, args: dict[str, Any], timeout: float, is_cancelled: Callable[[], bool]
    ) -> Any:
        conn = self._connection(server)
        return self._call(conn.call_tool(tool, args, timeout), is_cancelled)

    def read_resource(self, server: str, uri: str, timeout: float, is_cancelled: Callable[[], bool]) -> Any:
        conn = self._connection(server)
        return self._call(conn.read_resource(uri, timeout), is_cancelled)

    def get_prompt(
        self, server: str, name: str, args: dict[str, str], timeout: float, is_cancelled: Callable[[], bool]
    ) -> Any:
        conn = self._connection(server)
        return self._call(conn.get_prompt(name, args, timeout), is_cancelled)

    def _connection(self, server: str) -> ServerConnection:
        conn = self._connections.get(server)
        if conn is None or self._loop is None:
            raise ServerGoneError(f"MCP server {server!r} is not configured in this worker")
        return conn

    def _call(self, coro: Coroutine[Any, Any, T], is_cancelled: Callable[[], bool]) -> T:
        """Run `coro` on the loop; a cancelled caller cancels it, and the SDK then sends the
        server `notifications/cancelled` for the request in flight."""
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        while True:
            try:
                return future.result(timeout=POLL_SECONDS)
            except concurrent.futures.TimeoutError:
                if is_cancelled():
                    future.cancel()
                    raise CallCancelledError("cancelled; the request was cancelled on the server") from None

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)
