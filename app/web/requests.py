"""Reading request bodies: a wrong body is a 400 that names the field."""

from __future__ import annotations

from typing import Any

from flask import request

from app.errors import BadRequestError

_MISSING = object()


def json_body() -> dict[str, Any]:
    body = request.get_json(silent=True, force=True) if request.data else {}
    if body is None:
        raise BadRequestError("body: not valid JSON", field="body")
    if not isinstance(body, dict):
        raise BadRequestError("body: expected a JSON object", field="body")
    return body


def field(
    body: dict[str, Any],
    name: str,
    kind: type | tuple[type, ...],
    *,
    required: bool = False,
    default: Any = None,
) -> Any:
    """`body[name]` checked against `kind` (bool is never taken for int, nor int for bool)."""
    value = body.get(name, _MISSING)
    if value is _MISSING or value is None:
        if required:
            raise BadRequestError(f"{name}: required", field=name)
        return default
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        raise BadRequestError(f"{name}: expected {_names(kinds)}, got boolean", field=name)
    if not isinstance(value, kinds):
        raise BadRequestError(f"{name}: expected {_names(kinds)}, got {_json_type(value)}", field=name)
    return value


def _names(kinds: tuple[type, ...]) -> str:
    return " or ".join(
        {str: "string", bool: "boolean", int: "integer", dict: "object"}.get(k, k.__name__) for k in kinds
    )


def _json_type(value: Any) -> str:
    return {
        str: "string",
        bool: "boolean",
        int: "integer",
        float: "number",
        list: "array",
        dict: "object",
    }.get(type(value), type(value).__name__)
