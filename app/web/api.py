"""The JSON job API under /v1/api: thin routes over app.engine."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, g, jsonify, request

from app.engine import conversation, workstreams
from app.runtime import Runtime
from app.settings import MAX_NAME_CHARS
from app.web import commands
from app.web.auth import require_token
from app.web.openapi import OPENAPI
from app.web.requests import field, json_body, path_id

api = Blueprint("api", __name__, url_prefix="/v1/api")


def _rt() -> Runtime:
    return current_app.extensions["runtime"]


def _reply(status: int, body: dict[str, Any]) -> Any:
    return jsonify(body), status


@api.url_value_preprocessor
def _check_ws_id(_endpoint: str | None, values: dict[str, Any] | None) -> None:
    """An id no workstream can have (a NUL from `%00`, say) is a 404 before any query sees it."""
    if values and "ws_id" in values:
        path_id("workstream", values["ws_id"])


@api.post("/workstreams")
@require_token
def create_workstream() -> Any:
    body = json_body()
    ws = workstreams.create(
        _rt(),
        name=field(body, "name", str, max_chars=MAX_NAME_CHARS),
        model=field(body, "model", str),
        auto_approve=field(body, "auto_approve", bool, default=False),
        working_dir=field(body, "working_dir", str),
        skill=field(body, "skill", str, max_chars=MAX_NAME_CHARS),
    )
    return _reply(201, workstreams.summary(ws))


@api.get("/workstreams")
@require_token
def list_workstreams() -> Any:
    return _reply(200, {"workstreams": workstreams.list_all(_rt())})


@api.get("/workstreams/<ws_id>")
@require_token
def get_workstream(ws_id: str) -> Any:
    return _reply(200, workstreams.describe(_rt(), ws_id))


@api.post("/workstreams/<ws_id>/send")
@require_token
def send(ws_id: str) -> Any:
    key = request.headers.get("Idempotency-Key")
    return _reply(*commands.send(_rt(), ws_id, json_body(), idempotency_key=key))


@api.post("/workstreams/<ws_id>/approve")
@require_token
def approve(ws_id: str) -> Any:
    return _reply(*commands.approve(_rt(), ws_id, json_body(), by=g.token_name))


@api.post("/workstreams/<ws_id>/cancel")
@require_token
def cancel(ws_id: str) -> Any:
    return _reply(*commands.cancel_turn(_rt(), ws_id, json_body(), by=g.token_name))


@api.get("/workstreams/<ws_id>/history")
@require_token
def history(ws_id: str) -> Any:
    rt = _rt()
    workstreams.get(rt, ws_id)
    return _reply(200, conversation.history(rt, ws_id))


@api.get("/openapi.json")
def openapi() -> Any:
    return jsonify(OPENAPI)


@api.errorhandler(404)
def _not_found(_exc: Exception) -> Any:
    return _reply(404, {"error": "no such endpoint"})
