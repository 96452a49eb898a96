"""Branching under /v1/api/workstreams/{id}: fork, rewind, the branches a rewind keeps, edit and
retry (app/engine/life/branches.py)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify, request

from app.engine.life import branches as branching
from app.engine.life import workstreams
from app.errors import BadRequestError, NotFoundError
from app.runtime import Runtime
from app.settings import MAX_NAME_CHARS
from app.web import after_response
from app.web.access import principal
from app.web.commands import checked_idempotency_key
from app.web.requests import field, json_body, path_id

branches = Blueprint("branches", __name__, url_prefix="/v1/api/workstreams/<ws_id>")

MAX_MESSAGE_ID = 2**31 - 1  # the id column's range: a larger number names no message


def _rt() -> Runtime:
    return current_app.extensions["runtime"]


@branches.url_value_preprocessor
def _check_ids(_endpoint: str | None, values: dict[str, Any] | None) -> None:
    if values and "ws_id" in values:
        path_id("workstream", values["ws_id"])
    if values and "branch_id" in values:
        path_id("branch", values["branch_id"])


def _message_id(body: dict[str, Any], name: str, required: bool) -> int | None:
    value = field(body, name, int, required=required)
    if value is not None and not 0 <= value <= MAX_MESSAGE_ID:
        raise BadRequestError(f"{name}: expected a message id (0 to {MAX_MESSAGE_ID})", field=name)
    return value


def _key(body: dict[str, Any]) -> str | None:
    header = request.headers.get("Idempotency-Key")
    return checked_idempotency_key(header if header is not None else field(body, "idempotency_key", str))


@branches.post("/fork")
def fork(ws_id: str) -> Any:
    body = json_body()
    ws = branching.fork(
        _rt(),
        ws_id,
        at=_message_id(body, "at", required=False),
        name=field(body, "name", str, max_chars=MAX_NAME_CHARS),
        copy_folder=field(body, "copy_folder", bool, default=False),
    )
    return jsonify(workstreams.summary(ws)), 201


@branches.post("/rewind")
def rewind(ws_id: str) -> Any:
    body = json_body()
    to = _message_id(body, "to", required=True)
    assert to is not None
    return jsonify(branching.rewind(_rt(), ws_id, to, by=principal().name)), 200


@branches.get("/branches")
def list_branches(ws_id: str) -> Any:
    return jsonify(branching.listing(_rt(), ws_id)), 200


@branches.get("/branches/<branch_id>")
def get_branch(ws_id: str, branch_id: str) -> Any:
    return jsonify(branching.describe(_rt(), ws_id, branch_id)), 200


@branches.post("/branches/<branch_id>/restore")
def restore(ws_id: str, branch_id: str) -> Any:
    return jsonify(branching.restore(_rt(), ws_id, branch_id, by=principal().name)), 200


@branches.post("/messages/<message_id>/edit")
def edit(ws_id: str, message_id: str) -> Any:
    if not message_id.isdecimal() or not message_id.isascii() or int(message_id) > MAX_MESSAGE_ID:
        raise NotFoundError(f"no message {message_id[:20]!r}")
    body = json_body()
    message = field(body, "message", str, required=True)
    if not message.strip():
        raise BadRequestError("message: must not be empty", field="message")
    sent = branching.edit(
        _rt(),
        ws_id,
        int(message_id),
        message,
        by=principal().name,
        idempotency_key=_key(body),
        defer=after_response.deferrer(),
    )
    return jsonify({"turn_id": sent.id, "status": sent.status}), 202


@branches.post("/retry")
def retry(ws_id: str) -> Any:
    body = json_body()  # an empty body is {}
    sent = branching.retry(
        _rt(), ws_id, by=principal().name, idempotency_key=_key(body), defer=after_response.deferrer()
    )
    return jsonify({"turn_id": sent.id, "status": sent.status}), 202
