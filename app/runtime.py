"""The runtime: the settings and the connections one process shares (database, Redis, queue, tools)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import redis

from app.engine.conversation.cache import ConversationCache
from app.engine.running.heartbeats import Heartbeats
from app.events import EventLog
from app.settings import Settings
from app.storage.database import Database
from app.taskqueue import TaskQueue, make_celery
from app.users.known_owners import KnownOwners


@dataclass
class Runtime:
    settings: Settings
    db: Database
    redis: redis.Redis
    events: EventLog
    queue: TaskQueue
    registry: Any  # app.tools.core.registry.Registry
    tool_sources: list[Any] = field(default_factory=list)  # app.tools.core.toolset.ToolSource
    # The system prompt's sections, in order (app.engine.conversation.prompt); a runtime may add its own.
    prompt_sections: list[Any] = field(default_factory=list)
    fetcher: Any = None  # app.tools.web.fetch.Fetcher: the SSRF-guarded fetcher tools reach the web with
    mcp: Any = None  # app.mcp.service.MCPService: started by workers only
    conversations: ConversationCache = field(default_factory=ConversationCache)  # model steps' copy
    heartbeats: Heartbeats = field(default_factory=Heartbeats)  # the claims its running phases hold
    owners: KnownOwners = field(default_factory=KnownOwners)  # of workstreams requests named
    # Whether a transition waits out a Redis outage (a worker: the end of a phase holds finished
    # work) or fails at once (the web: the request is answered 503, and the client retries).
    waits_out_outages: bool = True
    # Why this process's data root is not the service's shared one (app/sandbox/folders.py), or
    # None; a worker with one takes no tool batches, /health shows it.
    data_root_problem: str | None = None
    sandbox: Any = None  # app.sandbox.enforcement.Sandbox: the jail of bash calls and watch polls

    @classmethod
    def create(cls, settings: Settings) -> Runtime:
        from app.engine.conversation.prompt import SECTIONS
        from app.engine.subagents.relay import FamilyEventLog
        from app.mcp import store as mcp_store
        from app.mcp.service import MCP_TOOLS, MCPService
        from app.sandbox.enforcement import Sandbox
        from app.tools.core.registry import build_registry
        from app.tools.core.sources import load_sources
        from app.tools.web.fetch import Fetcher

        client = redis.Redis.from_url(settings.redis_url, health_check_interval=30)
        registry = build_registry(settings=settings.tools)
        db = Database(settings.database_url)
        events = FamilyEventLog.with_links(client, settings, db)  # a sub-agent's reach its parent too
        definitions = {n: d for n in MCP_TOOLS if (d := registry.definition(n))}
        mcp = MCPService(settings, definitions, client, stored=lambda: mcp_store.load(db), db=db)
        return cls(
            settings=settings,
            db=db,
            redis=client,
            events=events,
            queue=TaskQueue(make_celery(settings)),
            registry=registry,
            tool_sources=[*load_sources(settings.tool_sources), mcp.source],
            prompt_sections=[*SECTIONS, *mcp.prompt_sections()],
            fetcher=Fetcher.from_settings(settings.tools),
            mcp=mcp,
            sandbox=Sandbox(settings, db),
        )

    def close(self) -> None:
        self.db.dispose()
        self.redis.close()
