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
    "401": _json(_ref("Error"), "No valid token"),
    "404": _json(_ref("Error"), "No such workstream"),
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


OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "turnstone-jobs job API",
        "version": "1",
        "description": "Every call under /v1/api needs a token (as `Authorization: Bearer <token>`, "
        "the scheme name in any case, or as `?token=<token>`), except this document, which is public. "
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
                        "description": "an existing directory on the workers' machines (else 400)",
                    },
                    "skill": {
                        "type": ["string", "null"],
                        "maxLength": 200,
                        "description": "an enabled skill's name (else 400): the workstream starts with it",
                    },
                },
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
                    "feedback": {"type": "string", "pattern": _TEXT},
                    "always": {"type": "boolean"},
                    "call_id": {
                        "type": "string",
                        "maxLength": 200,
                        "description": "omit to decide every pending call",
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
                    "created_at": {"type": "string", "format": "date-time"},
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
                "Cancel the running turn",
                "202",
                {
                    "type": "object",
                    "properties": {"turn_id": {"type": "string"}, "cancel_requested": {"type": "boolean"}},
                },
                "Cancel",
                {"409": _json(_ref("Error"), "No turn is running, or not the one named")},
                body_required=False,
            ),
        },
        "/v1/api/workstreams/{ws_id}/history": {
            "get": _op("The stored conversation", "200", _ref("History")),
        },
        "/health": {
            "get": {
                "summary": "Process, Redis, database and worker health",
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
