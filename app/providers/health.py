"""Model backends' health: a probe asks each chat model's server for its model list (`GET
/models`, through the model's own SDK, key and base URL), on beat's schedule
(`model_health_seconds`) and when an admin asks (`POST /v1/api/models/check`). A step's own
failure marks nothing: one broken stream is what retries and fallbacks are for, and the next
step starts at the head of its chain again. The state is kept in Redis for every process to
read (a signal, rebuilt by the next probe, never something a person relies on):

- `GET /v1/api/models` shows each model's `health` (`ok` or `degraded`, why, when checked);
- a step whose model is degraded and has a fallback that is not goes to that fallback first
  (a `model_fallback` event says so), instead of waiting out the degraded server's time-outs
  on every step; with no such fallback the model is tried as usual (docs/providers.md#health).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import redis

from app.providers.base import api_key_for, cached_client
from app.redis_keys import PREFIX
from app.settings import ModelSettings, Settings

log = logging.getLogger(__name__)

OK = "ok"
DEGRADED = "degraded"
PROBE_TIMEOUT_SECONDS = 10.0
PROBES_AT_ONCE = 8
KEY = PREFIX + ":model-health:{name}"
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}


@dataclass(frozen=True)
class Health:
    state: str  # OK or DEGRADED
    reason: str | None
    checked_at: float  # Unix seconds

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def probe(model: ModelSettings, timeout_seconds: float = PROBE_TIMEOUT_SECONDS) -> Health:
    """Ask the model's server for its model list: OK when it answers, else DEGRADED and why."""
    now = time.time()
    if not model.api_key and not model.base_url:
        return Health(DEGRADED, "no API key is configured", now)
    # The SDKs are imported here: a web process that never probes never loads them.
    import anthropic
    import openai

    base_url = model.base_url or DEFAULT_BASE_URLS[model.provider]
    sdk: Any = openai.OpenAI if model.provider == "openai" else anthropic.Anthropic
    try:
        cached_client(sdk, api_key_for(model), base_url, timeout_seconds).models.list()
    except (openai.APIStatusError, anthropic.APIStatusError) as exc:
        return Health(DEGRADED, f"the server answered {exc.status_code}", now)
    except (openai.APIError, anthropic.APIError) as exc:  # timed out, refused, unreachable
        return Health(DEGRADED, _why(exc), now)
    except Exception as exc:  # noqa: BLE001 - a transport's own error: a probe never fails the pass
        return Health(DEGRADED, _why(exc), now)
    return Health(OK, None, now)


def _why(exc: BaseException) -> str:
    if "timed out" in str(exc).lower() or "timeout" in type(exc).__name__.lower():
        return "it did not answer in time"
    cause = exc.__cause__ or exc.__context__
    return f"it cannot be reached ({cause or exc})"[:300]


def check_all(client: redis.Redis, settings: Settings) -> dict[str, Health]:
    """Probe every configured chat model (a few at once) and record what each showed."""
    models = [m for m in settings.models.values() if m.is_chat_model]
    with ThreadPoolExecutor(max_workers=PROBES_AT_ONCE) as pool:
        found = dict(zip([m.name for m in models], pool.map(probe, models), strict=True))
    ttl = _ttl(settings)
    with client.pipeline(transaction=False) as pipe:
        for name, health in found.items():
            pipe.set(KEY.format(name=name), json.dumps(health.as_dict()), ex=ttl)
        pipe.execute()
    return found


def read(client: redis.Redis, names: Iterable[str]) -> dict[str, Health]:
    """The recorded health of these models (one missing: never checked, or long ago)."""
    wanted = list(names)
    if not wanted:
        return {}
    try:
        values = client.mget([KEY.format(name=n) for n in wanted])
    except redis.RedisError:
        return {}
    found = {}
    for name, value in zip(wanted, values, strict=True):
        try:
            data = json.loads(value) if value else None
            if isinstance(data, dict):
                found[name] = Health(**data)
        except (ValueError, TypeError):
            continue
    return found


def healthy_first(
    client: redis.Redis, model: ModelSettings, fallbacks: Sequence[ModelSettings]
) -> tuple[ModelSettings, list[ModelSettings], Health | None]:
    """The chain with `model` moved after its fallbacks when it is degraded and one of them is
    not (the first such takes its place); the degraded model's health when it was moved."""
    if not fallbacks:
        return model, list(fallbacks), None
    health = read(client, [model.name, *(f.name for f in fallbacks)])
    own = health.get(model.name)
    if own is None or own.state != DEGRADED:
        return model, list(fallbacks), None
    well = [f for f in fallbacks if (h := health.get(f.name)) is None or h.state != DEGRADED]
    if not well:
        return model, list(fallbacks), None
    rest = [f for f in fallbacks if f not in well]
    return well[0], [*well[1:], *rest, model], own


def _ttl(settings: Settings) -> int:
    """A state outlives three probes (or an hour without them), then counts as unknown."""
    every = settings.model_health_seconds
    return int(3 * every) if every > 0 else 3600
