"""Hooks from outside, with no token (docs/triggers.md, docs/webhooks.md): /v1/api/triggers
makes, lists and removes triggers; /v1/hooks/{id} (the id is the secret, and a signature when
the trigger has a secret) starts a run with the posted JSON as its context; a run's signed decide
link, /v1/hooks/runs/{id}/decide, approves or denies the calls it waits on."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify, request

from app.errors import PayloadTooLargeError, TooManyRequestsError
from app.jobs import links
from app.jobs import triggers as store
from app.runtime import Runtime
from app.settings import MAX_NAME_CHARS
from app.users.scopes import Scope
from app.web import run_fields, shapes
from app.web.access import principal, require_scope
from app.web.contract import operation
from app.web.requests import path_id

triggers = Blueprint("triggers", __name__, url_prefix="/v1")


def _rt() -> Runtime:
    return current_app.extensions["runtime"]


@triggers.url_value_preprocessor
def _check_ids(_endpoint: str | None, values: dict[str, Any] | None) -> None:
    if values and "run_id" in values:
        path_id("run", values["run_id"])
    if values and "trigger_id" in values:
        path_id("trigger", values["trigger_id"])


@triggers.post("/api/triggers")
@operation(
    "Make a trigger: a secret URL that starts a run with the JSON posted to it (docs/triggers.md)",
    body=shapes.NewTrigger,
    answers={201: shapes.Trigger},
    errors={409: "The caller has as many triggers as one may", 404: "No such workstream"},
    examples={"on push": {"prompt": "Review the pushed commits", "policy": {"tools": ["read_file"]}}},
)
def create_trigger(body: shapes.NewTrigger) -> Any:
    who = principal()
    prompt, ws_id, timeout_s = body.prompt, body.workstream, body.timeout_s
    policy = run_fields.policy(body.policy)
    signed = body.signed is not False
    if len(prompt.encode()) > _rt().settings.max_message_bytes:
        raise PayloadTooLargeError("prompt: over the size of a message", field="prompt")
    if policy.tools or policy.auto_approve:
        require_scope(who, Scope.APPROVE)
    trigger, secret = store.create(_rt(), who, prompt, ws_id, policy, timeout_s, signed)
    return jsonify({**store.shown(trigger), **({"secret": secret} if secret else {})}), 201


@triggers.get("/api/triggers")
@operation("The caller's triggers (never their secrets)", answers={200: shapes.TriggerList})
def list_triggers() -> Any:
    return jsonify({"triggers": store.listing(_rt(), principal())}), 200


@triggers.delete("/api/triggers/<trigger_id>")
@operation("Remove a trigger", answers={200: shapes.MemoryDeleted})
def delete_trigger(trigger_id: str) -> Any:
    rt = _rt()
    store.remove(rt, store.get(rt, principal(), trigger_id))
    return jsonify({"deleted": trigger_id}), 200


@triggers.post("/hooks/runs/<run_id>/decide")
@operation(
    "Decide the calls a run waits on, through the signed link an approval.requested webhook carries "
    "(public: the signature is the permission)",
    body=shapes.LinkDecision,
    query=shapes.DecideLink,
    answers={200: shapes.Decided},
    errors={403: "The link is invalid or has expired", 409: "Those calls are no longer waiting"},
    examples={"approve": {"approved": True}},
)
def decide_by_link(run_id: str, body: shapes.LinkDecision, query: shapes.DecideLink) -> Any:
    args = {"turn": query.turn, "step": query.step, "exp": query.exp, "sig": query.sig}
    return jsonify(links.decide(_rt(), run_id, args, body.approved, body.feedback)), 200


@triggers.post("/hooks/<trigger_id>")
@operation(
    "Start the trigger's run with this JSON as its context (public: the id is the secret; "
    "X-Hub-Signature-256 when the trigger has one)",
    body=shapes.HookContext,
    answers={202: shapes.Fired},
    errors={
        403: "A trigger with a secret and no valid signature",
        429: "The trigger started its runs per minute already: retry after `Retry-After` seconds",
    },
    examples={"an alert": {"alert": "disk 91% full", "host": "db-2"}},
)
def fire_trigger(trigger_id: str, body: shapes.HookContext) -> Any:
    if (request.content_length or 0) > store.MAX_BODY_BYTES:
        raise PayloadTooLargeError(f"body: over {store.MAX_BODY_BYTES} bytes", field="body")
    raw = request.get_data(cache=True)[: store.MAX_BODY_BYTES + 1]
    if len(raw) > store.MAX_BODY_BYTES:
        raise PayloadTooLargeError(f"body: over {store.MAX_BODY_BYTES} bytes", field="body")
    context = body.root  # the parsed object; `raw` is what a signature covers
    event = request.headers.get("X-GitHub-Event", "")[:MAX_NAME_CHARS] or None
    if event is not None and not event.isprintable():
        event = None
    try:
        run = store.fire(_rt(), trigger_id, raw, context, request.headers.get(store.SIGNATURE_HEADER), event)
    except TooManyRequestsError as exc:
        response = jsonify(error=exc.message, **exc.details)
        response.headers["Retry-After"] = str(exc.details["retry_after"])
        return response, 429
    return jsonify({"run_id": run.id, "status": "queued"}), 202
