"""Schedules under /v1/api/schedules (docs/schedules.md): make one (cron or every, timezone,
prompt, workstream or a new one each time, policy), list, read (next fire times, last firings),
pause, resume, delete."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify

from app.errors import UnprocessableError
from app.runtime import Runtime
from app.schedules import store, timing
from app.users.scopes import Scope
from app.web import run_fields, shapes
from app.web.access import principal, require_scope
from app.web.contract import operation
from app.web.requests import path_id

schedules = Blueprint("schedules", __name__, url_prefix="/v1/api/schedules")


def _rt() -> Runtime:
    return current_app.extensions["runtime"]


@schedules.url_value_preprocessor
def _check_ids(_endpoint: str | None, values: dict[str, Any] | None) -> None:
    if values and "schedule_id" in values:
        path_id("schedule", values["schedule_id"])


@schedules.post("")
@operation(
    "Make a schedule: runs started on a cron or every N seconds (docs/schedules.md)",
    body=shapes.NewSchedule,
    answers={201: shapes.ScheduleView},
    errors={409: "The caller has as many schedules as one may", 404: "No such workstream"},
    examples={
        "weekday mornings": {"cron": "0 9 * * 1-5", "timezone": "Europe/Paris", "prompt": "Triage new issues"}
    },
)
def create_schedule(body: shapes.NewSchedule) -> Any:
    who = principal()
    rt = _rt()
    given = body.root
    cron = given.cron if isinstance(given, shapes.CronSchedule) else None
    every = given.every if isinstance(given, shapes.EverySchedule) else None
    timezone, prompt, ws_id = given.timezone or "UTC", given.prompt, given.workstream
    new_each_time = (
        given.new_workstream_each_time if given.new_workstream_each_time is not None else ws_id is None
    )
    policy = run_fields.policy(given.policy)
    timeout_s = given.timeout_s
    least = rt.settings.schedule_min_every_seconds
    if every is not None and every < least:
        raise UnprocessableError(f"every: at least {least} seconds here", field="every")
    if new_each_time == (ws_id is not None):
        message = "give workstream or new_workstream_each_time, not both"
        raise UnprocessableError(message, field="workstream")
    if policy.tools or policy.auto_approve:
        require_scope(who, Scope.APPROVE)
    try:
        timing.zone(timezone)
        if cron is not None:
            timing.check_cron(cron, timezone)
    except timing.TimingError as exc:
        raise UnprocessableError(str(exc), field=str(exc).split(":", 1)[0]) from None
    webhook_id = run_fields.webhook(rt, who, given.webhook)
    asked = store.Asked(cron, every, timezone, prompt, ws_id, policy, timeout_s, webhook_id)
    return jsonify(store.describe(rt, store.create(rt, who, asked))), 201


@schedules.get("")
@operation("The caller's schedules", answers={200: shapes.ScheduleList})
def list_schedules() -> Any:
    return jsonify({"schedules": store.listing(_rt(), principal())}), 200


@schedules.get("/<schedule_id>")
@operation("A schedule, with its next fire times and last firings", answers={200: shapes.ScheduleView})
def get_schedule(schedule_id: str) -> Any:
    rt = _rt()
    return jsonify(store.describe(rt, store.get(rt, principal(), schedule_id))), 200


@schedules.post("/<schedule_id>/pause")
@operation(
    "Pause: it fires no more", body=shapes.NoBody, answers={200: shapes.ScheduleView}, examples={"pause": {}}
)
def pause_schedule(schedule_id: str, body: shapes.NoBody) -> Any:
    return _set_paused(schedule_id, True)


@schedules.post("/<schedule_id>/resume")
@operation(
    "Resume, from its next time after now",
    body=shapes.NoBody,
    answers={200: shapes.ScheduleView},
    examples={"resume": {}},
)
def resume_schedule(schedule_id: str, body: shapes.NoBody) -> Any:
    return _set_paused(schedule_id, False)


def _set_paused(schedule_id: str, paused: bool) -> Any:
    rt = _rt()
    schedule = store.set_paused(rt, store.get(rt, principal(), schedule_id), paused)
    return jsonify(store.describe(rt, schedule)), 200


@schedules.delete("/<schedule_id>")
@operation("Delete a schedule", answers={200: shapes.MemoryDeleted})
def delete_schedule(schedule_id: str) -> Any:
    rt = _rt()
    store.remove(rt, store.get(rt, principal(), schedule_id))
    return jsonify({"deleted": schedule_id}), 200
