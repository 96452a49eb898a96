"""The notify tool's side of the gateway: pick a healthy one, sign a JWT, post; try again twice.

Connection failures, timeouts and 5xx answers are tried again after 1 s and 3 s (each attempt
picks a gateway afresh); a 4xx answer is final (the request itself is wrong).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.gateway import registry, tokens
from app.gateway.request import NotifyRequest
from app.settings import GATEWAY_KIND, NOTIFY_CONNECT_TIMEOUT_SECONDS, NotifySettings
from app.storage.database import Database

NOTIFY_TIMEOUT_SECONDS = 30.0  # one attempt, the gateway's deliveries included

if TYPE_CHECKING:
    import httpx

Post = Callable[..., "httpx.Response"]


@dataclass
class Outcome:
    ok: bool
    attempts: int
    delivered: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # "channel: reason", for a partial success
    reason: str = ""  # why it failed in the end


def longest_send(settings: NotifySettings) -> float:
    """How long `send` may take: every attempt at its time limits, and the pauses between them."""
    attempts = len(settings.retry_delays) + 1
    return attempts * (NOTIFY_CONNECT_TIMEOUT_SECONDS + NOTIFY_TIMEOUT_SECONDS) + sum(settings.retry_delays)


class _Final(Exception):
    """A failure that another attempt cannot mend."""


def send(
    db: Database,
    settings: NotifySettings,
    wanted: NotifyRequest,
    sleep: Callable[[float], None] = time.sleep,
    post: Post | None = None,  # httpx.post
    is_cancelled: Callable[[], bool] = lambda: False,
) -> Outcome:
    import httpx  # on first use: see app/tools/web/fetch/__init__

    post = post or httpx.post
    reason = ""
    attempts = 0
    for delay in (*settings.retry_delays, None):
        attempts += 1
        try:
            return _attempt(db, settings, wanted, post, attempts)
        except _Final as exc:
            return Outcome(False, attempts, reason=str(exc))
        except _Transient as exc:
            reason = str(exc)
        if delay is None or is_cancelled():
            break
        sleep(delay)
    return Outcome(False, attempts, reason=reason)


class _Transient(Exception):
    """A failure another attempt may get past: no gateway, a connection, a 5xx."""


def _attempt(db: Database, settings: NotifySettings, wanted: NotifyRequest, post: Post, n: int) -> Outcome:
    urls = registry.healthy_urls(db, GATEWAY_KIND, settings.stale_seconds)
    if not urls:
        raise _Transient("no healthy channel gateway (is the `gateway` process running?)")
    import httpx

    token = tokens.sign(tokens.service_secret(db, settings))
    timeout = httpx.Timeout(NOTIFY_TIMEOUT_SECONDS, connect=NOTIFY_CONNECT_TIMEOUT_SECONDS)
    try:
        response = post(
            urls[0] + "/v1/api/notify",
            json=wanted.as_body(),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
        )
    except httpx.TimeoutException:
        raise _Transient("the channel gateway did not answer in time") from None
    except httpx.HTTPError as exc:
        raise _Transient(f"the channel gateway could not be reached ({type(exc).__name__})") from None
    body = _json(response)
    failed = [
        str(f.get("error")) for f in body.get("failed", []) if isinstance(f, dict)
    ]  # each names its channel
    if response.status_code == 200:
        return Outcome(True, n, [str(d) for d in body.get("delivered", [])], failed)
    detail = "; ".join(failed) or str(body.get("error", ""))[:500]
    if response.status_code >= 500:
        raise _Transient(f"the channel gateway answered {response.status_code}: {detail}")
    raise _Final(f"the channel gateway refused it ({response.status_code}): {detail}")


def _json(response: httpx.Response) -> dict:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
