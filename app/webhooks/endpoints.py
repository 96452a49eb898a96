"""A user's webhook endpoints: made (the URL screened by the SSRF guard, a secret shown once),
listed, rotated, removed. Another user's endpoint is not found."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete
from sqlmodel import col, select

from app.engine.life.turns import new_id
from app.errors import ConflictError, NotFoundError, UnprocessableError
from app.runtime import Runtime
from app.storage.models import WebhookDelivery, WebhookEndpoint
from app.tools.web.fetch import RefusedError
from app.tools.web.fetch.addresses import parse_literal
from app.tools.web.fetch.fetcher import system_resolver
from app.tools.web.fetch.guard import METADATA_NAMES, Target, parse_url, screen
from app.users import ownership
from app.users.principal import Principal
from app.webhooks import signing

EVENT_TYPES = (
    "run.succeeded",
    "run.failed",
    "run.cancelled",
    "approval.requested",
    "run.requires_action",
    "turn.completed",
)
OPT_IN = frozenset({"turn.completed"})  # every turn: sent only to endpoints that name it
MAX_ENDPOINTS_PER_OWNER = 20


def target(rt: Runtime, url: str) -> Target:
    """The URL's checked addresses; RefusedError when the guard refuses it (private addresses
    only when `[webhooks] allow_private_network` is on; cloud metadata never)."""
    return screen(parse_url(url), system_resolver, rt.settings.webhooks.allow_private_network)


def checked_at_creation(rt: Runtime, url: str) -> None:
    """What can be judged before any lookup: the URL's form, an address written in it, a
    metadata service's name. A host name is judged at each attempt, by what it resolves to then."""
    parsed = parse_url(url)
    host = parsed.raw_host.decode("ascii").lower()
    try:
        is_name = parse_literal(host) is None
    except ValueError:
        is_name = False  # looks like an address but is none: screen says so
    if not is_name or host.rstrip(".") in METADATA_NAMES:
        screen(parsed, system_resolver, rt.settings.webhooks.allow_private_network)


def create(
    rt: Runtime, who: Principal, url: str, events: list[str], description: str
) -> tuple[WebhookEndpoint, str]:
    try:
        checked_at_creation(rt, url)
    except RefusedError as exc:
        raise UnprocessableError(f"url: {str(exc).removeprefix('Refused: ')}", field="url") from None
    with rt.db.session() as s:
        held = s.exec(
            select(WebhookEndpoint.id).where(ownership.owned_clause(WebhookEndpoint.owner_id, who))
        ).all()
        if len(held) >= MAX_ENDPOINTS_PER_OWNER:
            raise ConflictError(f"at most {MAX_ENDPOINTS_PER_OWNER} endpoints each", field="url")
        secret = signing.new_secret()
        endpoint = WebhookEndpoint(
            id=new_id(), owner_id=who.user_id, url=url, secret=secret, events=events, description=description
        )
        s.add(endpoint)
    return endpoint, secret


def get(rt: Runtime, who: Principal, endpoint_id: str) -> WebhookEndpoint:
    """The caller's endpoint (an admin's: anyone's); NotFoundError else."""
    return ownership.owned_row(rt, who, WebhookEndpoint, endpoint_id, "webhook endpoint")


def listing(rt: Runtime, who: Principal) -> list[dict[str, Any]]:
    return [shown(e) for e in ownership.owned_rows(rt, who, WebhookEndpoint)]


def shown(endpoint: WebhookEndpoint) -> dict[str, Any]:
    """An endpoint as the API shows it: never its secret."""
    return {
        "endpoint_id": endpoint.id,
        "url": endpoint.url,
        "events": list(endpoint.events) or [e for e in EVENT_TYPES if e not in OPT_IN],
        "description": endpoint.description,
        "created_at": endpoint.created_at.isoformat(),
    }


def rotate(rt: Runtime, endpoint: WebhookEndpoint) -> str:
    """A new secret, in force for every attempt from now on (retries of older events included)."""
    secret = signing.new_secret()
    with rt.db.session() as s:
        row = s.get(WebhookEndpoint, endpoint.id, with_for_update=True)
        if row is None:
            raise NotFoundError(f"no webhook endpoint {endpoint.id}")
        row.secret = secret
        s.add(row)
    return secret


def remove(rt: Runtime, endpoint: WebhookEndpoint) -> None:
    """The endpoint and its delivery log; attempts under way find nothing to send."""
    with rt.db.session() as s:
        s.exec(delete(WebhookDelivery).where(col(WebhookDelivery.endpoint_id) == endpoint.id))
        s.exec(delete(WebhookEndpoint).where(col(WebhookEndpoint.id) == endpoint.id))
