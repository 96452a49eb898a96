"""Branching under /v1/api/workstreams/{id}: fork, rewind, the branches a rewind keeps, edit and
retry (app/engine/life/branches.py)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify, request

from app.engine.life import branches as branching
from app.engine.life import workstreams
from app.errors import NotFoundError
from app.runtime import Runtime
from app.web import after_response, shapes
from app.web.access import principal
from app.web.api import IDEMPOTENCY_KEY
from app.web.commands import checked_idempotency_key
from app.web.contract import operation
from app.web.requests import path_id
from app.web.shapes import MAX_MESSAGE_ID

branches = Blueprint("branches", __name__, url_prefix="/v1/api/workstreams/<ws_id>")


def _rt() -> Runtime:
    return current_app.extensions["runtime"]


@branches.url_value_preprocessor
def _check_ids(_endpoint: str | None, values: dict[str, Any] | None) -> None:
    if values and "ws_id" in values:
        path_id("workstream", values["ws_id"])
    if values and "branch_id" in values:
        path_id("branch", values["branch_id"])


def _key(body: shapes.Edit | shapes.Retry) -> str | None:
    header = request.headers.get("Idempotency-Key")
    return checked_idempotency_key(header if header is not None else body.idempotency_key)


# Only an interactive workstream branches (branching._idle): a sub-agent's or a coordinator's
# refusal is a 422, the request being well formed.
_NOT_INTERACTIVE = "The workstream is not an interactive one: only those branch"
_BUSY = {409: "A turn is running or queued: cancel it first", 422: _NOT_INTERACTIVE}


@branches.post("/fork")
@operation(
    "Fork: a new workstream with this one's conversation up to a message (default: all of it)",
    body=shapes.Fork,
    answers={201: shapes.Workstream},
    examples={"all of it": {}, "up to a message, with the folder": {"at": 12, "copy_folder": True}},
    errors={409: "The workstream is busy, or the message is not a point to fork at", 422: _NOT_INTERACTIVE},
)
def fork(ws_id: str, body: shapes.Fork) -> Any:
    ws = branching.fork(_rt(), ws_id, at=body.at, name=body.name, copy_folder=bool(body.copy_folder))
    return jsonify(workstreams.summary(ws)), 201


@branches.post("/rewind")
@operation(
    "Rewind to a message: the messages after it go into a branch, kept",
    body=shapes.Rewind,
    answers={200: shapes.BranchChange},
    examples={"to a turn's end": {"to": 12}},
    errors=_BUSY,
)
def rewind(ws_id: str, body: shapes.Rewind) -> Any:
    return jsonify(branching.rewind(_rt(), ws_id, body.to, by=principal().name)), 200


@branches.get("/branches")
@operation("The branches rewinds, edits and retries kept", answers={200: shapes.BranchList})
def list_branches(ws_id: str) -> Any:
    return jsonify(branching.listing(_rt(), ws_id)), 200


@branches.get("/branches/<branch_id>")
@operation("A branch with its messages", answers={200: shapes.BranchMessages})
def get_branch(ws_id: str, branch_id: str) -> Any:
    return jsonify(branching.describe(_rt(), ws_id, branch_id)), 200


@branches.post("/branches/<branch_id>/restore")
@operation(
    "Restore a branch: what follows its point now goes into a branch, and the branch comes back",
    answers={200: shapes.BranchChange},
    errors=_BUSY,
)
def restore(ws_id: str, branch_id: str) -> Any:
    return jsonify(branching.restore(_rt(), ws_id, branch_id, by=principal().name)), 200


@branches.post("/messages/<int:message_id>/edit")
@operation(
    "Edit a user message: what followed it goes into a branch and the new text starts a turn",
    body=shapes.Edit,
    answers={202: shapes.Sent},
    examples={"new text": {"message": "list only the Python files"}},
    headers=(IDEMPOTENCY_KEY,),
    errors={409: "The workstream is busy, or the message is not a user's", 422: _NOT_INTERACTIVE},
)
def edit(ws_id: str, message_id: int, body: shapes.Edit) -> Any:
    if message_id > MAX_MESSAGE_ID:
        raise NotFoundError(f"no message {message_id}")
    sent = branching.edit(
        _rt(),
        ws_id,
        message_id,
        body.message,
        by=principal().name,
        idempotency_key=_key(body),
        defer=after_response.deferrer(),
    )
    return jsonify({"turn_id": sent.id, "status": sent.status}), 202


@branches.post("/retry")
@operation(
    "Retry the last turn: its answer goes into a branch and its message is sent again",
    body=shapes.Retry,
    answers={202: shapes.Sent},
    examples={"again": {}},
    headers=(IDEMPOTENCY_KEY,),
    errors={409: "The workstream is busy, or has no turn to retry", 422: _NOT_INTERACTIVE},
)
def retry(ws_id: str, body: shapes.Retry) -> Any:
    sent = branching.retry(
        _rt(), ws_id, by=principal().name, idempotency_key=_key(body), defer=after_response.deferrer()
    )
    return jsonify({"turn_id": sent.id, "status": sent.status}), 202
