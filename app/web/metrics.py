"""GET /metrics: the Prometheus text format, for an admin's token or the metrics token."""

from __future__ import annotations

import hmac
from typing import Any

from flask import Blueprint, Response, current_app

from app.errors import ServiceError
from app.metrics import exposition
from app.runtime import Runtime
from app.users.scopes import Scope
from app.web import access
from app.web.contract import operation

metrics = Blueprint("metrics", __name__)

# The figures span every user's workstreams: an admin's, or a scraper's own token's.
SCRAPE_RULE = access.Rule(Scope.ADMIN)


@metrics.get("/metrics")
@operation(
    "The Prometheus text format (docs/metrics.md): an admin's token or TURNSTONE_METRICS_TOKEN",
    answers={200: "the metrics"},
    content=exposition.CONTENT_TYPE,
)
def scrape() -> Any:
    rt: Runtime = current_app.extensions["runtime"]
    if not _is_metrics_token(rt, access.presented_token()):
        try:
            access.authorize(rt, SCRAPE_RULE, {})
        except ServiceError as exc:
            return access.refusal(exc)  # 401 or 403, as for any API call
    return Response(exposition.render(rt), mimetype=None, content_type=exposition.CONTENT_TYPE)


def _is_metrics_token(rt: Runtime, raw: str | None) -> bool:
    configured = rt.settings.metrics_token
    return bool(configured and raw) and hmac.compare_digest(
        (raw or "").encode(errors="replace"), (configured or "").encode()
    )
