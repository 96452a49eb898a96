"""The OpenAPI description of the job API, served (without a token) at /v1/api/openapi.json."""

from __future__ import annotations

from typing import Any


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ERRORS = {
    "400": _json(
        _ref("Error"),
        "The body is not a JSON object (or is cut short), or a field is missing, of the wrong type, "
        "too long, or holds a NUL or a lone surrogate; `field` names it",
    ),
    "401": _json(_ref("Error"), "No valid token: none, unknown, expired, revoked, or its user disabled"),
    "403": _json(_ref("Error"), "The token lacks the scope this call needs; `scope` names it"),
    "404": _json(_ref("Error"), "No such workstream"),
    "503": _json(
        _ref("Error"),
        "The database or Redis could not be reached just now (a restart, a failover): retry after "
        "`Retry-After` seconds",
    ),
}
_BODY_ERRORS = {
    "413": _json(_ref("Error"), "The body, or the message in it, is over the size limit"),
}
_WS_ID = {"name": "ws_id", "in": "path", "required": True, "schema": {"type": "string"}}
# Either way of presenting the token will do; the query string is for browser websockets,
# which cannot set headers.
_SECURITY: list[dict[str, list[str]]] = [{"bearer": []}, {"token": []}]
# Text a person writes: stored as given, so no NUL (PostgreSQL cannot store it).
_TEXT = "^[^\\u0000]*$"
_IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "1-200 printable ASCII characters. A send repeated with the same key (a retry "
    "after a lost response) stores nothing new and answers the first send's turn_id.",
    "schema": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[\\x20-\\x7e]+$"},
}


def _op(
    summary: str,
    ok: str,
    schema: dict[str, Any],
    body: str | None = None,
    extra: dict[str, Any] | None = None,
    path: bool = True,
    body_required: bool = True,
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "security": _SECURITY,
        "responses": {ok: _json(schema, summary), **_ERRORS, **(extra or {})},
    }
    if path:
        op["parameters"] = [_WS_ID]
    if body:
        # Read as JSON whatever the Content-Type says (curl's -d sends a form type).
        op["requestBody"] = {
            "required": body_required,
            "content": {"application/json": {"schema": _ref(body)}},
        }
        op["responses"].update(_BODY_ERRORS)
    return op


_CANCELLED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "turn_id": {"type": "string"},
        "cancel_requested": {"type": "boolean"},
        "status": {"enum": ["active", "cancelled"], "description": "cancelled: it has ended already"},
    },
}

OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "turnstone-jobs job API",
        "version": "1",
        "description": "Every call under /v1/api needs a token (as `Authorization: Bearer <token>`, "
        "the scheme name in any case, or as `?token=<token>`), except this document, which is public "
        "(and sign-in, `POST /v1/api/login`). A token carries scopes (read, write, approve, admin): "
        "one without the scope a call needs gets a 403 naming it; another user's workstream is a 404. "
        "Errors are JSON objects with an `error` message.",
    },
    "components": {
        "securitySchemes": {
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "`Authorization: Bearer <token>`; `bearer` in any case is accepted",
            },
            "token": {
                "type": "apiKey",
                "in": "query",
                "name": "token",
                "description": "The token in the query string, for clients that cannot set headers "
                "(a browser's websocket); it may end up in proxy logs, so prefer the header",
            },
        },
        "schemas": {
            "Error": {
                "type": "object",
                "required": ["error"],
                "properties": {
                    "error": {"type": "string"},
                    "field": {"type": "string"},
                    "scope": {"type": "string", "description": "403: the scope the token lacks"},
                    "pending": {"type": "array", "items": {"type": "string"}},
                },
            },
            "NewWorkstream": {
                "type": "object",
                "description": "null for a field is the same as leaving it out: its default",
                "properties": {
                    "name": {"type": ["string", "null"], "maxLength": 200, "pattern": _TEXT},
                    "model": {
                        "type": ["string", "null"],
                        "description": "a configured model's name (else 400)",
                    },
                    "auto_approve": {"type": ["boolean", "null"]},
                    "working_dir": {
                        "type": ["string", "null"],
                        "maxLength": 4096,
                        "description": "administrators only (else 403): an existing directory inside the "
                        "data root, [sandbox] working_dir_roots or TURNSTONE_WORKING_DIR (else 403 or 400); "
                        "left out, the workstream gets a folder of its own",
                    },
                    "tool_search": _ref("ToolSearch"),
                    "skill": {
                        "type": ["string", "null"],
                        "maxLength": 200,
                        "description": "an enabled skill's name (else 400): the workstream starts with it",
                    },
                    "network": {
                        "type": ["string", "null"],
                        "enum": ["none", "proxy", "host", None],
                        "description": "where its commands may connect (default: [sandbox] default_network); "
                        "one of [sandbox] networks (else 400); host: administrators only (else 403)",
                    },
                },
            },
            "ToolSearch": {
                "type": "object",
                "description": "this workstream's tool search settings over [tools]' (each optional)",
                "properties": {
                    "mode": {"enum": ["auto", "on", "off"]},
                    "threshold": {"type": "integer", "minimum": 0, "maximum": 100000},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": 50},
                },
                "additionalProperties": False,
            },
            "Workstream": {
                "type": "object",
                "required": ["ws_id", "state"],
                "properties": {
                    "ws_id": {"type": "string"},
                    "name": {"type": "string"},
                    "kind": {"type": "string"},
                    "model": {"type": ["string", "null"]},
                    "auto_approve": {"type": "boolean"},
                    "auto_approve_tools": {"type": "array", "items": {"type": "string"}},
                    "working_dir": {"type": "string"},
                    "network": {
                        "enum": ["none", "proxy", "host"],
                        "description": "where its commands may connect: none, through the egress proxy, "
                        "or the host's own network",
                    },
                    "state": {"enum": ["idle", "thinking", "running", "attention", "error"]},
                    "active_turn_id": {"type": ["string", "null"]},
                    "skill": {"type": ["string", "null"], "description": "the active skill's name"},
                    "pending_approvals": {"type": "array", "items": _ref("ToolItem")},
                    "queued_messages": {"type": "integer"},
                    "turn": {
                        "type": ["object", "null"],
                        "description": "the active turn: where it stands",
                        "properties": {
                            "turn_id": {"type": "string"},
                            "phase": {
                                "enum": ["model", "approval", "tools", "awaiting"],
                                "description": "awaiting: its tool calls wait on something outside "
                                "(a sub-agent); no worker holds it",
                            },
                            "step": {"type": "integer"},
                            "cancel_requested": {"type": "boolean"},
                        },
                    },
                    "usage": _ref("Usage"),
                    "tool_search": {"type": ["object", "null"]},
                    "tools": {
                        "type": "object",
                        "description": "tools the model sees now, of all it could have; search: the "
                        "tool search tier while it is on (client, anthropic, openai), else null",
                        "properties": {
                            "visible": {"type": "integer"},
                            "total": {"type": "integer"},
                            "search": {"type": ["string", "null"]},
                        },
                    },
                    "expanded_tools": {"type": "array", "items": {"type": "string"}},
                    "owner_id": {
                        "type": ["string", "null"],
                        "description": "the user it belongs to; null: the operator's",
                    },
                },
            },
            "Usage": {
                "type": "object",
                "description": "tokens as the provider reported them: one model step's, or a "
                "workstream's added up; cache_* keys where the provider reports them",
                "required": ["input_tokens", "output_tokens"],
                "properties": {
                    "input_tokens": {"type": "integer"},
                    "output_tokens": {"type": "integer"},
                },
                "additionalProperties": {"type": "integer"},
            },
            "ToolItem": {
                "type": "object",
                "properties": {
                    "call_id": {"type": "string"},
                    "func_name": {"type": "string"},
                    "header": {"type": "string"},
                    "preview": {"type": "string"},
                    "needs_approval": {"type": "boolean"},
                    "error": {"type": ["string", "null"]},
                    "status": {"type": "string"},
                    "child_ws_id": {"type": "string", "description": "a sub-agent's call: the sub-agent"},
                    "parent_call_id": {
                        "type": "string",
                        "description": "a sub-agent's call: its task_agent call",
                    },
                },
            },
            "Cancel": {
                "type": "object",
                "properties": {
                    "turn_id": {
                        "type": "string",
                        "maxLength": 200,
                        "description": "409 unless this turn is the running one",
                    }
                },
            },
            "Send": {
                "type": "object",
                "required": ["message"],
                "properties": {
                    "message": {
                        "type": "string",
                        "pattern": "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$",
                        "description": "not empty nor only white space; at most 256 KiB of UTF-8 (else 413)",
                    }
                },
            },
            "Approve": {
                "type": "object",
                "required": ["approved"],
                "properties": {
                    "approved": {"type": "boolean"},
                    "feedback": {
                        "type": "string",
                        "pattern": _TEXT,
                        "description": "to the model; at most 256 KiB of UTF-8, as a message (else 413)",
                    },
                    "always": {"type": "boolean"},
                    "call_id": {
                        "type": "string",
                        "maxLength": 200,
                        "description": "omit to decide every pending call (the sub-agents' too)",
                    },
                    "child_ws_id": {
                        "type": "string",
                        "maxLength": 32,
                        "description": "the sub-agent whose call call_id names, where ids could clash",
                    },
                },
            },
            "Decision": {
                "type": "object",
                "properties": {
                    "decided": {"type": "array", "items": {"type": "string"}},
                    "pending": {"type": "array", "items": {"type": "string"}},
                    "resumed": {"type": "boolean"},
                },
            },
            "History": {
                "type": "object",
                "properties": {
                    "ws_id": {"type": "string"},
                    "last_event_id": {"type": "integer"},
                    "messages": {"type": "array", "items": _ref("HistoryMessage")},
                },
            },
            "HistoryMessage": {
                "type": "object",
                "required": ["id", "turn_id", "role", "content", "created_at"],
                "properties": {
                    "id": {"type": "integer"},
                    "turn_id": {"type": ["string", "null"]},
                    "role": {"enum": ["user", "assistant", "tool"]},
                    "content": {"type": ["string", "null"]},
                    "reasoning": {"type": "string", "description": "assistant: the model's reasoning"},
                    "usage": _ref("Usage"),
                    "tool_calls": {
                        "type": "array",
                        "items": {"type": "object"},
                        "description": "assistant: the calls it asked for, in OpenAI chat form",
                    },
                    "tool_call_id": {"type": "string", "description": "tool: the call this is the result of"},
                    "name": {"type": "string", "description": "tool: the tool's name"},
                    "is_error": {"type": "boolean", "description": "tool: whether the result is an error"},
                    "child_ws_id": {"type": "string", "description": "a task_agent result: its sub-agent"},
                    "decision": {
                        "type": "object",
                        "description": "tool: who decided on the call, how, and through what",
                        "properties": {
                            "approved": {"type": "boolean"},
                            "by": {"type": "string"},
                            "how": {"type": ["string", "null"]},
                            "via": {"type": ["string", "null"], "enum": ["http", "websocket", "cli", None]},
                            "feedback": {"type": ["string", "null"]},
                        },
                    },
                    "origin": {
                        "enum": ["watch"],
                        "description": "user: present when something other than a person wrote it "
                        "(`watch`: a watch's result)",
                    },
                    "created_at": {"type": "string", "format": "date-time"},
                },
            },
            "Watch": {
                "type": "object",
                "required": ["watch_id", "name", "command", "status", "polls", "max_polls"],
                "properties": {
                    "watch_id": {"type": "string"},
                    "ws_id": {"type": "string"},
                    "name": {"type": "string"},
                    "command": {"type": "string"},
                    "poll_every": {"type": "string", "description": "as the model gave it: 30s, 5m, 1h"},
                    "poll_every_seconds": {"type": "integer"},
                    "stop_on": {"type": ["string", "null"]},
                    "max_polls": {"type": "integer"},
                    "polls": {"type": "integer"},
                    "status": {"enum": ["active", "fired", "exhausted", "cancelled"]},
                    "next_poll_at": {"type": ["string", "null"], "format": "date-time"},
                    "last_polled_at": {"type": ["string", "null"], "format": "date-time"},
                    "last_exit_code": {"type": ["integer", "null"]},
                    "last_error": {"type": ["string", "null"]},
                    "created_at": {"type": "string", "format": "date-time"},
                    "ended_at": {"type": ["string", "null"], "format": "date-time"},
                },
            },
        },
    },
    "paths": {
        "/v1/api/workstreams": {
            "post": _op(
                "Create a workstream",
                "201",
                _ref("Workstream"),
                "NewWorkstream",
                path=False,
                body_required=False,  # no body: every field takes its default
            ),
            "get": _op(
                "List workstreams",
                "200",
                {
                    "type": "object",
                    "properties": {"workstreams": {"type": "array", "items": _ref("Workstream")}},
                },
                path=False,
            ),
        },
        "/v1/api/workstreams/{ws_id}": {
            "get": _op("A workstream with its state and pending approvals", "200", _ref("Workstream")),
        },
        "/v1/api/workstreams/{ws_id}/send": {
            "post": {
                **_op(
                    "Send a message: opens a turn, or queues it behind the active one",
                    "202",
                    {
                        "type": "object",
                        "required": ["turn_id", "status"],
                        "properties": {
                            "turn_id": {"type": "string"},
                            "status": {
                                "enum": ["queued", "active", "done", "cancelled", "error"],
                                "description": "the turn's status now: `queued` behind another turn, "
                                "`active`, or (a repeated Idempotency-Key whose turn is over) how it ended",
                            },
                        },
                    },
                    "Send",
                ),
                "parameters": [_WS_ID, _IDEMPOTENCY_KEY],
            },
        },
        "/v1/api/workstreams/{ws_id}/approve": {
            "post": _op(
                "Approve or deny one pending call (call_id) or all of them",
                "200",
                _ref("Decision"),
                "Approve",
                {"409": _json(_ref("Error"), "Not pending, or decided otherwise; names the pending calls")},
            ),
        },
        "/v1/api/workstreams/{ws_id}/cancel": {
            "post": _op(
                "Cancel the running turn (202: it stops on its own), or the queued one turn_id names",
                "202",
                _CANCELLED,
                "Cancel",
                {
                    "200": _json(_CANCELLED, "The queued turn turn_id named is withdrawn: it never starts"),
                    "409": _json(_ref("Error"), "No turn runs, or the one named is not running nor queued"),
                },
                body_required=False,
            ),
        },
        "/v1/api/workstreams/{ws_id}/history": {
            "get": _op("The stored conversation", "200", _ref("History")),
        },
        "/v1/api/workstreams/{ws_id}/watches": {
            "get": _op(
                "The workstream's watches: the active ones, then the latest ended ones",
                "200",
                {
                    "type": "object",
                    "properties": {
                        "ws_id": {"type": "string"},
                        "watches": {"type": "array", "items": _ref("Watch")},
                    },
                },
            ),
        },
        "/v1/api/workstreams/{ws_id}/watches/{watch_id}": {
            "delete": {
                **_op(
                    "Cancel an active watch",
                    "200",
                    _ref("Watch"),
                    extra={
                        "404": _json(_ref("Error"), "No such workstream, or no such watch in it"),
                        "409": _json(_ref("Error"), "The watch has already ended"),
                    },
                ),
                "parameters": [
                    _WS_ID,
                    {"name": "watch_id", "in": "path", "required": True, "schema": {"type": "string"}},
                ],
            },
        },
        "/health": {
            "get": {
                "summary": "Process, Redis, database and worker health",
                "description": "`sandbox`: {enforced, mode, bwrap, reason}: whether bash calls and watch "
                "polls run in the bubblewrap jail (false: bwrap is missing; see docs/security.md)",
                "responses": {
                    "200": {"description": "healthy"},
                    "503": {"description": "Redis or the database is unreachable"},
                },
            }
        },
        "/v1/api/openapi.json": {
            "get": {
                "summary": "This document (public: no token needed)",
                "security": [],
                "responses": {"200": {"description": "OpenAPI 3.1"}},
            }
        },
    },
}

# -- attachments, previews, deleting a workstream ----------------------------------------------

_PREVIEW_ID = {"name": "preview_id", "in": "path", "required": True, "schema": {"type": "string"}}
_ATTACHMENT = {
    "type": "object",
    "properties": {
        "attachment_id": {"type": "string"},
        "target": {"type": "string", "description": "what tools take: `attachment:<id>`"},
        "filename": {"type": "string"},
        "media_type": {"type": "string"},
        "size": {"type": "integer"},
        "created_at": {"type": "string", "format": "date-time"},
    },
}
_PREVIEW = {
    "type": "object",
    "properties": {
        "preview_id": {"type": "string"},
        "ws_id": {"type": "string"},
        "call_id": {"type": ["string", "null"]},
        "kind": {"enum": ["web", "pdf", "image", "table", "text", "markdown"]},
        "title": {"type": "string"},
        "media_type": {"type": "string"},
        "source": {"type": "string"},
        "size": {"type": "integer"},
        "created_at": {"type": "string", "format": "date-time"},
        "url": {"type": "string", "description": "a signed link to the content, for `expires_in` seconds"},
        "remote_url": {
            "type": ["string", "null"],
            "description": "web: the same page with its remote images, styles and fonts allowed",
        },
        "expires_in": {"type": "integer"},
    },
}
OPENAPI["paths"]["/v1/api/workstreams/{ws_id}"]["delete"] = _op(
    "Delete a workstream at rest, with its sub-agents, conversation, previews, attachments and events",
    "200",
    {"type": "object", "properties": {"deleted": {"type": "array", "items": {"type": "string"}}}},
    extra={"409": _json(_ref("Error"), "A turn is running or queued: cancel it first")},
)
OPENAPI["paths"]["/v1/api/workstreams/{ws_id}/attachments"] = {
    "post": {
        **_op(
            "Attach a file (multipart field `file`, at most 32 MiB)",
            "201",
            _ATTACHMENT,
            extra={"413": _json(_ref("Error"), "The file is over the attachment limit")},
        ),
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "required": ["file"],
                        "properties": {"file": {"type": "string", "format": "binary"}},
                    }
                }
            },
        },
    },
    "get": _op(
        "The workstream's attachments",
        "200",
        {"type": "object", "properties": {"attachments": {"type": "array", "items": _ATTACHMENT}}},
    ),
}
OPENAPI["paths"]["/v1/api/workstreams/{ws_id}/previews"] = {
    "get": _op(
        "What open_preview showed in this workstream, oldest first",
        "200",
        {"type": "object", "properties": {"previews": {"type": "array", "items": _PREVIEW}}},
    ),
}
OPENAPI["paths"]["/v1/api/previews/{preview_id}"] = {
    "get": {
        **_op("A preview, with fresh signed links to its content", "200", _PREVIEW, path=False),
        "parameters": [_PREVIEW_ID],
    },
}
OPENAPI["paths"]["/v1/api/previews/{preview_id}/content"] = {
    "get": {
        "summary": "A preview's content, served inert (no token: the signed link is the permission)",
        "security": [],
        "parameters": [
            _PREVIEW_ID,
            {"name": "exp", "in": "query", "required": True, "schema": {"type": "string"}},
            {"name": "remote", "in": "query", "required": True, "schema": {"enum": ["0", "1"]}},
            {"name": "sig", "in": "query", "required": True, "schema": {"type": "string"}},
        ],
        "responses": {
            "200": {"description": "the content, with a sandboxing Content-Security-Policy"},
            "403": _json(_ref("Error"), "The link is invalid or has expired"),
            "404": _json(_ref("Error"), "No such preview"),
        },
    },
}
