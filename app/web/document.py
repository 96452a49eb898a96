"""The OpenAPI document, written from the application itself: every route of the url_map, its
path parameters from the rule, its scopes from app/web/access.py, its request and answers from
the models its `@operation` names (app/web/contract.py). Nothing here is kept by hand beside
the code that checks requests, so the two cannot disagree.

Served (without a token) at /v1/api/openapi.json, with a browsable page at /v1/api/docs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from flask import Flask
from pydantic import BaseModel, ValidationError
from pydantic.json_schema import models_json_schema
from werkzeug.routing import Rule as UrlRule

from app.settings import Settings
from app.web import access, events_document, shapes
from app.web.contract import AUTH_QUERY, Operation, declared

TITLE = "turnstone-jobs API"
VERSION = "1"
TAGS = {"api": "workstreams", "mcp_api": "mcp"}  # blueprints whose names say less than this
# The browser client's own pages and files are not the API: the document leaves them out. The
# websocket is described by the AsyncAPI document (app/web/events_document.py), which tools for
# websockets read; this one points there (`x-websocket`).
NOT_API = frozenset({"client.index", "client.static", access.SOCKET_ENDPOINT})

DESCRIPTION = (
    "Every call needs a token, as `Authorization: Bearer <token>` (the scheme name in any case) or "
    "as `?token=<token>`, except those whose `security` is empty (this document, sign-in, health, "
    "a preview's signed content). A token carries scopes (read, write, approve, admin): each "
    "operation's security names the one it needs, and a token without it gets a 403 naming it. "
    "Another user's workstream is a 404. Errors are JSON objects with an `error` message and, "
    "when a field of the request is wrong, `field` naming it. A body is one JSON object whatever "
    "its Content-Type says; a key an operation does not take is refused (400) naming the key, "
    "and so is a query parameter it does not take. Answers may carry keys not listed here: "
    "clients ignore keys they do not know. The websocket's events: /v1/api/asyncapi.json and "
    "docs/events.md."
)

_COMMON_ERRORS = {
    401: "No valid token: none, unknown, expired, revoked, or its user disabled",
    403: "The token lacks the scope this call needs (`scope` names it)",
    503: "The database or Redis could not be reached just now (a restart, a failover): retry after "
    "`Retry-After` seconds",
}
_BAD_INPUT = (
    "A field is missing, unknown, of the wrong type, out of range, too long, or holds a NUL or a lone "
    "surrogate (`field` names it); or the body is not one JSON object"
)
_TOO_LARGE = "The body, or a message in it, is over the size limit"
_UNUSABLE = (
    "Well-formed, but naming what the service cannot use (`field` names it): a skill that is not "
    "enabled, a directory that does not exist, a host the SSRF guard refuses, a value past a limit "
    "the configuration sets"
)
_PARAM_TYPES = {"int": {"type": "integer", "minimum": 0}, "path": {"type": "string"}}


def build(app: Flask) -> dict[str, Any]:
    """The whole document for `app` (built once per process: routes do not change at run time)."""
    operations = list(_operations(app))
    models = _models(operations)
    refs, defs = models_json_schema(
        [(m, "validation") for m in models], ref_template="#/components/schemas/{model}"
    )
    _configured_choices(defs.get("$defs", {}), app.extensions["runtime"].settings)
    paths: dict[str, dict[str, Any]] = {}
    ids = _operation_ids(operations)
    for rule, method, op in operations:
        path, params = _path(rule)
        paths.setdefault(path, {})[method.lower()] = _operation(
            rule, method, op, params, ids, lambda m: refs[(m, "validation")]
        )
    return {
        "openapi": "3.1.0",
        "info": {"title": TITLE, "version": VERSION, "description": DESCRIPTION},
        "servers": [{"url": "/"}],
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
            "schemas": defs.get("$defs", {}),
        },
        "paths": dict(sorted(paths.items())),
        "x-websocket": {
            "path": events_document.CHANNEL,
            "asyncapi": "/v1/api/asyncapi.json",
            "description": "the workstream's events and commands, over a websocket (docs/events.md)",
        },
    }


def _configured_choices(schemas: dict[str, Any], settings: Settings) -> None:
    """What this service's configuration allows where a field names a configured thing: the
    chat models a workstream may use, the networks its commands may have."""
    # "" is the default model, as null is
    chat_models = ["", *sorted(name for name, m in settings.models.items() if m.is_chat_model)]
    networks = sorted({*settings.sandbox.networks, "host"})
    for schema, name, choices in (
        ("NewWorkstream", "model", chat_models),
        ("NewWorkstream", "network", networks),
        ("NewRun", "model", chat_models),
        ("WorkstreamChange", "model", chat_models),
    ):
        if schema in schemas:
            schemas[schema]["properties"][name]["anyOf"] = [
                {"enum": choices, "type": "string"},
                {"type": "null"},
            ]


def undeclared(app: Flask) -> list[str]:
    """Endpoints of the API that no `@operation` describes (a test keeps this empty)."""
    missing = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint not in NOT_API and declared(app.view_functions[rule.endpoint]) is None:
            missing.append(rule.endpoint)
    return sorted(missing)


def _operations(app: Flask) -> Iterator[tuple[UrlRule, str, Operation]]:
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: r.rule):
        if rule.endpoint in NOT_API:
            continue
        op = declared(app.view_functions[rule.endpoint])
        if op is None:
            continue
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            yield rule, method, op


def _models(operations: list[tuple[UrlRule, str, Operation]]) -> list[type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {"Error": shapes.Error}
    for _, _, op in operations:
        for model in (op.body, op.query, *op.answers.values()):
            if isinstance(model, type) and issubclass(model, BaseModel):
                found.setdefault(model.__name__, model)
    return list(found.values())


def _operation_ids(operations: list[tuple[UrlRule, str, Operation]]) -> dict[tuple[str, str], str]:
    """A view's own name, which is unique across blueprints (a test keeps it so)."""
    return {(rule.endpoint, method): rule.endpoint.rsplit(".", 1)[-1] for rule, method, _ in operations}


def _path(rule: UrlRule) -> tuple[str, list[dict[str, Any]]]:
    params: list[dict[str, Any]] = []

    def each(match: re.Match[str]) -> str:
        converter, name = match.group(1), match.group(2)
        schema = _PARAM_TYPES.get(converter or "", {"type": "string"})
        params.append({"name": name, "in": "path", "required": True, "schema": schema})
        return "{" + name + "}"

    return re.sub(r"<(?:(\w+):)?(\w+)>", each, rule.rule), params


def _operation(
    rule: UrlRule,
    method: str,
    op: Operation,
    params: list[dict[str, Any]],
    ids: dict[tuple[str, str], str],
    ref: Any,
) -> dict[str, Any]:
    access_rule = access.RULES.get(rule.endpoint)
    out: dict[str, Any] = {
        "operationId": ids[(rule.endpoint, method)],
        "summary": op.summary,
        "tags": [TAGS.get(blueprint := rule.endpoint.split(".", 1)[0], blueprint)],
    }
    if op.description:
        out["description"] = op.description
    if access_rule is None or access_rule.public:
        out["security"] = []
    else:
        scopes = [access_rule.scope] if access_rule.scope else []
        out["security"] = [{"bearer": scopes}, {"token": scopes}]
        if access_rule.scope:
            out["x-scope"] = access_rule.scope
    parameters = list(params)
    parameters += [
        {"name": h.name, "in": "header", "required": False, "description": h.description, "schema": h.schema}
        for h in op.headers
    ]
    if op.query is not None:
        parameters += _query_parameters(op.query)
    if parameters:
        out["parameters"] = parameters
    if op.body is not None:
        required = _needs_body(op.body)
        content: dict[str, Any] = {"schema": ref(op.body)}
        if op.examples:
            content["examples"] = {name: {"value": value} for name, value in op.examples.items()}
        out["requestBody"] = {"required": required, "content": {"application/json": content}}
    elif op.upload:
        out["requestBody"] = {
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
        }
    out["responses"] = _responses(rule, op, params, access_rule, ref)
    if op.links:
        first = str(min(s for s in op.answers if 200 <= s < 300))
        out["responses"][first]["links"] = {
            name: {"operationId": link.operation, "parameters": dict(link.parameters)}
            for name, link in op.links.items()
        }
    return out


def _needs_body(model: type[BaseModel]) -> bool:
    """Whether a body must be sent: the model refuses an empty one (a missing body reads as {})."""
    try:
        model.model_validate({})
    except ValidationError:
        return True
    return False


def _query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    required = set(schema.get("required", []))
    return [
        {
            "name": name,
            "in": "query",
            "required": name in required,
            "schema": {k: v for k, v in prop.items() if k not in ("title", "description")},
            **({"description": prop["description"]} if "description" in prop else {}),
        }
        for name, prop in schema.get("properties", {}).items()
        if name not in AUTH_QUERY
    ]


def _responses(
    rule: UrlRule, op: Operation, params: list[dict[str, Any]], access_rule: access.Rule | None, ref: Any
) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for status, answer in sorted(op.answers.items()):
        if isinstance(answer, type):
            doc = (answer.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
            responses[str(status)] = {
                "description": doc or op.summary,
                "content": {op.content or "application/json": {"schema": ref(answer)}},
            }
        else:
            responses[str(status)] = {"description": answer or op.summary}
            if answer and op.content not in (None, "application/json"):
                responses[str(status)]["content"] = {op.content: {"schema": {"type": "string"}}}
    errors: dict[int, str] = {}
    errors[400] = _BAD_INPUT  # an unknown query parameter is one, on every route
    if op.body is not None or op.upload:
        errors[413] = _TOO_LARGE
    if op.body is not None or op.upload or op.query is not None:
        errors[422] = _UNUSABLE
    if access_rule is not None and not access_rule.public:
        errors[401] = _COMMON_ERRORS[401]
        if access_rule.scope:
            errors[403] = _COMMON_ERRORS[403]
    if params or (access_rule is not None and access_rule.owned):
        names = ", ".join(p["name"] for p in params)
        errors[404] = f"Nothing is at {names}, or it is not the caller's" if names else "Not found"
    errors[503] = _COMMON_ERRORS[503]
    errors.update(op.errors)
    for status, description in sorted(errors.items()):
        if str(status) not in responses:
            responses[str(status)] = {
                "description": description,
                "content": {"application/json": {"schema": ref(shapes.Error)}},
            }
    return responses
