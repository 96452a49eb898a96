"""The JSON job API under /v1/api: thin routes over app.engine."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify, request

from app.engine.conversation import stored
from app.engine.life import workstreams
from app.runtime import Runtime
from app.settings import MAX_NAME_CHARS
from app.users import ownership
from app.watches import actions as watch_actions
from app.web import after_response, commands
from app.web.access import principal
from app.web.openapi import OPENAPI
from app.web.requests import field, json_body, path_id

MAX_PATH_CHARS = 4096  # a path a person may give (Linux's PATH_MAX)

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
def create_workstream() -> Any:
    body = json_body()
    who = principal()
    ws = workstreams.create(
        _rt(),
        name=field(body, "name", str, max_chars=MAX_NAME_CHARS),
        model=field(body, "model", str),
        auto_approve=field(body, "auto_approve", bool, default=False),
        working_dir=field(body, "working_dir", str, max_chars=MAX_PATH_CHARS),
        tool_search=field(body, "tool_search", dict),
        owner_id=ownership.owner_for_new(who),
        skill=field(body, "skill", str, max_chars=MAX_NAME_CHARS),
        network=field(body, "network", str, max_chars=MAX_NAME_CHARS),
        is_admin=who.is_operator or who.is_admin,
    )
    return _reply(201, workstreams.summary(ws))


@api.get("/workstreams")
def list_workstreams() -> Any:
    return _reply(200, {"workstreams": workstreams.list_all(_rt(), ownership.visible_clause(principal()))})


@api.get("/workstreams/<ws_id>")
def get_workstream(ws_id: str) -> Any:
    return _reply(200, workstreams.describe(_rt(), ws_id))


@api.delete("/workstreams/<ws_id>")
def delete_workstream(ws_id: str) -> Any:
    return _reply(200, {"deleted": workstreams.delete(_rt(), ws_id)})


@api.post("/workstreams/<ws_id>/send")
def send(ws_id: str) -> Any:
    key = request.headers.get("Idempotency-Key")
    # Answered once the turn is stored; its first step and events go right after the 202.
    defer = after_response.deferrer()
    return _reply(*commands.send(_rt(), ws_id, json_body(), idempotency_key=key, defer=defer))


@api.post("/workstreams/<ws_id>/approve")
def approve(ws_id: str) -> Any:
    return _reply(*commands.approve(_rt(), ws_id, json_body(), by=principal(), via="http"))


@api.post("/workstreams/<ws_id>/cancel")
def cancel(ws_id: str) -> Any:
    return _reply(*commands.cancel_turn(_rt(), ws_id, json_body(), by=principal().name))


@api.get("/workstreams/<ws_id>/history")
def history(ws_id: str) -> Any:
    rt = _rt()
    workstreams.get(rt, ws_id)
    return _reply(200, stored.history(rt, ws_id))


@api.get("/workstreams/<ws_id>/watches")
def list_watches(ws_id: str) -> Any:
    return _reply(200, watch_actions.listing(_rt(), ws_id))


@api.delete("/workstreams/<ws_id>/watches/<watch_id>")
def cancel_watch(ws_id: str, watch_id: str) -> Any:
    return _reply(200, watch_actions.cancel(_rt(), ws_id, path_id("watch", watch_id)))


@api.get("/openapi.json")
def openapi() -> Any:
    return jsonify(OPENAPI)


@api.errorhandler(404)
def _not_found(_exc: Exception) -> Any:
    return _reply(404, {"error": "no such endpoint"})
