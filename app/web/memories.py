"""/v1/api/memories: read, change and delete the caller's memories (thin routes over app.memory)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify, request

from app.errors import BadRequestError, ForbiddenError, NotFoundError
from app.memory import owners, store
from app.settings import (
    MAX_ID_CHARS,
    MEMORY_MAX_CONTENT_CHARS,
    MEMORY_MAX_DESCRIPTION_CHARS,
    MEMORY_MAX_LIMIT,
)
from app.storage.database import Database
from app.web.access import principal
from app.web.requests import field, json_body, path_id

memories = Blueprint("memories", __name__, url_prefix="/v1/api/memories")
EDITABLE = ("content", "description", "type")


def _db() -> Database:
    return current_app.extensions["runtime"].db


def _view() -> store.View:
    who = principal()
    return store.View(owners.owner_of_principal(who), may_change_global=who.is_operator or who.is_admin)


@memories.get("")
def list_memories() -> Any:
    args = {key: request.args.get(key) for key in ("type", "scope", "workstream", "q", "limit")}
    for key, value in args.items():
        if value is not None:
            field(args, key, str, max_chars=MEMORY_MAX_CONTENT_CHARS)  # no NUL, no lone surrogate
    filters: dict[str, Any] = {}
    for key, allowed in (("type", store.TYPES), ("scope", store.SCOPES)):
        if args[key] is not None:
            if args[key] not in allowed:
                raise BadRequestError(f"{key}: must be one of {', '.join(allowed)}", field=key)
            filters[key] = args[key]
    if args["workstream"] is not None:
        filters["ws_id"] = path_id("workstream", args["workstream"])
    limit = _limit(args["limit"])
    view = _view()
    found = (
        store.search(_db(), view, args["q"], limit, **filters)
        if args["q"] and args["q"].strip()
        else store.listed(_db(), view, limit, **filters)
    )
    return jsonify(memories=[store.as_dict(m) for m in found])


def _limit(value: str | None) -> int:
    if value is None:
        return MEMORY_MAX_LIMIT
    if not value.isdecimal() or not 1 <= int(value) <= MEMORY_MAX_LIMIT:
        raise BadRequestError(f"limit: a whole number from 1 to {MEMORY_MAX_LIMIT}", field="limit")
    return int(value)


@memories.get("/<memory_id>")
def get_memory(memory_id: str) -> Any:
    return jsonify(store.as_dict(_found(store.get(_db(), _view(), path_id("memory", memory_id)), memory_id)))


@memories.put("/<memory_id>")
def put_memory(memory_id: str) -> Any:
    body = json_body()
    unknown = sorted(set(body) - set(EDITABLE))
    if unknown:
        error = f"{unknown[0][:100]}: cannot be changed (fields: {', '.join(EDITABLE)})"
        raise BadRequestError(error, field="body")
    changes: dict[str, str] = {}
    content = field(body, "content", str, max_chars=MEMORY_MAX_CONTENT_CHARS)
    if content is not None:
        if not content.strip():
            raise BadRequestError("content: must not be empty", field="content")
        changes["content"] = content
    description = field(body, "description", str, max_chars=MEMORY_MAX_DESCRIPTION_CHARS)
    if description is not None:
        changes["description"] = description
    type_ = field(body, "type", str)
    if type_ is not None:
        if type_ not in store.TYPES:
            raise BadRequestError(f"type: must be one of {', '.join(store.TYPES)}", field="type")
        changes["type"] = type_
    try:
        row = store.update(_db(), _view(), path_id("memory", memory_id), changes)
    except store.GlobalMemoryError as exc:
        raise ForbiddenError(str(exc)) from None
    return jsonify(store.as_dict(_found(row, memory_id)))


@memories.delete("/<memory_id>")
def delete_memory(memory_id: str) -> Any:
    try:
        deleted = store.delete(_db(), _view(), path_id("memory", memory_id))
    except store.GlobalMemoryError as exc:
        raise ForbiddenError(str(exc)) from None
    if not deleted:
        raise NotFoundError(f"no memory {memory_id[:MAX_ID_CHARS]!r}")
    return jsonify(deleted=memory_id)


def _found(row: Any, memory_id: str) -> Any:
    if row is None:
        raise NotFoundError(f"no memory {memory_id[:MAX_ID_CHARS]!r}")
    return row
