"""The JSON job API under /v1/api: thin routes over app.engine."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify, request

from app.coordination import children, tasklist
from app.engine.conversation import stored
from app.engine.life import changes, workstreams
from app.providers import catalog, health
from app.runtime import Runtime
from app.tools.commands import background
from app.tools.core.tool import INTERACTIVE
from app.users import ownership
from app.watches import actions as watch_actions
from app.web import after_response, commands, shapes
from app.web.access import principal
from app.web.contract import Header, Link, operation
from app.web.requests import path_id

api = Blueprint("api", __name__, url_prefix="/v1/api")

IDEMPOTENCY_KEY = Header(
    "Idempotency-Key",
    "1-200 printable ASCII characters. A request repeated with the same key (a retry after a lost "
    "answer) stores nothing new and answers the first one's turn_id.",
    {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[\\x20-\\x7e]+$"},
)
BUSY = "A turn is running or queued: cancel it first"


def _rt() -> Runtime:
    return current_app.extensions["runtime"]


def _reply(status: int, body: dict[str, Any]) -> Any:
    return jsonify(body), status


@api.url_value_preprocessor
def _check_ws_id(_endpoint: str | None, values: dict[str, Any] | None) -> None:
    """An id no workstream can have (a NUL from `%00`, say) is a 404 before any query sees it."""
    if values and "ws_id" in values:
        path_id("workstream", values["ws_id"])


_TO_WORKSTREAM = {"ws_id": "$response.body#/ws_id"}


@api.post("/workstreams")
@operation(
    "Create a workstream",
    body=shapes.NewWorkstream,
    answers={201: shapes.Workstream},
    errors={403: "working_dir or network host asked for by someone who is not an administrator"},
    examples={"named": {"name": "release notes"}, "empty": {}},
    links={
        "get_workstream": Link("get_workstream", _TO_WORKSTREAM),
        "send": Link("send", _TO_WORKSTREAM),
        "history": Link("history", _TO_WORKSTREAM),
        "approve": Link("approve", _TO_WORKSTREAM),
        "cancel": Link("cancel", _TO_WORKSTREAM),
    },
)
def create_workstream(body: shapes.NewWorkstream) -> Any:
    who = principal()
    ws = workstreams.create(
        _rt(),
        name=body.name,
        model=body.model,
        auto_approve=bool(body.auto_approve),
        smart_approve=bool(body.smart_approve),
        notify_approvals=bool(body.notify_approvals),
        working_dir=body.working_dir,
        tool_search=body.tool_search.given() if body.tool_search is not None else None,
        owner_id=ownership.owner_for_new(who),
        skill=body.skill,
        network=body.network,
        is_admin=who.is_operator or who.is_admin,
        kind=body.kind or INTERACTIVE,
    )
    return _reply(201, workstreams.summary(ws))


@api.get("/workstreams")
@operation("List the workstreams the caller may see", answers={200: shapes.WorkstreamList})
def list_workstreams() -> Any:
    return _reply(200, {"workstreams": workstreams.list_all(_rt(), ownership.visible_clause(principal()))})


@api.get("/workstreams/<ws_id>")
@operation("A workstream with its state and pending approvals", answers={200: shapes.WorkstreamNow})
def get_workstream(ws_id: str) -> Any:
    return _reply(200, workstreams.describe(_rt(), ws_id))


@api.patch("/workstreams/<ws_id>")
@operation(
    "Change its name, model, auto_approve, smart_approve, pinned or archived; the workstream as it is now",
    body=shapes.WorkstreamChange,
    answers={200: shapes.Workstream},
    errors={409: "model or auto_approve while a turn runs or is queued: nothing was changed"},
    examples={"rename": {"name": "release notes"}, "next turns on another model": {"model": "claude"}},
)
def change_workstream(ws_id: str, body: shapes.WorkstreamChange) -> Any:
    return _reply(200, changes.change(_rt(), ws_id, body.given()))


@api.get("/models")
@operation(
    "The configured models, what each can do, how each server is doing, and the default",
    answers={200: shapes.ModelList},
)
def list_models() -> Any:
    rt = _rt()
    return _reply(200, catalog.listing(rt.settings, health.read(rt.redis, rt.settings.models)))


@api.post("/models/check")
@operation(
    "Probe every chat model's server now (admins); the models with what each showed",
    answers={200: shapes.ModelList},
)
def check_models() -> Any:
    rt = _rt()
    return _reply(200, catalog.listing(rt.settings, health.check_all(rt.redis, rt.settings)))


@api.delete("/workstreams/<ws_id>")
@operation(
    "Delete a workstream at rest, with its sub-agents, conversation, previews, attachments and events",
    answers={200: shapes.Deleted},
    errors={409: BUSY},
)
def delete_workstream(ws_id: str) -> Any:
    return _reply(200, {"deleted": workstreams.delete(_rt(), ws_id)})


@api.post("/workstreams/<ws_id>/send")
@operation(
    "Send a message: opens a turn, or queues it behind the active one",
    body=shapes.Send,
    answers={202: shapes.Sent},
    headers=(IDEMPOTENCY_KEY,),
    examples={"message": {"message": "list the files here"}},
    links={"cancel": Link("cancel", {"ws_id": "$request.path.ws_id"})},
)
def send(ws_id: str, body: shapes.Send) -> Any:
    key = request.headers.get("Idempotency-Key")
    # Answered once the turn is stored; its first step and events go right after the 202.
    defer = after_response.deferrer()
    return _reply(*commands.send(_rt(), ws_id, body, idempotency_key=key, defer=defer))


@api.post("/workstreams/<ws_id>/approve")
@operation(
    "Approve or deny one pending call (call_id) or all of them",
    body=shapes.Approve,
    answers={200: shapes.Decided},
    errors={409: "Not pending, or decided otherwise; `pending` names the calls still pending"},
    examples={
        "approve all": {"approved": True},
        "deny one": {"approved": False, "call_id": "call_1", "feedback": "not that folder"},
        "approve one as edited": {"approved": True, "call_id": "call_1", "arguments": {"command": "ls -la"}},
    },
)
def approve(ws_id: str, body: shapes.Approve) -> Any:
    return _reply(*commands.approve(_rt(), ws_id, body, by=principal(), via="http"))


@api.post("/workstreams/<ws_id>/cancel")
@operation(
    "Cancel the running turn (202: it stops on its own), or the queued one turn_id names (200)",
    body=shapes.Cancel,
    answers={202: shapes.Cancelled, 200: shapes.Cancelled},
    errors={409: "No turn runs, or the one named is not running nor queued"},
    examples={"the running turn": {}, "a queued turn": {"turn_id": "0f3c9a2b7d1e4f6a8b9c0d1e2f3a4b5c"}},
)
def cancel(ws_id: str, body: shapes.Cancel) -> Any:
    return _reply(*commands.cancel_turn(_rt(), ws_id, body, by=principal().name))


@api.post("/workstreams/<ws_id>/close")
@operation(
    "Close it: its turns stopped, no more messages (a send is a 409), history kept; a coordinator's "
    "children with it. The ids closed now",
    answers={200: shapes.Closed},
)
def close_workstream(ws_id: str) -> Any:
    rt = _rt()
    workstreams.get(rt, ws_id)
    return _reply(200, {"closed": children.close(rt, ws_id, by=principal().name)})


@api.get("/workstreams/<ws_id>/tasks")
@operation("A coordinator's task list (the tasks tool's)", answers={200: shapes.TaskList})
def list_tasks(ws_id: str) -> Any:
    rt = _rt()
    workstreams.get(rt, ws_id)
    return _reply(200, {"tasks": tasklist.listing(rt, ws_id)})


@api.get("/workstreams/<ws_id>/shells")
@operation(
    "Its background shells (bash run_in_background), newest first, each with the tail of its output",
    answers={200: shapes.ShellList},
)
def list_shells(ws_id: str) -> Any:
    rt = _rt()
    workstreams.get(rt, ws_id)
    return _reply(200, {"shells": background.listing(rt.db, ws_id)})


@api.get("/workstreams/<ws_id>/history")
@operation("The stored conversation", answers={200: shapes.History})
def history(ws_id: str) -> Any:
    rt = _rt()
    workstreams.get(rt, ws_id)
    return _reply(200, stored.history(rt, ws_id))


@api.get("/workstreams/<ws_id>/watches")
@operation(
    "The workstream's watches: the active ones, then the latest ended ones", answers={200: shapes.WatchList}
)
def list_watches(ws_id: str) -> Any:
    return _reply(200, watch_actions.listing(_rt(), ws_id))


@api.delete("/workstreams/<ws_id>/watches/<watch_id>")
@operation("Cancel an active watch", answers={200: shapes.Watch}, errors={409: "The watch has ended already"})
def cancel_watch(ws_id: str, watch_id: str) -> Any:
    return _reply(200, watch_actions.cancel(_rt(), ws_id, path_id("watch", watch_id)))


@api.errorhandler(404)
def _not_found(_exc: Exception) -> Any:
    return _reply(404, {"error": "no such endpoint"})
