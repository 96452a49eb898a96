"""Runs under /v1/api/runs (docs/runs.md): start one, read it (or wait for it to need someone or
end), list them, cancel one. Thin routes over app/jobs."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, current_app, jsonify

from app.errors import ConflictError, UnprocessableError
from app.jobs import policing, status, store, tool_outputs
from app.runtime import Runtime
from app.users.scopes import Scope
from app.web import after_response, run_fields, shapes
from app.web.access import principal, require_scope
from app.web.contract import operation
from app.web.requests import path_id

MAX_WAIT_SECONDS = 60  # the longest `?wait=` holds a request
# Requests of one web process that may wait at once: each holds one of its threads; past this
# a wait answers at once with the run as it stands (the client asks again).
MAX_WAITERS = 16
_WAIT_POLL_FIRST, _WAIT_POLL_MOST = 0.05, 0.5  # seconds between looks, growing
_waiters = threading.BoundedSemaphore(MAX_WAITERS)

DEFAULT_LISTED = 50

runs = Blueprint("runs", __name__, url_prefix="/v1/api/runs")


def _rt() -> Runtime:
    return current_app.extensions["runtime"]


@runs.url_value_preprocessor
def _check_ids(_endpoint: str | None, values: dict[str, Any] | None) -> None:
    if values and "run_id" in values:
        path_id("run", values["run_id"])


@runs.post("")
@operation(
    "Start a run: a turn with a contract (docs/runs.md)",
    body=shapes.NewRun,
    answers={202: shapes.RunStarted},
    errors={403: "A policy that approves needs the approve scope", 404: "No such workstream"},
    examples={
        "read-only": {"prompt": "summarise README.md", "policy": {"tools": ["read_file"]}, "timeout_s": 300}
    },
)
def create_run(body: shapes.NewRun) -> Any:
    who = principal()
    asked = store.Asked(
        prompt=body.prompt,
        ws_id=body.workstream,
        model=body.model,
        policy=run_fields.policy(body.policy),
        timeout_s=body.timeout_s,
        metadata=run_fields.metadata(body.metadata),
        tools=run_fields.tools(_rt(), body.tools),
        webhook_id=run_fields.webhook(_rt(), who, body.webhook),
    )
    if asked.policy.tools or asked.policy.auto_approve:
        require_scope(who, Scope.APPROVE)  # a policy that approves decides as a person would
    run, sent = store.create(_rt(), who, asked, defer=after_response.deferrer())
    first = status.RunStatus.RUNNING if sent.status == "active" else status.RunStatus.QUEUED
    return jsonify({"run_id": run.id, "ws_id": run.ws_id, "turn_id": run.turn_id, "status": first}), 202


@runs.get("")
@operation(
    "The caller's runs (an admin's: all), newest first", query=shapes.RunFilter, answers={200: shapes.RunList}
)
def list_runs(query: shapes.RunFilter) -> Any:
    state = status.RunStatus(query.status) if query.status else None
    since = _since_arg(query.since)
    limit = query.limit or DEFAULT_LISTED
    return jsonify({"runs": store.listing(_rt(), principal(), state, since, limit)}), 200


@runs.get("/<run_id>")
@operation(
    "A run: status, answer, calls, usage, times; ?wait= holds until it ends or needs someone",
    query=shapes.RunWait,
    answers={200: shapes.RunView},
)
def get_run(run_id: str, query: shapes.RunWait) -> Any:
    wait = query.wait or 0
    rt = _rt()
    if wait:
        _wait(rt, run_id, wait)
    return jsonify(store.describe(rt, run_id)), 200


@runs.post("/<run_id>/cancel")
@operation(
    "Cancel a run",
    body=shapes.NoBody,
    answers={202: shapes.RunView},
    errors={409: "The run has ended"},
    examples={"cancel": {}},
)
def cancel_run(run_id: str, body: shapes.NoBody) -> Any:
    rt = _rt()
    run = store.get(rt, run_id)
    if not policing.stop(rt, run, by=principal().name):
        raise ConflictError(f"run {run_id} has ended", status=store.current(rt, run))
    return jsonify(store.describe(rt, run_id)), 202


@runs.post("/<run_id>/tool_outputs")
@run_fields.submitting("the run's")
def submit_run_tool_outputs(run_id: str, body: shapes.ToolOutputs) -> Any:
    rt = _rt()
    run = store.get(rt, run_id)
    with rt.db.reader() as s:
        turn = status.turn_of(s, run)
    return jsonify(
        {"call_ids": tool_outputs.submit(rt, turn.id if turn else None, run_fields.outputs(body))}
    ), 200


def _wait(rt: Runtime, run_id: str, seconds: int) -> None:
    """Until the run ends or needs someone, or `seconds` pass (at once when too many wait)."""
    if not _waiters.acquire(blocking=False):
        return
    try:
        run = store.get(rt, run_id)
        until, pause = time.monotonic() + seconds, _WAIT_POLL_FIRST
        while store.current(rt, run) in (status.RunStatus.QUEUED, status.RunStatus.RUNNING):
            left = until - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(pause, left))
            pause = min(pause * 2, _WAIT_POLL_MOST)
            if run.turn_id is None:
                run = store.get(rt, run_id)
    finally:
        _waiters.release()


def _since_arg(raw: str | None) -> datetime | None:
    if raw is None or raw == "":
        return None
    try:
        moment = datetime.fromisoformat(raw[:64].replace("Z", "+00:00"))
    except ValueError:
        message = "since: expected an ISO 8601 time (2026-12-06T00:00:00Z)"
        raise UnprocessableError(message, field="since") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
