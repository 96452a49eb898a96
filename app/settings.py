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
TOOL_POOL_SIZE = 4  # parallel calls of one batch

# Durability: a running step writes a heartbeat; the sweeper re-queues a step
# whose heartbeat is older than the stale limit.
DEFAULT_HEARTBEAT_SECONDS = 5.0
DEFAULT_STALE_AFTER_SECONDS = 30.0
DEFAULT_SWEEP_INTERVAL_SECONDS = 10.0
DEFAULT_WATCH_POLL_SECONDS = 15.0
# A phase claimed this many times without finishing (its worker died, or it met a
# passing fault each time) fails its turn instead of being tried again.
MAX_PHASE_ATTEMPTS = 5

# Streaming: coalesce deltas and output chunks.
STREAM_FLUSH_SECONDS = 0.025
STREAM_FLUSH_CHARS = 4096

# HTTP input: the web tier's limits.
DEFAULT_RUN_HOST = "127.0.0.1"  # `turnstone-jobs run` binds this machine only unless told
MAX_NAME_CHARS = 200  # longest text a person may give where the column holds 200 (names, keys)
MAX_ID_CHARS = 32  # the id columns' width
# An over-large body is read and dropped up to this much before the 413 goes out, so that
# a client that sends its whole body before reading (curl, requests) sees the answer and
# not a broken pipe; past it the connection is closed.
MAX_DISCARD_BYTES = 64 * 1024 * 1024
# A request whose body stops arriving (shorter than its Content-Length, a stalled client)
# is answered 400 after this long without a byte, instead of holding a thread for ever.
REQUEST_READ_TIMEOUT_SECONDS = 30.0
BODY_BYTES_PER_MESSAGE_BYTE = 6  # JSON escapes a character into at most six bytes (\uXXXX)

DEFAULT_REPLAY_LOG_LENGTH = 10_000  # events kept per workstream
DEFAULT_REPLAY_LOG_BYTES = 8 * 1024 * 1024  # and about this many bytes of them at most (the newest stays)
EVENT_LOG_TTL_SECONDS = 7 * 24 * 3600  # a workstream's event keys expire this long after its last event
DEFAULT_LIVE_QUEUE_EVENTS = 1000  # live events waiting for one websocket; past that it resyncs from the log
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024  # a user message larger than this is a 413

# The guarded fetcher (app/tools/fetch) and web_fetch.
FETCH_MAX_BYTES = 32 * 1024 * 1024  # a body past this is refused, counted as it streams
FETCH_MAX_REDIRECTS = 5  # followed by hand, each hop screened; the sixth is refused
FETCH_CONNECT_TIMEOUT_SECONDS = 10.0
FETCH_READ_TIMEOUT_SECONDS = 30.0  # the longest wait for the next bytes of a response
FETCH_TOTAL_SECONDS = 120.0  # one fetch, every hop and the whole body, however it trickles
FETCH_MAX_URL_CHARS = 8192
FETCH_USER_AGENT = "turnstone-jobs/0.1 (web_fetch)"
# The page text the workstream's model gets with the question, at most; a model that
# says it does not fit gets half as much, down to the floor.
WEB_FETCH_MAX_PAGE_CHARS = 120_000
WEB_FETCH_MIN_PAGE_CHARS = 8_000

# web_search over SearxNG (app/tools/searxng.py). The URL is the operator's, never the model's.
SEARXNG_URL_ENV = "TURNSTONE_SEARXNG_URL"
SEARXNG_CONNECT_TIMEOUT_SECONDS = 5.0
SEARXNG_TIMEOUT_SECONDS = 20.0  # SearxNG waits on its own engines; it answers within this or fails
WEB_SEARCH_DEFAULT_RESULTS = 5
WEB_SEARCH_MAX_RESULTS = 20
WEB_SEARCH_SNIPPET_CHARS = 400  # one result's extract, at most

# memory, recall and skill (app/memory, app/recall, app/skills).
MEMORY_INJECT_MAX = 5  # memories put into the system prompt at a turn's first model step, at most
# The share of the user's message a memory must match to be injected: its BM25 score over
# the sum of the message's words' IDFs (app/memory/relevance.py).
MEMORY_INJECT_THRESHOLD = 0.2
MEMORY_DEFAULT_LIMIT = 20  # search and list results when the call gives no limit
MEMORY_MAX_LIMIT = 100
MEMORY_MAX_CONTENT_CHARS = 20_000
MEMORY_MAX_DESCRIPTION_CHARS = 500
MEMORY_INJECT_CHARS = 2_000  # one memory's content in the system prompt, at most
RECALL_DEFAULT_LIMIT = 20
RECALL_MAX_LIMIT = 100
RECALL_MAX_QUERY_CHARS = 1_000
RECALL_MAX_TERMS = 16  # words and phrases of one query; more are refused, not silently dropped
SKILL_SEARCH_RESULTS = 10
SKILL_MAX_CONTENT_CHARS = 100_000

DEFAULT_MODEL_RETRIES = 3  # after the first try, on 429/5xx/connection errors
DEFAULT_MODEL_BACKOFF_SECONDS = 0.5  # doubled on each retry
DEFAULT_MODEL_TIMEOUT_SECONDS = 120.0

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
REDIS_RETRY_FIRST_DELAY_SECONDS = 0.05  # doubled after each failed try
REDIS_RETRY_MAX_DELAY_SECONDS = 1.0

CONFIG_PATH_ENV = "TURNSTONE_CONFIG"
DEFAULT_CONFIG_PATH = "config.toml"

# Environment names whose values are the service's own secrets: never shown to
# a tool's subprocess, never logged.
SERVICE_SECRET_ENV = (
    "DATABASE_URL",
    "REDIS_URL",
    "TURNSTONE_API_TOKEN",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
)


class SettingsError(ValueError):
    """The configuration is invalid; the message says which key and why."""


@dataclass(frozen=True)
class ModelSettings:
    """One `[models.NAME]` entry (or the one `TURNSTONE_MODEL` names)."""

    name: str
    provider: str  # "openai" (any OpenAI-compatible server) or "anthropic"
    model: str
    base_url: str | None = None
    api_key: str | None = None
    capabilities: Mapping[str, Any] = field(default_factory=dict)
    max_tokens: int | None = None  # None: the family's default (`default_max_tokens`)

    @property
    def supports_vision(self) -> bool:
        default = self.base_url is None  # hosted OpenAI/Anthropic models see images
        return bool(self.capabilities.get("supports_vision", default))


@dataclass(frozen=True)
class ToolSettings:
    """The `[tools]` section."""

    timeout: int = DEFAULT_TOOL_TIMEOUT
    truncation: int = DEFAULT_TRUNCATION
    approval_timeout_seconds: int = DEFAULT_APPROVAL_TIMEOUT
    allow_private_network: bool = False
    workspace_dir: str | None = None
    search: str = "auto"
    search_threshold: int = 20
    search_max_results: int = 5
    agent_max_turns: int = 0
    searxng_url: str | None = None  # web_search's backend; unset, the tool is not offered


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
    default_model: str = "default"
    models: Mapping[str, ModelSettings] = field(default_factory=dict)
    tools: ToolSettings = field(default_factory=ToolSettings)
    working_dir: str = field(default_factory=os.getcwd)
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS
    stale_after_seconds: float = DEFAULT_STALE_AFTER_SECONDS
    sweep_interval_seconds: float = DEFAULT_SWEEP_INTERVAL_SECONDS
    watch_poll_seconds: float = DEFAULT_WATCH_POLL_SECONDS
    replay_log_length: int = DEFAULT_REPLAY_LOG_LENGTH
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    model_retries: int = DEFAULT_MODEL_RETRIES
    model_backoff_seconds: float = DEFAULT_MODEL_BACKOFF_SECONDS
    model_timeout_seconds: float = DEFAULT_MODEL_TIMEOUT_SECONDS
    # [tool_sources.NAME]: `factory = "module:callable"` plus the factory's own options.
    tool_sources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    redis_retry_seconds: float = DEFAULT_REDIS_RETRY_SECONDS
    replay_log_bytes: int = DEFAULT_REPLAY_LOG_BYTES
    event_log_ttl_seconds: int = EVENT_LOG_TTL_SECONDS
    live_queue_events: int = DEFAULT_LIVE_QUEUE_EVENTS
    memory: MemorySettings = field(default_factory=MemorySettings)

    @property
    def max_body_bytes(self) -> int:
        """The largest request body or websocket frame: room for the largest allowed message
        with JSON escaping; the engine's own check gives the precise 413."""
        return self.max_message_bytes * BODY_BYTES_PER_MESSAGE_BYTE + 4096

    def model(self, name: str | None = None) -> ModelSettings | None:
        """The named model, or the default one; None when it is not configured."""
        return self.models.get(name or self.default_model)

    def with_changes(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Defaults, then `config.toml` (or `$TURNSTONE_CONFIG`), then the environment."""
        env = os.environ if environ is None else environ
        path = Path(env.get(CONFIG_PATH_ENV, DEFAULT_CONFIG_PATH))
        config = _read_toml(path) if path.is_file() else {}
        return cls.from_mapping(config, env)

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any], env: Mapping[str, str]) -> Settings:
        tools = _tool_settings(config.get("tools", {}))
        if SEARXNG_URL_ENV in env:
            tools = replace(tools, searxng_url=_searxng_url(env[SEARXNG_URL_ENV], SEARXNG_URL_ENV))
        models = _models(config.get("models", {}), env)
        default_model = str(config.get("default_model", "default"))
        spec = env.get("TURNSTONE_MODEL")
        if spec:
            models = {**models, "default": _model_from_spec(spec, env)}
            default_model = "default"
        elif "default" not in models and default_model not in models:
            models = {**models, "default": _model_from_spec(DEFAULT_MODEL, env)}
        return cls(
            database_url=env.get("DATABASE_URL", str(config.get("database_url", DEFAULT_DATABASE_URL))),
            redis_url=env.get("REDIS_URL", str(config.get("redis_url", DEFAULT_REDIS_URL))),
            port=_int(env.get("PORT", config.get("port", DEFAULT_PORT)), "PORT"),
            api_token=env.get("TURNSTONE_API_TOKEN") or None,
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
            tool_sources=_tool_sources(config.get("tool_sources", {})),
            redis_retry_seconds=_float(env.get("TURNSTONE_REDIS_RETRY_SECONDS", DEFAULT_REDIS_RETRY_SECONDS)),
            memory=_memory_settings(config.get("memory", {})),
        )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: {exc}") from exc


def _tool_settings(section: Mapping[str, Any]) -> ToolSettings:
    known = set(ToolSettings.__dataclass_fields__)
    unknown = set(section) - known
    if unknown:
        raise SettingsError(f"[tools]: unknown key(s) {', '.join(sorted(unknown))}")
    tools = ToolSettings(**section)
    if not MIN_TOOL_TIMEOUT <= tools.timeout <= MAX_TOOL_TIMEOUT:
        raise SettingsError(f"[tools] timeout must be {MIN_TOOL_TIMEOUT}-{MAX_TOOL_TIMEOUT} s")
    if tools.truncation < 1024:
        raise SettingsError("[tools] truncation must be at least 1024 characters")
    if tools.searxng_url is not None:
        tools = replace(tools, searxng_url=_searxng_url(tools.searxng_url, "[tools] searxng_url"))
    return tools


def _searxng_url(value: Any, key: str) -> str | None:
    """The SearxNG base URL without its trailing slash; empty means none."""
    if not isinstance(value, str):
        raise SettingsError(f"{key} must be a string")
    url = value.strip().rstrip("/")
    if not url:
        return None
    if not url.startswith(("http://", "https://")) or len(url.split("/")[2]) == 0:
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


def _models(section: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, ModelSettings]:
    models = {}
    for name, entry in section.items():
        provider = entry.get("provider")
        if provider not in ("openai", "anthropic"):
            raise SettingsError(f"[models.{name}] provider must be 'openai' or 'anthropic'")
        if not entry.get("model"):
            raise SettingsError(f"[models.{name}] needs a 'model'")
        models[name] = ModelSettings(
            name=name,
            provider=provider,
            model=entry["model"],
            base_url=entry.get("base_url") or _env_base_url(provider, env),
            api_key=_env_api_key(provider, env, entry.get("api_key_env")),
            capabilities=dict(entry.get("capabilities", {})),
            max_tokens=_max_tokens(entry.get("max_tokens"), f"[models.{name}] max_tokens"),
        )
    return models


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


def _env_base_url(provider: str, env: Mapping[str, str]) -> str | None:
    return env.get("OPENAI_BASE_URL" if provider == "openai" else "ANTHROPIC_BASE_URL") or None


def _env_api_key(provider: str, env: Mapping[str, str], named: str | None) -> str | None:
    name = named or ("OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY")
    return env.get(name) or None


def _int(value: Any, name: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise SettingsError(f"{name} must be a whole number, got {value!r}") from exc


def _float(value: Any) -> float:
    return float(value)


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
