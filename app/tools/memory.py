"""The memory tool: save, search, list and delete notes that outlive the conversation.

Auto-approved. Every wrong argument is an error item that says what is allowed; the
storage lives in app/memory/store.py.
"""

from __future__ import annotations

from typing import Any

from app.memory import store
from app.settings import MEMORY_MAX_CONTENT_CHARS, MEMORY_MAX_DESCRIPTION_CHARS, MEMORY_MAX_LIMIT
from app.storage.models import Memory
from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.tools.core.tool import COORDINATOR

MEMORY_DEFAULT_LIMIT = 20  # search and list results when the call gives no limit

TOOL = "memory"
ACTIONS = ("save", "search", "delete", "list")
NO_STORAGE = "Error: memory has no storage in this context"


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    action = args.get("action")
    if action not in ACTIONS:
        refusal = f"Error: memory's action must be one of {', '.join(ACTIONS)}, not {_shown(action)}"
        return _refused(args, refusal)
    clean: dict[str, Any] = {"action": action}
    error = _check_filters(args, clean, ctx, defaults=action == "save")
    error = error or _check_limit(args, clean)
    if error is None and action in ("save", "delete"):
        error = _check_name(args, clean)
    if error is None and action == "save":
        error = _check_text(args, clean, "content", MEMORY_MAX_CONTENT_CHARS, required=True)
        error = error or _check_text(args, clean, "description", MEMORY_MAX_DESCRIPTION_CHARS)
    if error is None and action == "search":
        error = _check_text(args, clean, "query", MEMORY_MAX_CONTENT_CHARS, required=True)
    subject = clean.get("name") or clean.get("query") or ""
    header = " ".join(str(part) for part in (TOOL, action, subject[:80]) if part)
    if error is not None:
        return _refused(clean, error, header)
    return Preparation(clean, header, preview=_preview(clean), needs_approval=False)


def _check_filters(
    args: dict[str, Any], clean: dict[str, Any], ctx: ToolContext, defaults: bool
) -> str | None:
    """type and scope: defaults for a save, filters (when given) for the other actions."""
    scopes = tuple(s for s in store.SCOPES if not (ctx.kind == COORDINATOR and s == "workstream"))
    for key, allowed, default in (
        ("type", store.TYPES, store.DEFAULT_TYPE),
        ("scope", scopes, store.DEFAULT_SCOPE),
    ):
        value = args.get(key, default if defaults else None)
        if value is None:
            continue
        if value not in allowed:
            return f"Error: memory's {key} must be one of {', '.join(allowed)}, not {_shown(value)}"
        clean[key] = value
    return None


def _check_limit(args: dict[str, Any], clean: dict[str, Any]) -> str | None:
    limit = args.get("limit", MEMORY_DEFAULT_LIMIT)
    # bool is an int to Python, never to the model's schema
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MEMORY_MAX_LIMIT:
        return (
            f"Error: memory's limit must be a whole number from 1 to {MEMORY_MAX_LIMIT}, not {_shown(limit)}"
        )
    clean["limit"] = limit
    return None


def _check_name(args: dict[str, Any], clean: dict[str, Any]) -> str | None:
    name = args.get("name")
    if not isinstance(name, str) or not store.NAME.fullmatch(name):
        return f"Error: memory's name must be {store.NAME_RULE} characters, not {_shown(name)}"
    clean["name"] = name
    return None


def _check_text(
    args: dict[str, Any], clean: dict[str, Any], key: str, max_chars: int, required: bool = False
) -> str | None:
    value = args.get(key)
    if value is None and not required:
        clean[key] = ""
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        return f"Error: memory {clean['action']} needs '{key}', a non-empty string"
    if len(value) > max_chars:
        return f"Error: memory's {key} is {len(value)} characters; at most {max_chars}"
    clean[key] = value
    return None


def _preview(args: dict[str, Any]) -> str:
    if args["action"] == "save":
        return f"[{args['type']}, {args['scope']}] {args['name']}: {args['content'][:200]}"
    return ""


def _refused(args: dict[str, Any], error: str, header: str = TOOL) -> Preparation:
    return Preparation(dict(args), header, needs_approval=False, error=error)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    if ctx.db is None:
        return ToolOutcome(NO_STORAGE, is_error=True)
    view = store.view_of_workstream(ctx.db, ctx.ws_id)
    action = args["action"]
    filters = {key: args[key] for key in ("type", "scope") if key in args}
    if action == "save":
        try:
            row, created = store.save(
                ctx.db, view, args["name"], args["content"], args["description"], args["type"], args["scope"]
            )
        except store.GlobalMemoryError as exc:
            return ToolOutcome(f"Error: not saved: {exc}; save it with scope 'user' instead", is_error=True)
        done = "Saved" if created else "Updated"
        return ToolOutcome(f"{done} memory {row.name!r} ({row.type}, {row.scope}).")
    if action == "delete":
        return _delete(ctx, view, args["name"], args.get("scope"))
    if action == "search":
        found = store.search(ctx.db, view, args["query"], args["limit"], ctx.settings, **filters)
        return ToolOutcome(_listing(found) if found else f"No memories match {args['query']!r}.")
    shown = store.listed(ctx.db, view, args["limit"], **filters)
    return ToolOutcome(_listing(shown) if shown else "No memories saved yet.")


def _delete(ctx: ToolContext, view: store.View, name: str, scope: str | None) -> ToolOutcome:
    assert ctx.db is not None
    rows = store.named(ctx.db, view, name, scope)
    if not rows:
        where = f" in scope {scope}" if scope else ""
        error = f"Error: no memory named {name!r}{where}; 'list' shows the saved ones"
        return ToolOutcome(error, is_error=True)
    if len(rows) > 1:
        scopes = ", ".join(sorted(r.scope for r in rows))
        error = f"Error: {name!r} names a memory in each of {scopes}: say which scope"
        return ToolOutcome(error, is_error=True)
    try:
        deleted = store.delete(ctx.db, view, rows[0].id)
    except store.GlobalMemoryError as exc:
        return ToolOutcome(f"Error: not deleted: {exc}", is_error=True)
    if not deleted:
        return ToolOutcome(f"Error: no memory named {name!r}; it was deleted meanwhile", is_error=True)
    return ToolOutcome(f"Deleted memory {name!r} ({rows[0].scope}).")


def _listing(memories: list[Memory]) -> str:
    lines = []
    for m in memories:
        about = f": {m.description}" if m.description else ""
        lines.append(f"- {m.name} [{m.type}, {m.scope}] {m.updated_at:%Y-%m-%d %H:%M}{about}\n  {m.content}")
    return "\n".join(lines)
