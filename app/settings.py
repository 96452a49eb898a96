"""Settings: every default as a named constant, `config.toml`, and the environment.

This is the one module that reads the environment. Everything else receives a
`Settings` object (the web app factory, the Celery app, the tool handlers).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.compaction import settings as compaction_settings
from app.compaction.settings import CompactionSettings
from app.sandbox import settings as sandbox_settings
from app.sandbox.settings import SandboxSettings
from app.usage import budget_settings as budget_table
from app.usage import prices as price_table
from app.usage.budget_settings import BudgetSettings
from app.usage.prices import Price

# -- defaults -----------------------------------------------------------------

DEFAULT_DATABASE_URL = "sqlite:///turnstone-jobs.db"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_PORT = 8080
DEFAULT_MODEL = "openai:gpt-4.1"

DEFAULT_TOOL_TIMEOUT = 120  # seconds, bash when the call gives none
MIN_TOOL_TIMEOUT = 1
MAX_TOOL_TIMEOUT = 600
DEFAULT_TRUNCATION = 262_144  # characters: the spec's 256 KB
DEFAULT_APPROVAL_TIMEOUT = 0  # 0 = wait until someone decides

# Durability: a running step writes a heartbeat; the sweeper re-queues a step
# whose heartbeat is older than the stale limit.
DEFAULT_HEARTBEAT_SECONDS = 5.0
DEFAULT_STALE_AFTER_SECONDS = 30.0
DEFAULT_SWEEP_INTERVAL_SECONDS = 10.0
DEFAULT_WATCH_POLL_SECONDS = 15.0


MAX_NAME_CHARS = 200  # longest text a person may give where the column holds 200 (names, keys)
MAX_ID_CHARS = 32  # the id columns' width
BODY_BYTES_PER_MESSAGE_BYTE = 6  # JSON escapes a character into at most six bytes (\uXXXX)

DEFAULT_REPLAY_LOG_LENGTH = 10_000  # events kept per workstream
DEFAULT_REPLAY_LOG_BYTES = 8 * 1024 * 1024  # and about this many bytes of them at most (the newest stays)
EVENT_LOG_TTL_SECONDS = 7 * 24 * 3600  # a workstream's event keys expire this long after its last event
# Bytes a websocket may have queued for a client that does not read; past that it is closed and
# the client reconnects with `after` (app/web/sockets/connection.py).
DEFAULT_SOCKET_MAX_UNSENT_BYTES = 8 * 1024 * 1024
DEFAULT_SOCKETS_PER_PRINCIPAL = 64  # open websockets of one user (or the operator), every web node together
DEFAULT_SOCKETS_PER_PROCESS = 10_000  # open websockets one web process serves
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024  # a user message larger than this is a 413
DEFAULT_FORK_COPY_MAX_BYTES = 1024 * 1024 * 1024  # a fork's copy of its working folder, at most


# web_search over SearxNG (app/tools/web/searxng.py). The URL is the operator's, never the model's.
SEARXNG_URL_ENV = "TURNSTONE_SEARXNG_URL"
# `[tools] web_search_backend`: "searxng" (the default, at `searxng_url`) or "mcp:SERVER:TOOL".
WEB_SEARCH_BACKENDS = ("searxng", "mcp:SERVER:TOOL")
# Provider-native search ([models.NAME.capabilities] supports_web_search, web_search_max_uses).
WEB_SEARCH_CAPABILITY = "supports_web_search"
WEB_SEARCH_MAX_USES_KEY = "web_search_max_uses"
DEFAULT_WEB_SEARCH_MAX_USES = 5  # searches Anthropic may run in one reply (each one is billed)
MAX_WEB_SEARCH_MAX_USES = 50
# The reranker role: a `[models.NAME]` with `supports_rerank`, named by `[roles] reranker`.
RERANK_TIMEOUT_SECONDS = 10.0  # past this, web_search keeps the backend's order, retrieval BM25's
# `[tools] rerank_bm25` (app/reranking/retrieval.py): BM25 finds the memories, tools and skills;
# the reranker orders only the best RERANK_BM25_POOL of them, never a whole store.
RERANK_BM25_POOL = 25
RERANK_DOCUMENT_CHARS = 2_000  # one candidate's text (a memory's name, description, content), at most
CHAT_PROVIDERS = ("openai", "anthropic")
RERANK_PROVIDER = "rerank"  # a model definition that only reranks; it cannot hold a conversation
# compactor: app/compaction/settings.py; titler: app/titles.py; judge: app/judge/model.py;
# perception: app/attachments/perception.py
ROLES = ("reranker", "compactor", "titler", "judge", "perception")

# Tool search ([tools] search, search_threshold, search_max_results; a workstream's `tool_search`).
TOOL_SEARCH_MODES = ("auto", "on", "off")  # auto: on when the workstream has more tools than the threshold
DEFAULT_TOOL_SEARCH_THRESHOLD = 20
DEFAULT_TOOL_SEARCH_MAX_RESULTS = 5
TOOL_SEARCH_MAX_RESULTS_RANGE = (1, 50)
MAX_TOOL_SEARCH_THRESHOLD = 100_000

# memory, recall and skill (app/memory, app/recall, app/skills).
MEMORY_INJECT_MAX = 5  # memories put into the system prompt at a turn's first model step, at most
# The share of the user's message a memory must match to be injected: its BM25 score over
# the sum of the message's words' IDFs (app/memory/relevance.py).
MEMORY_INJECT_THRESHOLD = 0.2
MEMORY_MAX_LIMIT = 100
MEMORY_MAX_CONTENT_CHARS = 20_000
MEMORY_MAX_DESCRIPTION_CHARS = 500
RECALL_MAX_QUERY_CHARS = 1_000
SKILL_SEARCH_RESULTS = 10

DEFAULT_MODEL_RETRIES = 3  # after the first try, on 429/5xx/connection errors
DEFAULT_MODEL_BACKOFF_SECONDS = 0.5  # doubled on each retry
DEFAULT_MODEL_TIMEOUT_SECONDS = 120.0
# How long a model server may send nothing (before its first byte or between two) before the
# stream counts as stalled and is asked for again (TURNSTONE_MODEL_STREAM_IDLE_SECONDS). As long
# as the timeout: a local server sends nothing while it reads a long prompt.
DEFAULT_MODEL_STREAM_IDLE_SECONDS = DEFAULT_MODEL_TIMEOUT_SECONDS

# `max_tokens` (the reply's output limit, which the Anthropic API requires) when a
# model's `[models.NAME] max_tokens` does not set it: each Claude family's published
# output limit. The longest fragment that the model name contains decides, so dated
# names, aliases and Bedrock/Vertex ids ("anthropic.claude-3-5-sonnet-...") match too.
MAX_TOKENS_BY_MODEL_FAMILY: Mapping[str, int] = {
    "claude-3-haiku": 4096,
    "claude-3-sonnet": 4096,
    "claude-3-opus": 4096,
    "claude-3-5-haiku": 8192,
    "claude-3-5-sonnet": 8192,
    "claude-3-7-sonnet": 64_000,
    "claude-sonnet-4": 64_000,  # Sonnet 4 and 4.5
    "claude-haiku-4-5": 64_000,
    "claude-opus-4": 32_000,  # Opus 4 and 4.1
    "claude-opus-4-5": 64_000,
}
DEFAULT_MAX_TOKENS = 8192  # a model the table does not know: most current models allow this
# Redis outages: a publish or a cancel flag retries connection errors this long before giving up
# (a restart or a failover takes seconds; a turn should pause through it, not fail).
DEFAULT_REDIS_RETRY_SECONDS = 30.0

# Users and tokens (app/users). A user's name: lower-case letters, digits and . _ -, 1-64 long.
USER_NAME_PATTERN = r"[a-z0-9][a-z0-9._-]{0,63}"
MAX_PASSWORD_CHARS = 1024  # argon2 hashes anything; this only bounds the work a request can ask for
# An open websocket re-checks its token this often, so a revoked or expired token stops it.
SOCKET_REAUTH_SECONDS = 10.0
# The server pings each open websocket this often (itself, between frames: see app/web/websocket.py);
# a client that has not answered the last ping by the next one is closed.
DEFAULT_SOCKET_PING_SECONDS = 25.0
# watch (app/watches): beat's pass over due watches runs every `watch_poll_seconds`.
WATCH_POLL_SECONDS_ENV = "TURNSTONE_WATCH_POLL_SECONDS"
# Models' servers probed by beat this often (app/providers/health.py); 0: never (a step's
# failures still mark a model degraded).
MODEL_HEALTH_SECONDS_ENV = "TURNSTONE_MODEL_HEALTH_SECONDS"
DEFAULT_MODEL_HEALTH_SECONDS = 60.0
# Polls running at once across the service (`[tools] watch_poll_concurrency`): polls share the
# workers' threads with people's approved calls, and must never take them all.
DEFAULT_WATCH_POLL_CONCURRENCY = 4
# MCP servers (app/mcp): the JSON file of `mcpServers`, the call limit, the supervisor's clock.
MCP_CONFIG_ENV = "TURNSTONE_MCP_CONFIG"
DEFAULT_MCP_CALL_TIMEOUT = 120  # seconds, one tools/call (resources/read, prompts/get too)
DEFAULT_MCP_HEALTH_SECONDS = 10.0  # a connected server is pinged this often; a dead one found

# notify and the channel gateway (app/gateway): the tool signs a short-lived service JWT and
# posts to a gateway whose heartbeat in the `services` table is fresh.
SERVICE_JWT_SECRET_ENV = "TURNSTONE_SERVICE_SECRET"  # unset: one generated once, kept in the database
GATEWAY_KIND = "channel-gateway"  # its `services.kind`
PUBLIC_URL_ENV = "TURNSTONE_PUBLIC_URL"  # over `[notify] public_url`: where people open the web client
GATEWAY_URL_ENV = "TURNSTONE_GATEWAY_URL"  # the address it advertises; default http://127.0.0.1:PORT
GATEWAY_PORT_ENV = "GATEWAY_PORT"
DEFAULT_GATEWAY_PORT = 8081
DEFAULT_GATEWAY_HEARTBEAT_SECONDS = 10.0
DEFAULT_GATEWAY_STALE_SECONDS = 30.0  # a gateway whose heartbeat is older is not used
DISCORD_BOT_TOKEN_ENV = "TURNSTONE_DISCORD_BOT_TOKEN"  # the gateway's bot, for channel_id targeting
DEFAULT_DISCORD_API_BASE = "https://discord.com/api"
DEFAULT_NTFY_BASE_URL = "https://ntfy.sh"
NOTIFY_RETRY_DELAYS = (1.0, 3.0)  # seconds before the second and the third attempt
NOTIFY_CONNECT_TIMEOUT_SECONDS = 5.0
MAX_CHANNEL_URL_CHARS = 2048

CONFIG_PATH_ENV = "TURNSTONE_CONFIG"
DEFAULT_CONFIG_PATH = "config.toml"


class SettingsError(ValueError):
    """The configuration is invalid; the message says which key and why."""


@dataclass(frozen=True)
class ModelSettings:
    """One `[models.NAME]` entry (or the one `TURNSTONE_MODEL` names)."""

    name: str
    provider: str  # "openai" (any OpenAI-compatible server), "anthropic", or "rerank" (rerank only)
    model: str
    base_url: str | None = None
    api_key: str | None = None
    capabilities: Mapping[str, Any] = field(default_factory=dict)
    max_tokens: int | None = None  # None: the family's default (`default_max_tokens`)
    # The server family whose wire quirks apply (PROVIDER_FAMILIES; None: from the base URL,
    # app/providers/profiles.py) and Anthropic's extended thinking budget (None: not asked for).
    provider_family: str | None = None
    thinking_budget_tokens: int | None = None
    # `fallbacks = ["Y", "Z"]`: the models a step moves on to when this one's server fails
    # (429, 5xx, a time-out, unreachable), in order (docs/providers.md, Fallback chains)
    fallbacks: tuple[str, ...] = ()
    # `max_concurrent = N`: at most N requests to this model at once across the service; a step
    # past it waits for a slot (app/providers/slots.py). None: no limit.
    max_concurrent: int | None = None

    @property
    def is_chat_model(self) -> bool:
        """Whether it can hold a conversation (a rerank-only definition cannot)."""
        return self.provider in CHAT_PROVIDERS

    @property
    def supports_vision(self) -> bool:
        default = self.base_url is None  # hosted OpenAI/Anthropic models see images
        return bool(self.capabilities.get("supports_vision", default))

    @property
    def supports_pdf(self) -> bool:
        """Whether an attached PDF goes as a document part (Anthropic's `document` block, OpenAI's
        `file` part) rather than as its text: only where `supports_pdf = true` says so."""
        return bool(self.capabilities.get("supports_pdf", False))


@dataclass(frozen=True)
class RerankerSettings:
    """The model definition selected as the reranker role, as the rerank client needs it."""

    url: str  # the full `/rerank` address
    model: str
    api_key: str | None = field(default=None, repr=False)
    instruction: str | None = None  # `[tools] rerank_instruction`
    timeout: float = RERANK_TIMEOUT_SECONDS


@dataclass(frozen=True)
class NotifySettings:
    """The `[notify]` section and the gateway's environment: where platforms are, the secrets."""

    discord_api_base: str = DEFAULT_DISCORD_API_BASE
    ntfy_base_url: str = DEFAULT_NTFY_BASE_URL
    allow_private_network: bool = False  # generic webhooks to private addresses (loopback included)
    heartbeat_seconds: float = DEFAULT_GATEWAY_HEARTBEAT_SECONDS
    stale_seconds: float = DEFAULT_GATEWAY_STALE_SECONDS
    retry_delays: tuple[float, ...] = NOTIFY_RETRY_DELAYS
    gateway_url: str | None = None  # None: http://127.0.0.1:GATEWAY_PORT
    # The web client's address as people reach it (`[notify] public_url`): approval links pushed
    # through notify open there (app/approval_links.py); None: a link is its path alone.
    public_url: str | None = None
    gateway_port: int = DEFAULT_GATEWAY_PORT
    service_secret: str | None = field(default=None, repr=False)  # None: the database's
    discord_bot_token: str | None = field(default=None, repr=False)
    # TURNSTONE_DISCORD_BOT_TOKEN_NAME variables: other bots a channel link may name
    discord_bot_tokens: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def advertised_url(self) -> str:
        return self.gateway_url or f"http://127.0.0.1:{self.gateway_port}"


NOTIFY_CONFIG_KEYS = (
    "discord_api_base",
    "ntfy_base_url",
    "allow_private_network",
    "heartbeat_seconds",
    "stale_seconds",
    "public_url",
)


@dataclass(frozen=True)
class ToolSettings:
    """The `[tools]` section."""

    timeout: int = DEFAULT_TOOL_TIMEOUT
    truncation: int = DEFAULT_TRUNCATION
    approval_timeout_seconds: int = DEFAULT_APPROVAL_TIMEOUT
    allow_private_network: bool = False
    workspace_dir: str | None = None
    search: str = "auto"
    search_threshold: int = DEFAULT_TOOL_SEARCH_THRESHOLD
    search_max_results: int = DEFAULT_TOOL_SEARCH_MAX_RESULTS
    agent_max_turns: int = 0
    searxng_url: str | None = None  # web_search's backend; unset, the tool is not offered
    web_search_backend: str = "searxng"  # or "mcp:SERVER:TOOL": that MCP tool answers the queries
    rerank_web_search: bool = True  # with a reranker selected, web_search reorders its results
    rerank_instruction: str | None = None  # wraps queries for a server that applies no template
    # with a reranker selected, memory, tool and skill retrieval is reranked: their text is sent to it
    rerank_bm25: bool = False
    rerank_bm25_threshold: float = 0.0  # the floor (0-1) a reranked memory needs to be injected; 0: none
    reranker: RerankerSettings | None = None  # from `[roles] reranker`, not a `[tools]` key
    mcp_call_timeout: int = DEFAULT_MCP_CALL_TIMEOUT
    watch_poll_concurrency: int = DEFAULT_WATCH_POLL_CONCURRENCY
    # bash run_in_background (app/tools/commands/background.py): shells running at once per
    # workstream, and the seconds one may go unread by bash_output before it is stopped
    background_shells: int = 4
    shell_idle_seconds: int = 1800
    notify: NotifySettings = field(default_factory=NotifySettings)  # from `[notify]`, not `[tools]`
    # The output guard (app/tools/core/guard.py): what every tool result goes through before the
    # model reads it. Credentials of well-known shapes are redacted; injection signs are flagged.
    redact_key_shapes: bool = True
    flag_injection: bool = True


@dataclass(frozen=True)
class MemorySettings:
    """The `[memory]` section: which memories reach the system prompt."""

    inject_max: int = MEMORY_INJECT_MAX
    inject_threshold: float = MEMORY_INJECT_THRESHOLD


@dataclass(frozen=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    redis_url: str = DEFAULT_REDIS_URL
    port: int = DEFAULT_PORT
    api_token: str | None = None
    metrics_token: str | None = None  # opens GET /metrics only (app/web/metrics.py)
    default_model: str = "default"
    models: Mapping[str, ModelSettings] = field(default_factory=dict)
    tools: ToolSettings = field(default_factory=ToolSettings)
    working_dir: str = field(default_factory=os.getcwd)
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS
    stale_after_seconds: float = DEFAULT_STALE_AFTER_SECONDS
    sweep_interval_seconds: float = DEFAULT_SWEEP_INTERVAL_SECONDS
    watch_poll_seconds: float = DEFAULT_WATCH_POLL_SECONDS
    model_health_seconds: float = DEFAULT_MODEL_HEALTH_SECONDS
    replay_log_length: int = DEFAULT_REPLAY_LOG_LENGTH
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    model_retries: int = DEFAULT_MODEL_RETRIES
    model_backoff_seconds: float = DEFAULT_MODEL_BACKOFF_SECONDS
    model_timeout_seconds: float = DEFAULT_MODEL_TIMEOUT_SECONDS
    model_stream_idle_seconds: float = DEFAULT_MODEL_STREAM_IDLE_SECONDS
    # [tool_sources.NAME]: `factory = "module:callable"` plus the factory's own options.
    tool_sources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    redis_retry_seconds: float = DEFAULT_REDIS_RETRY_SECONDS
    replay_log_bytes: int = DEFAULT_REPLAY_LOG_BYTES
    event_log_ttl_seconds: int = EVENT_LOG_TTL_SECONDS
    socket_max_unsent_bytes: int = DEFAULT_SOCKET_MAX_UNSENT_BYTES
    sockets_per_principal: int = DEFAULT_SOCKETS_PER_PRINCIPAL
    sockets_per_process: int = DEFAULT_SOCKETS_PER_PROCESS
    socket_ping_seconds: float = DEFAULT_SOCKET_PING_SECONDS
    fork_copy_max_bytes: int = DEFAULT_FORK_COPY_MAX_BYTES
    # [mcp.servers.NAME] merged with $TURNSTONE_MCP_CONFIG's mcpServers (app.mcp.config.ServerConfig)
    mcp_servers: Mapping[str, Any] = field(default_factory=dict)
    mcp_health_seconds: float = DEFAULT_MCP_HEALTH_SECONDS
    memory: MemorySettings = field(default_factory=MemorySettings)
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    webhooks: WebhookSettings = field(default_factory=lambda: WebhookSettings())  # app/webhooks
    schedule_min_every_seconds: int = 60  # DEFAULT_SCHEDULE_MIN_EVERY_SECONDS (app/schedules)
    # how long a client tool's call waits for its output (app/jobs/tool_outputs.py)
    client_tool_timeout_seconds: int = 3600  # DEFAULT_CLIENT_TOOL_TIMEOUT_SECONDS
    # runs one trigger may start in a minute (app/jobs/hook_limit.py)
    trigger_starts_per_minute: int = 30  # DEFAULT_TRIGGER_STARTS_PER_MINUTE
    compaction: CompactionSettings = field(default_factory=CompactionSettings)  # [compaction]
    prices: Mapping[str, Price] = field(default_factory=dict)  # [prices.MODEL] (app/usage/prices.py)
    budgets: BudgetSettings = field(default_factory=BudgetSettings)  # [budgets] (app/usage/budgets.py)
    config_file: str = field(default_factory=lambda: os.path.abspath(DEFAULT_CONFIG_PATH))  # read or not
    # Titles from a workstream's first exchange (app/titles.py): `titles = false` turns them
    # off; `[roles] titler` names the model that writes them (None: the workstream's own).
    titles: bool = True
    titler: str | None = None
    # `[roles] judge`: the chat model that gives calls waiting for a person a second verdict
    # (app/judge/model.py); None: the heuristic's alone.
    judge: str | None = None
    # `[roles] perception`: a chat model that sees images, which describes an attached image for
    # a model that cannot (app/attachments/perception.py); None: such a model is told it was not shown.
    perception: str | None = None

    @property
    def max_body_bytes(self) -> int:
        """The largest request body or websocket frame: room for the largest allowed message
        with JSON escaping; the engine's own check gives the precise 413."""
        return self.max_message_bytes * BODY_BYTES_PER_MESSAGE_BYTE + 4096

    @property
    def notify(self) -> NotifySettings:
        return self.tools.notify

    def model(self, name: str | None = None) -> ModelSettings | None:
        """The named model, or the default one; None when it is not configured."""
        return self.models.get(name or self.default_model)

    def with_changes(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Defaults, then `config.toml` (or `$TURNSTONE_CONFIG`), then the environment."""
        env = os.environ if environ is None else environ
        path = config_path(env)
        config = _read_toml(path) if path.is_file() else {}
        return cls.from_mapping(config, env)

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any], env: Mapping[str, str]) -> Settings:
        tools = _tool_settings(config.get("tools", {}))
        if SEARXNG_URL_ENV in env:
            tools = replace(tools, searxng_url=_searxng_url(env[SEARXNG_URL_ENV], SEARXNG_URL_ENV))
        models = _models(config.get("models", {}), env)
        tools = replace(tools, reranker=_reranker(config.get("roles", {}), models, tools))
        if tools.rerank_bm25 and tools.reranker is None:
            # asked for by name, it would otherwise change nothing without a word
            raise SettingsError('[tools] rerank_bm25 = true needs a reranker: set [roles] reranker = "MODEL"')
        tools = replace(tools, notify=_notify_settings(config.get("notify", {}), env))
        default_model = str(config.get("default_model", "default"))
        spec = env.get("TURNSTONE_MODEL")
        if spec:
            models = {**models, "default": _model_from_spec(spec, env)}
            default_model = "default"
        elif "default" not in models and default_model not in models:
            models = {**models, "default": _model_from_spec(DEFAULT_MODEL, env)}
        if default_model in models and not models[default_model].is_chat_model:
            raise SettingsError(f"default_model = {default_model!r} only reranks; name a chat model")
        return cls(
            database_url=env.get("DATABASE_URL", str(config.get("database_url", DEFAULT_DATABASE_URL))),
            redis_url=env.get("REDIS_URL", str(config.get("redis_url", DEFAULT_REDIS_URL))),
            port=_int(env.get("PORT", config.get("port", DEFAULT_PORT)), "PORT"),
            api_token=env.get("TURNSTONE_API_TOKEN") or None,
            metrics_token=env.get("TURNSTONE_METRICS_TOKEN") or None,
            default_model=default_model,
            models=models,
            tools=tools,
            working_dir=env.get("TURNSTONE_WORKING_DIR", os.getcwd()),
            heartbeat_seconds=_float(env.get("TURNSTONE_HEARTBEAT_SECONDS", DEFAULT_HEARTBEAT_SECONDS)),
            stale_after_seconds=_float(env.get("TURNSTONE_STALE_AFTER_SECONDS", DEFAULT_STALE_AFTER_SECONDS)),
            sweep_interval_seconds=_float(
                env.get("TURNSTONE_SWEEP_INTERVAL_SECONDS", DEFAULT_SWEEP_INTERVAL_SECONDS)
            ),
            model_retries=_int(
                env.get("TURNSTONE_MODEL_RETRIES", DEFAULT_MODEL_RETRIES), "TURNSTONE_MODEL_RETRIES"
            ),
            model_backoff_seconds=_float(
                env.get("TURNSTONE_MODEL_BACKOFF_SECONDS", DEFAULT_MODEL_BACKOFF_SECONDS)
            ),
            model_stream_idle_seconds=_positive(
                env.get("TURNSTONE_MODEL_STREAM_IDLE_SECONDS", DEFAULT_MODEL_STREAM_IDLE_SECONDS),
                "TURNSTONE_MODEL_STREAM_IDLE_SECONDS",
            ),
            tool_sources=_tool_sources(config.get("tool_sources", {})),
            redis_retry_seconds=_float(env.get("TURNSTONE_REDIS_RETRY_SECONDS", DEFAULT_REDIS_RETRY_SECONDS)),
            socket_ping_seconds=_float(env.get("TURNSTONE_SOCKET_PING_SECONDS", DEFAULT_SOCKET_PING_SECONDS)),
            socket_max_unsent_bytes=_count(
                env, "TURNSTONE_SOCKET_MAX_UNSENT_BYTES", DEFAULT_SOCKET_MAX_UNSENT_BYTES
            ),
            sockets_per_principal=_count(
                env, "TURNSTONE_SOCKETS_PER_PRINCIPAL", DEFAULT_SOCKETS_PER_PRINCIPAL
            ),
            sockets_per_process=_count(env, "TURNSTONE_SOCKETS_PER_PROCESS", DEFAULT_SOCKETS_PER_PROCESS),
            fork_copy_max_bytes=_count(env, "TURNSTONE_FORK_COPY_MAX_BYTES", DEFAULT_FORK_COPY_MAX_BYTES),
            watch_poll_seconds=_float(env.get(WATCH_POLL_SECONDS_ENV, DEFAULT_WATCH_POLL_SECONDS)),
            model_health_seconds=_off_or_positive(
                env.get(MODEL_HEALTH_SECONDS_ENV, DEFAULT_MODEL_HEALTH_SECONDS), MODEL_HEALTH_SECONDS_ENV
            ),
            mcp_servers=_mcp_servers(config.get("mcp", {}), env.get(MCP_CONFIG_ENV)),
            mcp_health_seconds=_float(env.get("TURNSTONE_MCP_HEALTH_SECONDS", DEFAULT_MCP_HEALTH_SECONDS)),
            memory=_memory_settings(config.get("memory", {})),
            sandbox=_sandbox_settings(config.get("sandbox", {}), env),
            webhooks=_webhook_settings(config.get("webhooks", {}), env),
            schedule_min_every_seconds=_count(
                env, SCHEDULE_MIN_EVERY_ENV, DEFAULT_SCHEDULE_MIN_EVERY_SECONDS
            ),
            client_tool_timeout_seconds=_count(
                env, CLIENT_TOOL_TIMEOUT_ENV, DEFAULT_CLIENT_TOOL_TIMEOUT_SECONDS
            ),
            trigger_starts_per_minute=_count(env, TRIGGER_STARTS_ENV, DEFAULT_TRIGGER_STARTS_PER_MINUTE),
            compaction=_compaction_settings(config, models),
            prices=_prices(config.get("prices", {}), models),
            budgets=_budgets(config.get("budgets", {})),
            config_file=os.path.abspath(config_path(env)),
            titles=_titles_on(config.get("titles", True)),
            titler=_chat_role(config.get("roles", {}), models, "titler"),
            judge=_chat_role(config.get("roles", {}), models, "judge"),
            perception=_seeing_role(config.get("roles", {}), models, "perception"),
        )


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    """The config file: `$TURNSTONE_CONFIG`, else `config.toml` in the current folder."""
    env = os.environ if environ is None else environ
    return Path(env.get(CONFIG_PATH_ENV, DEFAULT_CONFIG_PATH))


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: {exc}") from exc


def _tool_settings(section: Mapping[str, Any]) -> ToolSettings:
    known = set(ToolSettings.__dataclass_fields__) - {"reranker", "notify"}
    unknown = set(section) - known
    if unknown:
        raise SettingsError(f"[tools]: unknown key(s) {', '.join(sorted(unknown))}")
    tools = ToolSettings(**section)
    if not MIN_TOOL_TIMEOUT <= tools.timeout <= MAX_TOOL_TIMEOUT:
        raise SettingsError(f"[tools] timeout must be {MIN_TOOL_TIMEOUT}-{MAX_TOOL_TIMEOUT} s")
    if tools.truncation < 1024:
        raise SettingsError("[tools] truncation must be at least 1024 characters")
    for key in ("redact_key_shapes", "flag_injection"):
        if not isinstance(getattr(tools, key), bool):
            raise SettingsError(f"[tools] {key} must be true or false, got {getattr(tools, key)!r}")
    concurrency = tools.watch_poll_concurrency
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise SettingsError(
            f"[tools] watch_poll_concurrency must be a whole number, 1 or more, got {concurrency!r}"
        )
    keys = ("[tools] search", "[tools] search_threshold", "[tools] search_max_results")
    check_tool_search(tools.search, tools.search_threshold, tools.search_max_results, keys)
    if tools.searxng_url is not None:
        tools = replace(tools, searxng_url=_searxng_url(tools.searxng_url, "[tools] searxng_url"))
    tools = replace(tools, web_search_backend=_web_search_backend(tools.web_search_backend))
    _check_rerank_keys(tools)
    return tools


def _web_search_backend(value: Any) -> str:
    """`searxng`, or `mcp:SERVER:TOOL` with both names given (the server may be added later)."""
    shown = f"[tools] web_search_backend must be {' or '.join(repr(b) for b in WEB_SEARCH_BACKENDS)}"
    if not isinstance(value, str):
        raise SettingsError(f"{shown}, not {value!r}")
    if value == "searxng":
        return value
    scheme, _, rest = value.partition(":")
    server, _, tool = rest.partition(":")
    names = (server, tool)
    if scheme != "mcp" or any(not name.strip() or name != name.strip() for name in names):
        raise SettingsError(f"{shown}, not {value!r}")
    return value


def web_search_mcp_target(backend: str) -> tuple[str, str] | None:
    """(server, tool) of an `mcp:SERVER:TOOL` backend; None for SearxNG."""
    if not backend.startswith("mcp:"):
        return None
    server, _, tool = backend.removeprefix("mcp:").partition(":")
    return server, tool


def _check_rerank_keys(tools: ToolSettings) -> None:
    for key in ("rerank_web_search", "rerank_bm25"):
        if not isinstance(getattr(tools, key), bool):
            raise SettingsError(f"[tools] {key} must be true or false, not {_shown(getattr(tools, key))}")
    if tools.rerank_instruction is not None and not isinstance(tools.rerank_instruction, str):
        raise SettingsError("[tools] rerank_instruction must be a string")
    threshold = tools.rerank_bm25_threshold
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 <= threshold <= 1:
        raise SettingsError(f"[tools] rerank_bm25_threshold must be a number from 0 to 1, not {threshold!r}")


def _reranker(
    section: Any, models: Mapping[str, ModelSettings], tools: ToolSettings
) -> RerankerSettings | None:
    """The `[roles] reranker` model, checked: configured, and able to rerank."""
    if not isinstance(section, Mapping):
        raise SettingsError('[roles] must be a table, e.g. reranker = "MODEL"')
    unknown = set(section) - set(ROLES)
    if unknown:
        roles = ", ".join(sorted(unknown))
        raise SettingsError(f"[roles]: unknown role(s) {roles} (known: {', '.join(ROLES)})")
    name = section.get("reranker")
    if name is None:
        return None
    if not isinstance(name, str) or name not in models:
        known = ", ".join(sorted(models)) or "none"
        raise SettingsError(f"[roles] reranker = {name!r} is not a configured model (configured: {known})")
    model = models[name]
    if not model.capabilities.get("supports_rerank"):
        raise SettingsError(f"[roles] reranker: [models.{name}] needs capabilities supports_rerank = true")
    if not model.base_url:
        raise SettingsError(f"[roles] reranker: [models.{name}] needs a base_url (its /rerank endpoint)")
    return RerankerSettings(rerank_url(model.base_url), model.model, model.api_key, tools.rerank_instruction)


def rerank_url(base_url: str) -> str:
    """The endpoint itself: `.../rerank` as given, or a base URL with `/rerank` added."""
    url = base_url.rstrip("/")
    return url if url.endswith("/rerank") else f"{url}/rerank"


def check_tool_search(mode: Any, threshold: Any, max_results: Any, keys: tuple[str, str, str]) -> None:
    """`SettingsError` naming the key (`keys`: the mode's, the threshold's, max_results')
    unless the three tool search values are usable (see TOOL_SEARCH_*)."""
    if not isinstance(mode, str) or mode not in TOOL_SEARCH_MODES:
        raise SettingsError(f"{keys[0]} must be one of {', '.join(TOOL_SEARCH_MODES)}, not {_shown(mode)}")
    if not _is_whole(threshold) or not 0 <= threshold <= MAX_TOOL_SEARCH_THRESHOLD:
        raise SettingsError(
            f"{keys[1]} must be a whole number 0-{MAX_TOOL_SEARCH_THRESHOLD}, not {_shown(threshold)}"
        )
    low, high = TOOL_SEARCH_MAX_RESULTS_RANGE
    if not _is_whole(max_results) or not low <= max_results <= high:
        raise SettingsError(f"{keys[2]} must be a whole number {low}-{high}, not {_shown(max_results)}")


def _shown(value: Any) -> str:
    # A person's or a config file's value, cut short (it may be huge, deep or hold control characters).
    if not isinstance(value, (str, int, float)) or value is None:
        return f"a {type(value).__name__}" if value is not None else "null"
    text = ascii(value)
    return text if len(text) <= 40 else text[:40] + "..."


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _searxng_url(value: Any, key: str) -> str | None:
    """An http(s) base URL (SearxNG's, a platform's, the gateway's, the public one) without its
    trailing slash; empty means none. No whitespace or control character inside: such a URL
    would be cut or refused wherever it is used."""
    if not isinstance(value, str):
        raise SettingsError(f"{key} must be a string")
    url = value.strip().rstrip("/")
    if not url:
        return None
    unusable = any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url)
    if unusable or not url.startswith(("http://", "https://")) or len(url.split("/")[2]) == 0:
        raise SettingsError(f"{key} must be an http:// or https:// URL, not {value!r}")
    return url


def _tool_sources(section: Any) -> dict[str, Mapping[str, Any]]:
    if not isinstance(section, Mapping):
        raise SettingsError("[tool_sources] must be a table of [tool_sources.NAME] entries")
    sources: dict[str, Mapping[str, Any]] = {}
    for name, entry in section.items():
        factory = entry.get("factory") if isinstance(entry, Mapping) else None
        if not isinstance(factory, str) or ":" not in factory:
            raise SettingsError(f'[tool_sources.{name}] needs factory = "module:callable"')
        sources[name] = dict(entry)
    return sources


def _mcp_servers(section: Any, json_path: str | None) -> dict[str, Any]:
    """`[mcp.servers.*]` then the JSON file's `mcpServers` (the file wins a name both define)."""
    from app.mcp.config import ORIGIN_CONFIG, ServerConfigError, parse_json_file, parse_servers

    if not isinstance(section, Mapping) or set(section) - {"servers"}:
        raise SettingsError("[mcp] may hold only [mcp.servers.NAME] tables")
    try:
        servers = parse_servers(section.get("servers", {}), "[mcp.servers]", ORIGIN_CONFIG)
        if json_path:
            try:
                text = Path(json_path).read_text()
            except OSError as exc:
                raise SettingsError(f"{MCP_CONFIG_ENV}={json_path}: cannot read: {exc}") from exc
            servers.update(parse_json_file(text, json_path))
    except ServerConfigError as exc:
        raise SettingsError(str(exc)) from exc
    return servers


def _models(section: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, ModelSettings]:
    models = {}
    for name, entry in section.items():
        provider = entry.get("provider")
        if provider not in (*CHAT_PROVIDERS, RERANK_PROVIDER):
            raise SettingsError(f"[models.{name}] provider must be 'openai', 'anthropic' or 'rerank'")
        if provider == RERANK_PROVIDER and not entry.get("capabilities", {}).get("supports_rerank"):
            raise SettingsError(f"[models.{name}] provider 'rerank' needs capabilities supports_rerank")
        if not entry.get("model"):
            raise SettingsError(f"[models.{name}] needs a 'model'")
        _check_web_search_capabilities(name, entry.get("capabilities", {}))
        models[name] = ModelSettings(
            name=name,
            provider=provider,
            model=entry["model"],
            base_url=entry.get("base_url") or _env_base_url(provider, env),
            api_key=_env_api_key(provider, env, entry.get("api_key_env")),
            capabilities=dict(entry.get("capabilities", {})),
            max_tokens=_max_tokens(entry.get("max_tokens"), f"[models.{name}] max_tokens"),
            fallbacks=_fallback_names(name, entry.get("fallbacks", [])),
            max_concurrent=(
                _whole(entry["max_concurrent"], f"[models.{name}] max_concurrent")
                if "max_concurrent" in entry
                else None
            ),
            **_wire_profile(name, provider, entry),
        )
    for model in models.values():
        for other in model.fallbacks:
            if other not in models or not models[other].is_chat_model:
                raise SettingsError(f"[models.{model.name}] fallbacks: {other!r} is no configured chat model")
    return models


MAX_FALLBACKS = 5


def _fallback_names(name: str, value: Any) -> tuple[str, ...]:
    """`[models.NAME] fallbacks`: other models' names, each once, at most MAX_FALLBACKS."""
    key = f"[models.{name}] fallbacks"
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise SettingsError(f"{key} must be a list of model names")
    if name in value or len(set(value)) != len(value) or len(value) > MAX_FALLBACKS:
        raise SettingsError(f"{key}: at most {MAX_FALLBACKS} other models, each named once")
    return tuple(value)


# The server families whose wire quirks app/providers/profiles.py knows (docs/providers.md).
PROVIDER_FAMILIES = (
    "openai",
    "anthropic",
    "vllm",
    "llamacpp",
    "ollama",
    "tgi",
    "deepseek",
    "litellm",
    "openrouter",
    "generic",
)
ANTHROPIC_MIN_THINKING_BUDGET = 1024  # the Messages API refuses a smaller budget_tokens


def _wire_profile(name: str, provider: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """`[models.NAME] provider_family` and `thinking_budget_tokens`, checked."""
    family = entry.get("provider_family")
    if family is not None and family not in PROVIDER_FAMILIES:
        raise SettingsError(f"[models.{name}] provider_family must be one of {', '.join(PROVIDER_FAMILIES)}")
    if (family == "anthropic") != (provider == "anthropic") and family not in (None, "generic", "litellm"):
        raise SettingsError(f"[models.{name}] provider_family {family!r} does not speak {provider!r}")
    budget = _max_tokens(entry.get("thinking_budget_tokens"), f"[models.{name}] thinking_budget_tokens")
    if budget is not None and (provider != "anthropic" or budget < ANTHROPIC_MIN_THINKING_BUDGET):
        raise SettingsError(
            f"[models.{name}] thinking_budget_tokens is for provider 'anthropic', at least "
            f"{ANTHROPIC_MIN_THINKING_BUDGET}"
        )
    return {"provider_family": family, "thinking_budget_tokens": budget}


def _check_web_search_capabilities(name: str, capabilities: Mapping[str, Any]) -> None:
    key = f"[models.{name}.capabilities]"
    if not isinstance(capabilities.get(WEB_SEARCH_CAPABILITY, False), bool):
        raise SettingsError(f"{key} {WEB_SEARCH_CAPABILITY} must be true or false")
    uses = capabilities.get(WEB_SEARCH_MAX_USES_KEY, DEFAULT_WEB_SEARCH_MAX_USES)
    if isinstance(uses, bool) or not isinstance(uses, int) or not 1 <= uses <= MAX_WEB_SEARCH_MAX_USES:
        limit = f"a whole number 1-{MAX_WEB_SEARCH_MAX_USES}"
        raise SettingsError(f"{key} {WEB_SEARCH_MAX_USES_KEY} must be {limit}, not {uses!r}")


def default_max_tokens(model: str) -> int:
    """The output limit of `model`'s family (see MAX_TOKENS_BY_MODEL_FAMILY)."""
    name = model.lower()
    matches = [fragment for fragment in MAX_TOKENS_BY_MODEL_FAMILY if fragment in name]
    if not matches:
        return DEFAULT_MAX_TOKENS
    return MAX_TOKENS_BY_MODEL_FAMILY[max(matches, key=len)]


def _max_tokens(value: Any, key: str) -> int | None:
    if value is None:
        return None
    # bool is an int in Python, and `max_tokens = true` is surely a mistake.
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SettingsError(f"{key} must be a positive whole number, got {value!r}")
    return value


def _model_from_spec(spec: str, env: Mapping[str, str]) -> ModelSettings:
    provider, sep, model = spec.partition(":")
    if not sep or provider not in ("openai", "anthropic") or not model:
        raise SettingsError(f"TURNSTONE_MODEL={spec!r}: expected 'openai:MODEL' or 'anthropic:MODEL'")
    return ModelSettings(
        name="default",
        provider=provider,
        model=model,
        base_url=_env_base_url(provider, env),
        api_key=_env_api_key(provider, env, None),
    )


# The variables a provider's base URL and key come from when its entry names none; a
# rerank-only definition has no default (its key, if any, comes from `api_key_env`).
DEFAULT_BASE_URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
DEFAULT_API_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def _env_base_url(provider: str, env: Mapping[str, str]) -> str | None:
    name = DEFAULT_BASE_URL_ENV.get(provider)
    return (env.get(name) or None) if name else None


def _env_api_key(provider: str, env: Mapping[str, str], named: str | None) -> str | None:
    name = named or DEFAULT_API_KEY_ENV.get(provider)
    return (env.get(name) or None) if name else None


def _whole(value: Any, name: str) -> int:
    """A whole number of at least 1 (a TOML integer, or its text in the environment)."""
    if isinstance(value, bool | float) or not str(value).strip().isdigit() or int(value) < 1:
        raise SettingsError(f"{name} must be a whole number of 1 or more, got {value!r}")
    return int(value)


def _int(value: Any, name: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise SettingsError(f"{name} must be a whole number, got {value!r}") from exc


def _count(env: Mapping[str, str], name: str, default: int) -> int:
    """A whole number of at least 1 from `env[name]`, else `default`."""
    value = _int(env.get(name, default), name)
    if value < 1:
        raise SettingsError(f"{name} must be 1 or more, got {value}")
    return value


def _float(value: Any) -> float:
    return float(value)


def _off_or_positive(value: Any, name: str) -> float:
    """Seconds above 0, or 0 for off."""
    return 0.0 if str(value).strip() in ("0", "0.0") else _positive(value, name)


def _positive(value: Any, name: str) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError) as exc:
        raise SettingsError(f"{name} must be a number of seconds, got {value!r}") from exc
    if not 0 < seconds < float("inf"):
        raise SettingsError(f"{name} must be above 0 seconds, got {value!r}")
    return seconds


def _memory_settings(section: Any) -> MemorySettings:
    if not isinstance(section, Mapping):
        raise SettingsError("[memory] must be a table")
    unknown = set(section) - set(MemorySettings.__dataclass_fields__)
    if unknown:
        raise SettingsError(f"[memory]: unknown key(s) {', '.join(sorted(unknown))}")
    inject_max = section.get("inject_max", MEMORY_INJECT_MAX)
    if not isinstance(inject_max, int) or isinstance(inject_max, bool) or inject_max < 0:
        raise SettingsError(f"[memory] inject_max must be a whole number, 0 or more, got {inject_max!r}")
    threshold = section.get("inject_threshold", MEMORY_INJECT_THRESHOLD)
    if not isinstance(threshold, int | float) or isinstance(threshold, bool) or threshold < 0:
        raise SettingsError(f"[memory] inject_threshold must be a number, 0 or more, got {threshold!r}")
    return MemorySettings(inject_max=inject_max, inject_threshold=float(threshold))


def _sandbox_settings(section: Any, env: Mapping[str, str]) -> SandboxSettings:
    try:
        return sandbox_settings.from_section(section, env)
    except sandbox_settings.SandboxSettingsError as exc:
        raise SettingsError(str(exc)) from None


def _titles_on(value: Any) -> bool:
    if not isinstance(value, bool):
        raise SettingsError(f"titles must be true or false, not {value!r}")
    return value


def _chat_role(roles: Mapping[str, Any], models: Mapping[str, ModelSettings], role: str) -> str | None:
    """`[roles] <role>` where it names a chat model: that configured model's name, or None."""
    name = roles.get(role)
    if name is None:
        return None
    if not isinstance(name, str) or name not in models or not models[name].is_chat_model:
        known = ", ".join(sorted(n for n, m in models.items() if m.is_chat_model)) or "none"
        raise SettingsError(f"[roles] {role} = {name!r} is not a configured chat model (configured: {known})")
    return name


def _seeing_role(roles: Mapping[str, Any], models: Mapping[str, ModelSettings], role: str) -> str | None:
    """`[roles] <role>` where it names a chat model that can view images."""
    name = _chat_role(roles, models, role)
    if name is not None and not models[name].supports_vision:
        raise SettingsError(
            f"[roles] {role} = {name!r} cannot view images: set [models.{name}.capabilities] "
            "supports_vision = true, or name a model that can"
        )
    return name


def _compaction_settings(
    config: Mapping[str, Any], models: Mapping[str, ModelSettings]
) -> CompactionSettings:
    chat = {name for name, model in models.items() if model.is_chat_model}
    try:
        return compaction_settings.from_config(config, chat)
    except compaction_settings.CompactionSettingsError as exc:
        raise SettingsError(str(exc)) from None


def _prices(section: Any, models: Mapping[str, ModelSettings]) -> dict[str, Price]:
    try:
        return price_table.from_config(section, set(models))
    except price_table.PricesError as exc:
        raise SettingsError(str(exc)) from None


def _budgets(section: Any) -> BudgetSettings:
    try:
        return budget_table.from_config(section)
    except budget_table.BudgetsError as exc:
        raise SettingsError(str(exc)) from None


def _notify_settings(section: Any, env: Mapping[str, str]) -> NotifySettings:
    """`[notify]` (platform addresses, the private-network switch, the gateway's clock) and the
    environment: the service secret, the Discord bot token, the gateway's address."""
    if not isinstance(section, Mapping):
        raise SettingsError("[notify] must be a table")
    unknown = set(section) - set(NOTIFY_CONFIG_KEYS)
    if unknown:
        raise SettingsError(f"[notify]: unknown key(s) {', '.join(sorted(unknown))}")
    bases: dict[str, str] = {}
    platforms = (("discord_api_base", DEFAULT_DISCORD_API_BASE), ("ntfy_base_url", DEFAULT_NTFY_BASE_URL))
    for key, default in platforms:
        url = _searxng_url(section.get(key, default), f"[notify] {key}")  # an http(s) base, no trailing /
        if url is None:
            raise SettingsError(f"[notify] {key} must not be empty")
        bases[key] = url
    allow = section.get("allow_private_network", False)
    if not isinstance(allow, bool):
        raise SettingsError("[notify] allow_private_network must be true or false")
    clock: dict[str, float] = {}
    clocks = (
        ("heartbeat_seconds", DEFAULT_GATEWAY_HEARTBEAT_SECONDS),
        ("stale_seconds", DEFAULT_GATEWAY_STALE_SECONDS),
    )
    for name, seconds in clocks:
        key, value = name, section.get(name, seconds)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise SettingsError(f"[notify] {key} must be a positive number of seconds, not {_shown(value)}")
        clock[key] = float(value)
    if clock["stale_seconds"] <= clock["heartbeat_seconds"]:
        raise SettingsError("[notify] stale_seconds must be longer than heartbeat_seconds")
    gateway_url = env.get(GATEWAY_URL_ENV) or None
    if gateway_url is not None:
        gateway_url = _searxng_url(gateway_url, GATEWAY_URL_ENV)
    public = env.get(PUBLIC_URL_ENV) or section.get("public_url")
    where = PUBLIC_URL_ENV if env.get(PUBLIC_URL_ENV) else "[notify] public_url"
    public_url = _searxng_url(public, where) if public is not None else None
    return NotifySettings(
        discord_api_base=bases["discord_api_base"],
        ntfy_base_url=bases["ntfy_base_url"],
        allow_private_network=allow,
        heartbeat_seconds=clock["heartbeat_seconds"],
        stale_seconds=clock["stale_seconds"],
        gateway_url=gateway_url,
        public_url=public_url,
        gateway_port=_int(env.get(GATEWAY_PORT_ENV, DEFAULT_GATEWAY_PORT), GATEWAY_PORT_ENV),
        service_secret=env.get(SERVICE_JWT_SECRET_ENV) or None,
        discord_bot_token=env.get(DISCORD_BOT_TOKEN_ENV) or None,
        discord_bot_tokens={k: v for k, v in env.items() if k.startswith(DISCORD_BOT_TOKEN_ENV + "_") and v},
    )


# -- `turnstone-jobs run`'s record (app/runs.py) ------------------------------------------------
# While a run lives, it leaves a small JSON file saying where its service is (its folder, its
# database, its private Redis), so that a command run elsewhere can say which database the
# service uses and `approve` can reach the Redis only the run knows. No secret is written there.


def run_records_folder(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_STATE_HOME/turnstone-jobs/runs`, by default `~/.local/state/turnstone-jobs/runs`."""
    env = os.environ if environ is None else environ
    state = env.get("XDG_STATE_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".local/state"
    )
    return Path(state) / "turnstone-jobs" / "runs"


# -- webhooks (app/webhooks, docs/webhooks.md) ---------------------------------------------------

# Seconds to wait after each failed delivery attempt, then the last again until the day is over.
DEFAULT_WEBHOOK_RETRY_DELAYS = (5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0)
WEBHOOK_GIVE_UP_SECONDS = 24 * 3600.0  # a delivery not accepted this long after its event fails
DEFAULT_WEBHOOK_TIMEOUT_SECONDS = 10.0  # one attempt: connect, send, answer
WEBHOOK_ALLOW_PRIVATE_ENV = "TURNSTONE_WEBHOOKS_ALLOW_PRIVATE_NETWORK"
WEBHOOK_RETRY_DELAYS_ENV = "TURNSTONE_WEBHOOK_RETRY_DELAYS"  # "5,300,1800": for tests and operators
# Attempts a worker process makes at once (`[webhooks] concurrency`): a slow receiver holds a
# worker thread for up to the timeout, and must never hold all of them.
DEFAULT_WEBHOOK_CONCURRENCY = 4
WEBHOOK_CONCURRENCY_ENV = "TURNSTONE_WEBHOOK_CONCURRENCY"


@dataclass(frozen=True)
class WebhookSettings:
    """`[webhooks]`: whether endpoints may be on private addresses (the admin's switch; loopback
    included, cloud metadata never), the retry delays, one attempt's timeout."""

    allow_private_network: bool = False
    retry_delays: tuple[float, ...] = DEFAULT_WEBHOOK_RETRY_DELAYS
    timeout_seconds: float = DEFAULT_WEBHOOK_TIMEOUT_SECONDS
    give_up_seconds: float = WEBHOOK_GIVE_UP_SECONDS
    concurrency: int = DEFAULT_WEBHOOK_CONCURRENCY


def _webhook_settings(section: Any, env: Mapping[str, str]) -> WebhookSettings:
    if not isinstance(section, Mapping):
        raise SettingsError("[webhooks] must be a table")
    unknown = set(section) - {"allow_private_network", "retry_delays", "timeout_seconds", "concurrency"}
    if unknown:
        raise SettingsError(f"[webhooks]: unknown key(s) {', '.join(sorted(unknown))}")
    private = env.get(WEBHOOK_ALLOW_PRIVATE_ENV)
    delays: Any = env.get(WEBHOOK_RETRY_DELAYS_ENV)
    delays = delays.split(",") if delays else section.get("retry_delays", DEFAULT_WEBHOOK_RETRY_DELAYS)
    try:
        retry = tuple(float(d) for d in delays)
    except (TypeError, ValueError):
        raise SettingsError("[webhooks] retry_delays: expected a list of seconds") from None
    if not retry or any(not 0 < d <= WEBHOOK_GIVE_UP_SECONDS for d in retry):
        raise SettingsError("[webhooks] retry_delays: each a number of seconds above 0, at most a day")
    return WebhookSettings(
        allow_private_network=(
            private.strip().lower() in ("1", "true", "yes", "on")
            if private is not None
            else bool(section.get("allow_private_network", False))
        ),
        retry_delays=retry,
        timeout_seconds=_positive(
            section.get("timeout_seconds", DEFAULT_WEBHOOK_TIMEOUT_SECONDS), "[webhooks] timeout_seconds"
        ),
        concurrency=_whole(
            env.get(WEBHOOK_CONCURRENCY_ENV, section.get("concurrency", DEFAULT_WEBHOOK_CONCURRENCY)),
            f"{WEBHOOK_CONCURRENCY_ENV} ([webhooks] concurrency)",
        ),
    )


# -- schedules (app/schedules, docs/schedules.md) ------------------------------------------------

DEFAULT_SCHEDULE_MIN_EVERY_SECONDS = 60  # the shortest `every` a schedule may ask (cron: a minute)
SCHEDULE_MIN_EVERY_ENV = "TURNSTONE_SCHEDULE_MIN_EVERY_SECONDS"

# -- runs' client tools and triggers (app/jobs, docs/runs.md, docs/triggers.md) -------------------

DEFAULT_CLIENT_TOOL_TIMEOUT_SECONDS = 3600  # a client tool's call waits this long for its output
CLIENT_TOOL_TIMEOUT_ENV = "TURNSTONE_CLIENT_TOOL_TIMEOUT_SECONDS"
DEFAULT_TRIGGER_STARTS_PER_MINUTE = 30  # runs one trigger's URL may start in a minute
TRIGGER_STARTS_ENV = "TURNSTONE_TRIGGER_STARTS_PER_MINUTE"
