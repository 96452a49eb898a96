"""Webhook endpoints under /v1/api/webhooks (docs/webhooks.md): register one (its secret shown
once), list, read, remove, rotate its secret, read its delivery log, deliver one again."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify

from app.errors import NotFoundError
from app.runtime import Runtime
from app.web import shapes
from app.web.access import principal
from app.web.contract import operation
from app.web.requests import path_id
from app.webhooks import deliveries, endpoints

webhooks = Blueprint("webhooks", __name__, url_prefix="/v1/api/webhooks")

DEFAULT_LISTED = 50
MAX_DELIVERY_ID_CHARS = 40  # msg_ and 32 hex digits fit; the column's width


def _rt() -> Runtime:
    return current_app.extensions["runtime"]


@webhooks.url_value_preprocessor
def _check_ids(_endpoint: str | None, values: dict[str, Any] | None) -> None:
    if values and "endpoint_id" in values:
        path_id("webhook endpoint", values["endpoint_id"])
    if values and "delivery_id" in values:
        delivery_id = values["delivery_id"]
        if len(delivery_id) > MAX_DELIVERY_ID_CHARS or "\x00" in delivery_id or not delivery_id.isascii():
            raise NotFoundError(f"no delivery {delivery_id[:MAX_DELIVERY_ID_CHARS]!r}")


@webhooks.post("")
@operation(
    "Register a webhook endpoint (its secret is shown once)",
    body=shapes.NewWebhook,
    answers={201: shapes.NewWebhookSecret},
    errors={409: "The caller has as many endpoints as one may"},
    examples={"runs ending": {"url": "https://ci.example.com/hooks/agent", "events": ["run.succeeded"]}},
)
def create_endpoint(body: shapes.NewWebhook) -> Any:
    url, events, description = body.url, body.events or [], body.description or ""
    endpoint, secret = endpoints.create(_rt(), principal(), url, list(dict.fromkeys(events)), description)
    return jsonify({**endpoints.shown(endpoint), "secret": secret}), 201


@webhooks.get("")
@operation("The caller's webhook endpoints", answers={200: shapes.WebhookList})
def list_endpoints() -> Any:
    return jsonify({"endpoints": endpoints.listing(_rt(), principal())}), 200


@webhooks.get("/<endpoint_id>")
@operation("One webhook endpoint", answers={200: shapes.Webhook})
def get_endpoint(endpoint_id: str) -> Any:
    return jsonify(endpoints.shown(endpoints.get(_rt(), principal(), endpoint_id))), 200


@webhooks.delete("/<endpoint_id>")
@operation("Remove a webhook endpoint", answers={200: shapes.MemoryDeleted})
def delete_endpoint(endpoint_id: str) -> Any:
    rt = _rt()
    endpoints.remove(rt, endpoints.get(rt, principal(), endpoint_id))
    return jsonify({"deleted": endpoint_id}), 200


@webhooks.post("/<endpoint_id>/rotate")
@operation(
    "A new secret, in force from now on (shown once)",
    body=shapes.NoBody,
    answers={200: shapes.Rotated},
    examples={"rotate": {}},
)
def rotate_secret(endpoint_id: str, body: shapes.NoBody) -> Any:
    rt = _rt()
    secret = endpoints.rotate(rt, endpoints.get(rt, principal(), endpoint_id))
    return jsonify({"endpoint_id": endpoint_id, "secret": secret}), 200


@webhooks.get("/<endpoint_id>/deliveries")
@operation(
    "The endpoint's delivery log, newest first", query=shapes.DeliveryLimit, answers={200: shapes.Deliveries}
)
def list_deliveries(endpoint_id: str, query: shapes.DeliveryLimit) -> Any:
    limit = query.limit or DEFAULT_LISTED
    rt = _rt()
    endpoints.get(rt, principal(), endpoint_id)
    return jsonify({"deliveries": deliveries.log_of(rt, endpoint_id, limit)}), 200


@webhooks.post("/<endpoint_id>/deliveries/<delivery_id>/redeliver")
@operation(
    "Send a delivery again (a new attempt of the same message)",
    body=shapes.NoBody,
    answers={202: shapes.Redelivered},
    examples={"again": {}},
)
def redeliver(endpoint_id: str, delivery_id: str, body: shapes.NoBody) -> Any:
    rt = _rt()
    endpoints.get(rt, principal(), endpoint_id)
    return jsonify(deliveries.redeliver(rt, endpoint_id, delivery_id)), 202
