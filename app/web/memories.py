"""/v1/api/memories: read, change and delete the caller's memories (thin routes over app.memory)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify

from app.errors import ForbiddenError, NotFoundError
from app.memory import owners, store
from app.settings import MAX_ID_CHARS, MEMORY_MAX_LIMIT
from app.storage.database import Database
from app.web import shapes
from app.web.access import principal
from app.web.contract import operation
from app.web.requests import path_id

memories = Blueprint("memories", __name__, url_prefix="/v1/api/memories")


def _db() -> Database:
    return current_app.extensions["runtime"].db


def _view() -> store.View:
    who = principal()
    return store.View(owners.owner_of_principal(who), may_change_global=who.is_operator or who.is_admin)


@memories.get("")
@operation(
    "The caller's memories (and the global ones), newest first; with q, the best matches",
    query=shapes.MemoryFilter,
    answers={200: shapes.MemoryList},
)
def list_memories(query: shapes.MemoryFilter) -> Any:
    filters: dict[str, Any] = {}
    if query.type is not None:
        filters["type"] = query.type
    if query.scope is not None:
        filters["scope"] = query.scope
    if query.workstream is not None:
        filters["ws_id"] = query.workstream
    limit = query.limit or MEMORY_MAX_LIMIT
    view = _view()
    found = (
        store.search(_db(), view, query.q, limit, **filters)
        if query.q and query.q.strip()
        else store.listed(_db(), view, limit, **filters)
    )
    return jsonify(memories=[store.as_dict(m) for m in found])


@memories.get("/<memory_id>")
@operation("One memory", answers={200: shapes.Memory})
def get_memory(memory_id: str) -> Any:
    return jsonify(store.as_dict(_found(store.get(_db(), _view(), path_id("memory", memory_id)), memory_id)))


@memories.put("/<memory_id>")
@operation(
    "Change a memory's content, description or type",
    body=shapes.MemoryChange,
    answers={200: shapes.Memory},
    examples={"reworded": {"content": "Prefers tabs", "type": "user"}},
    errors={403: "A global memory: only an administrator changes it"},
)
def put_memory(memory_id: str, body: shapes.MemoryChange) -> Any:
    changes: dict[str, str] = body.given()
    try:
        row = store.update(_db(), _view(), path_id("memory", memory_id), changes)
    except store.GlobalMemoryError as exc:
        raise ForbiddenError(str(exc)) from None
    return jsonify(store.as_dict(_found(row, memory_id)))


@memories.delete("/<memory_id>")
@operation(
    "Delete a memory",
    answers={200: shapes.MemoryDeleted},
    errors={403: "A global memory: only an administrator deletes it"},
)
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
