"""A skill's fields as a person or a file gives them, checked; and a skill's content rendered.

`checked(body)` is shared by the admin API and `skills import`: a wrong field is a
`BadRequestError` naming it, never a half-stored skill.
"""

from __future__ import annotations

import platform
import re
from typing import Any

from app.errors import BadRequestError, check_text

SKILL_MAX_CONTENT_CHARS = 100_000

RISK_LEVELS = ("low", "medium", "high", "critical")
WARNED_RISKS = ("high", "critical")
ACTIVATIONS = ("manual", "default")  # default: new workstreams created without a skill get it
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
NAME_RULE = "1-64 letters, digits, '_', '.' or '-', starting with a letter or digit"
MAX_DESCRIPTION_CHARS = 1_000
MAX_CATEGORY_CHARS = 100
MAX_TAGS = 20
MAX_TAG_CHARS = 50
EDITABLE = ("name", "description", "content", "tags", "category", "risk_level", "activation", "enabled")
_PLACEHOLDER = re.compile(r"\{\{\s*(model|ws_id|node_id)\s*\}\}")


def checked(body: dict[str, Any], partial: bool = False) -> dict[str, Any]:
    """The editable fields of `body`, validated; with `partial`, only those given."""
    unknown = sorted(set(body) - set(EDITABLE))
    if unknown:
        raise BadRequestError(
            f"{unknown[0]}: not a skill field (fields: {', '.join(EDITABLE)})", field=str(unknown[0])[:100]
        )
    out: dict[str, Any] = {}
    for key in EDITABLE:
        if key in body:
            out[key] = _CHECKS[key](key, body[key])
        elif not partial and key in ("name", "content"):
            raise BadRequestError(f"{key}: required", field=key)
    return out


def _text(key: str, value: Any, max_chars: int, required: bool = False) -> str:
    if not isinstance(value, str):
        raise BadRequestError(f"{key}: expected string", field=key)
    check_text(key, value, max_chars)
    if required and not value.strip():
        raise BadRequestError(f"{key}: must not be empty", field=key)
    return value


def _name(key: str, value: Any) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise BadRequestError(f"name: must be {NAME_RULE}", field="name")
    return value


def _one_of(allowed: tuple[str, ...]) -> Any:
    def check(key: str, value: Any) -> str:
        if value not in allowed:
            raise BadRequestError(f"{key}: must be one of {', '.join(allowed)}", field=key)
        return str(value)

    return check


def _tags(key: str, value: Any) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_TAGS:
        raise BadRequestError(f"tags: expected a list of at most {MAX_TAGS} strings", field="tags")
    return [_text("tags", tag, MAX_TAG_CHARS, required=True) for tag in value]


def _enabled(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise BadRequestError("enabled: expected boolean", field="enabled")
    return value


_CHECKS: dict[str, Any] = {
    "name": _name,
    "description": lambda k, v: _text(k, v, MAX_DESCRIPTION_CHARS),
    "content": lambda k, v: _text(k, v, SKILL_MAX_CONTENT_CHARS, required=True),
    "tags": _tags,
    "category": lambda k, v: _text(k, v, MAX_CATEGORY_CHARS),
    "risk_level": _one_of(RISK_LEVELS),
    "activation": _one_of(ACTIVATIONS),
    "enabled": _enabled,
}


def render(content: str, model: str, ws_id: str, node_id: str | None = None) -> str:
    """`{{model}}`, `{{ws_id}}` and `{{node_id}}` filled in; any other braces left alone."""
    values = {"model": model, "ws_id": ws_id, "node_id": node_id or platform.node()}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], content)


def risk_warning(name: str, risk_level: str) -> str | None:
    if risk_level not in WARNED_RISKS:
        return None
    return (
        f"Warning: skill {name!r} is rated {risk_level} risk: its instructions may lead to actions "
        "with serious side effects. Follow them with care and ask the user before anything irreversible."
    )
