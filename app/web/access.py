"""Who may call what: one declarative rule per endpoint, enforced before any view runs.

RULES maps every endpoint of the Flask url_map to the scope it needs and whether the resource in
its path is owner-checked (another user's is a 404). An endpoint with no rule is refused for
everyone (fail closed), and tests/integration/test_access_table.py fails until it has one: a new
route is one line here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Flask, current_app, g, jsonify, request

from app.errors import ForbiddenError, NotFoundError, ServiceError
from app.jobs import store as run_store
from app.previews import store as preview_store
from app.runtime import Runtime
from app.schedules import store as schedule_store
from app.settings import MAX_ID_CHARS
from app.users import ownership, tokens
from app.users.principal import Principal
from app.users.scopes import Scope
from app.web.requests import path_id
from app.webhooks import endpoints as webhook_endpoints


@dataclass(frozen=True)
class Rule:
    scope: str | None  # None with public=False: any valid token
    owned: bool = False  # the path's resource (ws_id, token_id) must be the caller's, or 404
    public: bool = False  # no token needed
    in_view: bool = False  # the view authorizes itself through `authorize` (the websocket: in a frame)


SOCKET_ENDPOINT = "sockets.workstream_socket"  # app/web/websocket.py
PUBLIC = Rule(scope=None, public=True)
SIGNED_IN = Rule(scope=None)  # any valid token, whatever its scopes

RULES: dict[str, Rule] = {
    # the job API (app/web/api.py)
    "api.create_workstream": Rule(Scope.WRITE),
    "api.list_workstreams": Rule(Scope.READ),
    "api.get_workstream": Rule(Scope.READ, owned=True),
    "api.history": Rule(Scope.READ, owned=True),
    "api.send": Rule(Scope.WRITE, owned=True),
    "api.cancel": Rule(Scope.WRITE, owned=True),
    "api.approve": Rule(Scope.APPROVE, owned=True),
    "api.delete_workstream": Rule(Scope.WRITE, owned=True),
    "api.list_watches": Rule(Scope.READ, owned=True),
    "api.close_workstream": Rule(Scope.WRITE, owned=True),
    "api.list_tasks": Rule(Scope.READ, owned=True),
    "api.list_shells": Rule(Scope.READ, owned=True),
    "api.cancel_watch": Rule(Scope.WRITE, owned=True),
    "api.change_workstream": Rule(Scope.WRITE, owned=True),  # rename, model, pin, archive
    "api.list_models": Rule(Scope.READ),  # the configured models: no keys, no addresses
    "api.check_models": Rule(Scope.ADMIN),  # probes every model's server
    # branching (app/web/branches.py)
    "branches.fork": Rule(Scope.WRITE, owned=True),
    "branches.rewind": Rule(Scope.WRITE, owned=True),
    "branches.list_branches": Rule(Scope.READ, owned=True),
    "branches.get_branch": Rule(Scope.READ, owned=True),
    "branches.restore": Rule(Scope.WRITE, owned=True),
    "branches.edit": Rule(Scope.WRITE, owned=True),
    "branches.retry": Rule(Scope.WRITE, owned=True),
    # runs (app/web/runs.py): a run is seen by whoever may see its workstream
    "runs.create_run": Rule(Scope.WRITE),
    "runs.list_runs": Rule(Scope.READ),
    "runs.get_run": Rule(Scope.READ, owned=True),
    "runs.cancel_run": Rule(Scope.WRITE, owned=True),
    "runs.submit_run_tool_outputs": Rule(Scope.WRITE, owned=True),
    # a workstream's client tools (app/web/client_tools.py)
    "client_tools.get_client_tools": Rule(Scope.READ, owned=True),
    "client_tools.put_client_tools": Rule(Scope.WRITE, owned=True),
    "client_tools.submit_tool_outputs": Rule(Scope.WRITE, owned=True),
    # webhook endpoints (app/web/webhooks.py): each user their own, an admin's any
    "webhooks.create_endpoint": Rule(Scope.WRITE),
    "webhooks.list_endpoints": Rule(Scope.READ),
    "webhooks.get_endpoint": Rule(Scope.READ, owned=True),
    "webhooks.delete_endpoint": Rule(Scope.WRITE, owned=True),
    "webhooks.rotate_secret": Rule(Scope.WRITE, owned=True),
    "webhooks.list_deliveries": Rule(Scope.READ, owned=True),
    "webhooks.redeliver": Rule(Scope.WRITE, owned=True),
    # schedules (app/web/schedules.py): each user their own, an admin's any
    "schedules.create_schedule": Rule(Scope.WRITE),
    "schedules.list_schedules": Rule(Scope.READ),
    "schedules.get_schedule": Rule(Scope.READ, owned=True),
    "schedules.pause_schedule": Rule(Scope.WRITE, owned=True),
    "schedules.resume_schedule": Rule(Scope.WRITE, owned=True),
    "schedules.delete_schedule": Rule(Scope.WRITE, owned=True),
    # triggers (app/web/triggers.py): made by their owner; fired with no token, the id being the
    # secret (and a signature, when the trigger has a secret), checked in the view
    "triggers.create_trigger": Rule(Scope.WRITE),
    "triggers.list_triggers": Rule(Scope.READ),
    "triggers.delete_trigger": Rule(Scope.WRITE),
    "triggers.fire_trigger": PUBLIC,
    "triggers.decide_by_link": PUBLIC,  # the link's signature is the permission
    # approvals pushed out (app/web/approval_links.py): the link's signature is the permission
    "approval_links.show": PUBLIC,
    "approval_links.decide": PUBLIC,
    # compaction (app/web/compaction.py)
    "compaction.compact": Rule(Scope.WRITE, owned=True),
    # usage (app/web/usage.py): a user's own, an admin's everyone's
    "usage.usage_report": Rule(Scope.READ),
    # attachments and previews (app/web/previews.py); a preview's content is reached by a signed link
    "previews.attach": Rule(Scope.WRITE, owned=True),
    "previews.list_attachments": Rule(Scope.READ, owned=True),
    "previews.attachment_content": Rule(Scope.READ, owned=True),
    "previews.list_previews": Rule(Scope.READ, owned=True),
    "previews.describe_preview": Rule(Scope.READ, owned=True),
    "previews.preview_content": PUBLIC,
    # accounts (app/web/accounts.py)
    "accounts.login": PUBLIC,
    "accounts.logout": SIGNED_IN,
    "accounts.me": SIGNED_IN,
    "accounts.notify_senders": Rule(Scope.READ),
    "accounts.set_notify_senders": Rule(Scope.WRITE),
    "accounts.list_tokens": Rule(Scope.READ),
    "accounts.create_token": Rule(Scope.WRITE),
    "accounts.revoke_token": Rule(Scope.WRITE, owned=True),
    "accounts.list_users": Rule(Scope.ADMIN),
    "accounts.create_user": Rule(Scope.ADMIN),
    "accounts.change_user": Rule(Scope.ADMIN),
    "accounts.change_password": Rule(Scope.WRITE),  # and the current password
    # MCP (app/web/mcp_api.py): anyone may see the servers' state; managing them is an admin's
    "mcp_api.overview": Rule(Scope.READ),
    "mcp_api.list_servers": Rule(Scope.ADMIN),
    "mcp_api.create_server": Rule(Scope.ADMIN),
    "mcp_api.get_server": Rule(Scope.ADMIN),
    "mcp_api.replace_server": Rule(Scope.ADMIN),
    "mcp_api.delete_server": Rule(Scope.ADMIN),
    "mcp_api.refresh": Rule(Scope.ADMIN),
    # tool policy rules (app/web/policies.py): an admin's
    "policies.list_policies": Rule(Scope.ADMIN),
    "policies.create_policy": Rule(Scope.ADMIN),
    "policies.delete_policy": Rule(Scope.ADMIN),
    # memories (app/web/memories.py): each caller sees their own (the view checks the id)
    "memories.list_memories": Rule(Scope.READ),
    "memories.get_memory": Rule(Scope.READ),
    "memories.put_memory": Rule(Scope.WRITE),
    "memories.delete_memory": Rule(Scope.WRITE),
    # notify's channel links (app/web/channels.py): each user their own (the view checks the id)
    "channels.list_channels": Rule(Scope.READ),
    "channels.create_channel": Rule(Scope.WRITE),
    "channels.delete_channel": Rule(Scope.WRITE),
    # skills (app/web/skills.py): anyone may read them; changing them is an admin's
    "skills.list_skills": Rule(Scope.READ),
    "skills.get_skill": Rule(Scope.READ),
    "skills.create_skill": Rule(Scope.ADMIN),
    "skills.put_skill": Rule(Scope.ADMIN),
    "skills.delete_skill": Rule(Scope.ADMIN),
    # the websocket (app/web/websocket.py): read to follow; each command checks its own scope
    SOCKET_ENDPOINT: Rule(Scope.READ, owned=True, in_view=True),
    # Prometheus (app/web/metrics.py): an admin's token or TURNSTONE_METRICS_TOKEN, checked there
    "metrics.scrape": Rule(Scope.ADMIN, in_view=True),
    # the API's description (app/web/reference.py)
    "reference.openapi": PUBLIC,
    "reference.asyncapi": PUBLIC,
    "reference.browse": PUBLIC,
    "reference.browse_file": PUBLIC,
    # health, the web client
    "health.check": PUBLIC,
    "client.index": PUBLIC,
    "client.static": PUBLIC,
}

# What each websocket command needs, beyond the socket's own rule.
SOCKET_COMMANDS: dict[str, str] = {"send": Scope.WRITE, "cancel": Scope.WRITE, "approve": Scope.APPROVE}


# -- ownership of what a path names ---------------------------------------------------------


MAX_ROW_ID = 2**31  # integer ids are 32-bit columns


def _own_workstream(rt: Runtime, who: Principal, value: str) -> None:
    ownership.require_workstream(rt, who, path_id("workstream", value))  # a NUL is no id: 404, not 500


def _own_token(rt: Runtime, who: Principal, value: int) -> None:
    if not 0 < value < MAX_ROW_ID:  # a larger number is no row, and PostgreSQL would refuse it
        raise NotFoundError(f"no token {value}")
    _, owner = tokens.owner_of(rt, value)
    if not who.is_admin and (owner is None or owner != who.user_id):
        raise NotFoundError(f"no token {value}")


def _own_preview(rt: Runtime, who: Principal, value: str) -> None:
    try:
        row = preview_store.preview(rt.db, path_id("preview", value))
        ownership.require_workstream(rt, who, row.ws_id)
    except NotFoundError:
        raise NotFoundError(f"no preview {value[:MAX_ID_CHARS]}") from None


def _own_run(rt: Runtime, who: Principal, value: str) -> None:
    try:
        ownership.require_workstream(rt, who, run_store.get(rt, path_id("run", value)).ws_id)
    except NotFoundError:
        raise NotFoundError(f"no run {value[:MAX_ID_CHARS]}") from None


def _own_endpoint(rt: Runtime, who: Principal, value: str) -> None:
    webhook_endpoints.get(rt, who, path_id("webhook endpoint", value))


def _own_schedule(rt: Runtime, who: Principal, value: str) -> None:
    schedule_store.get(rt, who, path_id("schedule", value))


# Path parameters that name something with an owner, and how its owner is checked.
OWNED_PARAMS: dict[str, Callable[[Runtime, Principal, Any], None]] = {
    "ws_id": _own_workstream,
    "token_id": _own_token,
    "preview_id": _own_preview,
    "run_id": _own_run,
    "endpoint_id": _own_endpoint,
    "schedule_id": _own_schedule,
}


# -- enforcement ------------------------------------------------------------------------------


def presented_token() -> str | None:
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return request.args.get("token") or None


def authorize(rt: Runtime, rule: Rule, view_args: dict[str, Any], raw: str | None = None) -> Principal | None:
    """The caller, when `rule` lets them through; a ServiceError (401, 403, 404) otherwise.
    The token is the request's unless `raw` gives it (a websocket re-checking its own)."""
    if rule.public:
        return None
    who = tokens.authenticate(rt, raw if raw is not None else presented_token())
    if rule.scope is not None:
        require_scope(who, rule.scope)
    if rule.owned:
        check_owned(rt, who, view_args)
    return who


def check_owned(rt: Runtime, who: Principal, view_args: dict[str, Any]) -> None:
    """A ServiceError (404) unless `who` may reach what each owned argument names."""
    for name, value in view_args.items():
        if name in OWNED_PARAMS:
            OWNED_PARAMS[name](rt, who, value)


def require_scope(who: Principal, scope: str) -> None:
    if not who.has(scope):
        raise ForbiddenError(f"forbidden: this token lacks the '{scope}' scope", scope=scope)


def principal() -> Principal:
    """The caller of the current request (set by the gate; a route without a token has none)."""
    who = g.get("principal")
    if who is None:
        raise RuntimeError("no principal: the endpoint's rule is public")
    return who


def init_app(app: Flask) -> None:
    app.before_request(_gate)


def _gate() -> Any:
    if request.endpoint is None:  # no such route: the 404 handler answers
        return None
    rule = RULES.get(request.endpoint)
    if rule is None:  # fail closed: a route nobody wrote a rule for is no one's to call
        return refusal(ForbiddenError(f"forbidden: {request.endpoint} has no access rule"))
    if rule.in_view:
        return None
    try:
        g.principal = authorize(current_app.extensions["runtime"], rule, dict(request.view_args or {}))
    except ServiceError as exc:
        return refusal(exc)
    return None


def refusal(exc: ServiceError) -> Any:
    """The JSON answer to a refused request (with the Bearer challenge on a 401)."""
    response = jsonify(error=exc.message, **exc.details)
    response.status_code = exc.status
    if exc.status == 401:
        response.headers["WWW-Authenticate"] = "Bearer"
    return response
