"""Client tools: tools a run's or a workstream's API client declares and answers itself.

A call to one is prepared like any tool's (its arguments checked against the declared schema)
and needs no approval; its execute phase only says it waits (`WAITING_ON`), so the call is
stored `waiting` and the turn parks as a sub-agent's call parks it: no worker holds it until
the client's output arrives (app/jobs/tool_outputs.py finishes it). The tools reach a model
step as one more tool source, `client`, whose version is a digest of the declarations, so a
batch on another worker resolves the tool the model saw.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
from sqlalchemy import update
from sqlmodel import Session, col, select

from app.errors import unstorable
from app.events import EventType
from app.nesting import is_too_deep
from app.storage.models import Run, Workstream
from app.tools import tool_search
from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.tools.core.tool import TOOL_NAME_PATTERN, Tool, ToolDefinition
from app.tools.core.toolset import Catalog

SOURCE = "client"  # the tool source's name, stored in its calls' catalog version
WAITING_ON = "client tool"  # what a client tool's waiting call waits on
REQUIRES_ACTION = EventType.REQUIRES_ACTION  # the event a waiting call publishes

MAX_TOOLS = 32  # declared by one run or one workstream
MAX_DESCRIPTION_CHARS = 4000
MAX_SCHEMA_BYTES = 16 * 1024  # one tool's parameters, as compact JSON
MAX_SCHEMA_DEPTH = 16
# Offered to both kinds a person or a client talks to; a task sub-agent gets none.
_META = {"coordinator": True, "interactive": True}


class DeclarationError(ValueError):
    """A declared tool the service cannot offer; `field` names where (`tools[2].name`)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def check(
    declared: Sequence[dict[str, Any]], taken: frozenset[str], where: str = "tools"
) -> list[dict[str, Any]]:
    """The declarations as stored (name, description, parameters), or DeclarationError: a name
    that is not 1-64 letters, digits, '_' or '-', one taken by a built-in tool (`taken`) or
    declared twice, a parameters schema that is not a valid JSON schema of type object, or one
    past the size limits."""
    if len(declared) > MAX_TOOLS:
        raise DeclarationError(f"{where}: at most {MAX_TOOLS} tools", where)
    seen: set[str] = set()
    out = []
    for n, tool in enumerate(declared):
        at = f"{where}[{n}]"
        name, description = tool["name"], tool.get("description") or ""
        parameters = tool.get("parameters") or {"type": "object", "properties": {}}
        if not TOOL_NAME_PATTERN.match(name):
            raise DeclarationError(f"{at}.name: 1-64 letters, digits, '_' or '-'", f"{at}.name")
        if name in taken or name == tool_search.NAME or name.startswith("mcp__"):
            raise DeclarationError(f"{at}.name: {name!r} is the name of a tool the service has", f"{at}.name")
        if name in seen:
            raise DeclarationError(f"{at}.name: {name!r} is declared twice", f"{at}.name")
        seen.add(name)
        if len(description) > MAX_DESCRIPTION_CHARS:
            message = f"{at}.description: at most {MAX_DESCRIPTION_CHARS} characters"
            raise DeclarationError(message, f"{at}.description")
        out.append({"name": name, "description": description, "parameters": _schema(parameters, at)})
    return out


def _schema(parameters: dict[str, Any], at: str) -> dict[str, Any]:
    field = f"{at}.parameters"
    if problem := unstorable(field, parameters):
        raise DeclarationError(problem, field)
    try:
        text = json.dumps(parameters, separators=(",", ":"), ensure_ascii=False)
        size = len(text.encode())
    except ValueError:  # not JSON at all (a circular value cannot come from a request)
        raise DeclarationError(f"{field}: not storable JSON", field) from None
    if is_too_deep(text, MAX_SCHEMA_DEPTH):
        raise DeclarationError(f"{field}: nested deeper than {MAX_SCHEMA_DEPTH} levels", field)
    if size > MAX_SCHEMA_BYTES:
        raise DeclarationError(f"{field}: {size} bytes; the limit is {MAX_SCHEMA_BYTES}", field)
    if parameters.get("type") != "object":
        raise DeclarationError(f'{field}: must be a JSON schema with "type": "object"', field)
    try:
        jsonschema.Draft202012Validator.check_schema(parameters)
    except jsonschema.SchemaError as exc:
        raise DeclarationError(f"{field}: not a valid JSON schema: {exc.message[:200]}", field) from None
    if problem := _outside_reference(parameters):
        raise DeclarationError(f"{field}: {problem}", field)
    return parameters


def _outside_reference(schema: Any) -> str | None:
    """What would make checking arguments reach outside the schema or fail: a `$ref` to
    anything but a place in the schema itself (the service fetches nothing for a client), a
    `pattern` that is no regular expression."""
    if isinstance(schema, list):
        return next((p for p in map(_outside_reference, schema) if p), None)
    if not isinstance(schema, dict):
        return None
    for key, value in schema.items():
        if key in ("$ref", "$dynamicRef", "$schema", "$id") and isinstance(value, str):
            if key in ("$ref", "$dynamicRef") and not value.startswith("#"):
                return f"{key} {value[:80]!r}: only references inside the schema (#/...)"
            if key in ("$schema", "$id"):
                return f"{key}: not taken (the schema is read as JSON Schema 2020-12)"
        if key == "pattern" and isinstance(value, str) and not _compiles(value):
            return f"pattern {value[:80]!r} is not a regular expression"
        if problem := _outside_reference(value):
            return problem
    return None


def _compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


# -- the tool a model step sees ------------------------------------------------------------


class _Handler:
    """Prepare checks the model's arguments against the declared schema; execute only waits."""

    def __init__(self, name: str, parameters: dict[str, Any]) -> None:
        self._name = name
        self._validator = jsonschema.Draft202012Validator(parameters)

    def prepare(self, args: dict[str, Any], ctx: ToolContext) -> Preparation:
        problem = next(iter(self._validator.iter_errors(args)), None)
        shown = json.dumps(args, ensure_ascii=False)
        if problem is not None:
            where = "/".join(str(p) for p in problem.absolute_path) or "(arguments)"
            error = f"Error: the arguments do not match the tool's schema at {where}: {problem.message[:300]}"
            return Preparation(args, header="client tool", error=error, needs_approval=False)
        return Preparation(args, header=f"client tool {shown[:120]}", preview=shown, needs_approval=False)

    def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        ctx.publish(REQUIRES_ACTION, {"name": self._name, "arguments": args})
        return ToolOutcome("", waiting_on=WAITING_ON)


@dataclass(frozen=True)
class ClientSource:
    """The declared tools of one turn (its workstream's, then its run's) as a tool source."""

    declared: tuple[dict[str, Any], ...]
    name: str = SOURCE
    always_in_view: bool = True  # the client named them for this work: never deferred by tool search

    @property
    def version(self) -> str:
        text = json.dumps(self.declared, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def catalog(self) -> Catalog:
        tools = tuple(_tool(d, self.version) for d in self.declared)
        return Catalog(version=self.version, tools=tools)

    def catalog_at(self, version: str) -> Catalog | None:
        return self.catalog() if version == self.version else None


def _tool(declared: dict[str, Any], version: str) -> Tool:
    definition = ToolDefinition(
        name=declared["name"],
        description=declared["description"] or f"{declared['name']} (answered by the client)",
        parameters=declared["parameters"],
        meta=_META,
    )
    handler = _Handler(declared["name"], declared["parameters"])
    return Tool(definition, handler, source=SOURCE, version=version)


def declared_for(s: Session, ws: Workstream, turn_id: str | None) -> list[dict[str, Any]]:
    """The tools a turn's client declared: its workstream's, then its run's (a run's tool of
    the same name stands in for the workstream's)."""
    run_tools: list[dict[str, Any]] = []
    if turn_id is not None:
        run_tools = list(s.exec(select(Run.tools).where(Run.turn_id == turn_id)).first() or [])
    names = {t["name"] for t in run_tools}
    return [t for t in ws.client_tools if t["name"] not in names] + list(run_tools)


def sources(base: Sequence[Any], s: Session, ws: Workstream, turn_id: str | None) -> list[Any]:
    """`base` (the service's tool sources) and, when the turn's client declared any, theirs."""
    declared = declared_for(s, ws, turn_id)
    return [*base, ClientSource(tuple(declared))] if declared else list(base)


def is_client_call(catalog_version: str | None) -> bool:
    return bool(catalog_version) and str(catalog_version).startswith(SOURCE + ":")


def declare(s: Session, ws_id: str, declared: list[dict[str, Any]]) -> None:
    """The workstream's client tools from now on (checked by `check`): its next model step
    offers them; calls to the tools it had keep their wait."""
    s.exec(update(Workstream).where(col(Workstream.id) == ws_id).values(client_tools=declared))
