"""The MCP side of a process: the manager, its tool source and prompt sections, and, in a worker,
the threads that publish its status and follow the control channel.

Every process builds one (the web tier too, to read status); only a worker calls `start()`,
so only workers spawn servers."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping
from typing import Any

import redis
from sqlalchemy.exc import SQLAlchemyError

from app.mcp import skills, status
from app.mcp.catalog import MCPToolSource
from app.mcp.config import ServerConfig
from app.mcp.manager import MCPManager
from app.mcp.prompt import sections
from app.mcp.published import ProcessToolSource, PublishedToolSource
from app.mcp.states import CONNECTED, Timing
from app.settings import Settings
from app.storage.database import Database

MCP_CONNECT_SECONDS = 30.0  # start, initialize and first discovery, at most
MCP_REQUEST_SECONDS = 30.0  # a later refresh's list requests, and a health ping, at most
MCP_DEBOUNCE_SECONDS = 0.2  # list_changed pushes this close together make one refresh
MCP_BACKOFF_FIRST_SECONDS = 1.0  # reconnect delay after a failure, doubled each time, +-20%
MCP_BACKOFF_MAX_SECONDS = 60.0

log = logging.getLogger(__name__)

MCP_TOOLS = ("read_resource", "use_prompt")


class MCPService:
    def __init__(
        self,
        settings: Settings,
        definitions: Mapping[str, Any],
        client: redis.Redis,
        stored: Callable[[], dict[str, ServerConfig]] | None = None,
        db: Database | None = None,
    ) -> None:
        """`definitions`: read_resource's and use_prompt's schema-file definitions; `stored`:
        the servers the admin API keeps in the database (read on start and on each reload)."""
        self.settings = settings
        self.redis = client
        self.stored = stored or dict
        self.db = db  # where prompts are synced as skills
        self._synced: Any = None
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        self.manager = MCPManager({}, timing(settings))
        self.live_source = MCPToolSource(self.manager, definitions)
        self._started = False
        published = PublishedToolSource(client, definitions)
        self.source = ProcessToolSource(self.live_source, published, lambda: self._started)
        self._changed = threading.Event()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def prompt_sections(self) -> list[Any]:
        return sections(self.live_source)

    def servers(self) -> dict[str, ServerConfig]:
        """The configured servers: config.toml and the JSON file, then the database's (which win)."""
        return {**self.settings.mcp_servers, **self.stored()}

    # -- a worker's life -----------------------------------------------------------------

    def start(self) -> None:
        self.manager.add_listener(self._changed.set)
        self.manager.apply(self.servers())
        self.manager.start()
        self._started = True
        for target in (self._publish_loop, self._control_loop):
            thread = threading.Thread(target=target, name=f"mcp-{target.__name__}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stopping.set()
        self._changed.set()
        self.manager.stop()
        with contextlib.suppress(redis.RedisError):  # its key expires anyway
            status.withdraw(self.redis, self.worker)

    def reload(self) -> None:
        """Re-read the definitions (an admin change) and make the running servers match."""
        self.manager.apply(self.servers())

    def _publish_loop(self) -> None:
        tick = self.settings.mcp_health_seconds
        while not self._stopping.is_set():
            self._changed.wait(tick)
            self._changed.clear()
            if self._stopping.is_set():
                return
            views, offer = self.manager.servers(), self.live_source.offer()
            try:
                status.publish(self.redis, status.report(self.worker, views, offer), ttl=tick * 3)
            except redis.RedisError as exc:  # published again on the next change or tick
                log.warning("publishing MCP status: %s", exc)
            if self.db is not None:
                self._sync_prompts(views, offer)

    def _sync_prompts(self, views: list[Any], offer: Any) -> None:
        assert self.db is not None
        connected = {v.config.name for v in views if v.state == CONNECTED}
        signature = (frozenset(connected), offer.prompts, frozenset(v.config.name for v in views))
        if signature == self._synced:
            return
        try:
            skills.sync(self.db, offer.prompts, connected, set(signature[2]))
            self._synced = signature
        except SQLAlchemyError as exc:  # tried again on the next change or tick
            log.warning("syncing MCP prompts into prompt_templates: %s", type(exc).__name__)

    def _control_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(status.CONTROL_CHANNEL)
                self.reload()  # anything announced while we were not listening
                while not self._stopping.is_set():
                    message = pubsub.get_message(timeout=1.0)
                    if message is not None:
                        self._obey(message["data"])
            except redis.RedisError as exc:
                log.warning("MCP control channel: %s; listening again", exc)
                self._stopping.wait(1.0)

    def _obey(self, raw: Any) -> None:
        try:
            message = json.loads(raw)
        except (TypeError, ValueError):
            return
        if message.get("op") == "reload":
            self.reload()
        elif message.get("op") == "refresh":
            # a connected server rediscovers, or with `reconnect` is connected anew; a
            # disconnected one is reconnected (then rediscovers)
            self.manager.refresh(message.get("server"), reconnect=message.get("reconnect") is True)


def announce(client: redis.Redis, op: str, server: str | None = None, reconnect: bool = False) -> int:
    """Tell every worker: `reload` the definitions, or `refresh` one server (or all), connecting
    it anew with `reconnect`. How many heard."""
    message = {"op": op, "server": server, "reconnect": reconnect}
    return int(client.publish(status.CONTROL_CHANNEL, json.dumps(message)))


def timing(settings: Settings) -> Timing:
    return Timing(
        connect_seconds=MCP_CONNECT_SECONDS,
        request_seconds=MCP_REQUEST_SECONDS,
        health_seconds=settings.mcp_health_seconds,
        debounce_seconds=MCP_DEBOUNCE_SECONDS,
        backoff_first_seconds=MCP_BACKOFF_FIRST_SECONDS,
        backoff_max_seconds=MCP_BACKOFF_MAX_SECONDS,
    )
