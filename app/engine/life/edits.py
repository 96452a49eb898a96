"""A person's edit of a pending call: the arguments it runs with instead of the model's.

The edit is checked where the decision is taken, against what the tool declares (the argument
names it takes, its parameters' JSON schema), so a wrong edit is refused to the person who made
it (422) and never reaches the model. The call row keeps the model's arguments beside the ones
that ran (`ToolCall.original_args`); the worker prepares the edited call as it prepared the
model's (the handler's own checks, `pipeline.prepare_arguments`); and the model is told, in the
turn's feedback after the results, that its call was changed and what ran.
"""

from __future__ import annotations

import json
from typing import Any

from app.errors import UnprocessableError
from app.runtime import Runtime
from app.storage.models import ToolCall, Workstream
from app.tools.core import toolset as toolsets

MAX_SHOWN_ARGUMENTS = 4000  # characters of the edited arguments the model's note repeats
MAX_ERROR_CHARS = 300  # of a schema error's message (it quotes the value, which may be huge)


def check(rt: Runtime, ws: Workstream, row: ToolCall, arguments: dict[str, Any]) -> dict[str, Any]:
    """`arguments` for `row`'s tool, or UnprocessableError saying what the tool would refuse."""
    tool = toolsets.resolve(rt.registry, rt.tool_sources, row.func_name, ws.kind, row.catalog_version)
    if isinstance(tool, str):  # its source went away: nothing to check the edit against, or to run it
        raise UnprocessableError(f"arguments: cannot edit this call: {tool}", field="arguments")
    definition = tool.definition
    if unknown := definition.unknown_arguments(arguments, ws.kind):
        takes = ", ".join(definition.parameters_for(ws.kind).get("properties", {})) or "nothing"
        names = ", ".join(map(repr, unknown))
        raise UnprocessableError(
            f"arguments: {row.func_name} does not take {names}; it takes: {takes}", field="arguments"
        )
    if error := _schema_error(definition.parameters_for(ws.kind), arguments):
        raise UnprocessableError(f"arguments: {error}", field="arguments")
    return arguments


def _schema_error(schema: Any, arguments: dict[str, Any]) -> str | None:
    """The most telling way `arguments` fails `schema`, in a line; None when it passes, or when
    the schema is one jsonschema cannot read (an MCP server's: the worker's preparation of the
    call still checks what the handler needs). jsonschema loads on the first edit, not at start."""
    from jsonschema import SchemaError
    from jsonschema.exceptions import best_match
    from jsonschema.validators import validator_for

    try:
        validator = validator_for(schema)(schema)
        error = best_match(validator.iter_errors(arguments))
    except (SchemaError, RecursionError):
        return None
    except Exception:  # noqa: BLE001 - a schema from outside (a bad `pattern`, a `$ref` to nowhere)
        return None
    if error is None:
        return None
    where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    message = (
        error.message if len(error.message) <= MAX_ERROR_CHARS else error.message[:MAX_ERROR_CHARS] + "…"
    )
    return f"{where.lstrip('.') + ': ' if where else ''}{message}"


def note(by: str, row: ToolCall) -> str:
    """What the model reads after the results: its call `row` ran with `by`'s arguments."""
    shown = json.dumps(row.args, ensure_ascii=False)
    if len(shown) > MAX_SHOWN_ARGUMENTS:
        shown = shown[:MAX_SHOWN_ARGUMENTS] + "…"
    return (
        f"{by} changed the arguments of your {row.func_name} call {row.call_id} before approving it; "
        f"it ran with these instead of yours: {shown}"
    )
