"""A run's contract as the runs, triggers and schedules routes take it (their shapes are in
app/web/shapes.py): the policy, and the caller's metadata, whose limits JSON Schema cannot say."""

from __future__ import annotations

import json
from typing import Any

from app.errors import PayloadTooLargeError, UnprocessableError, unstorable
from app.jobs import tool_outputs
from app.jobs.contract import MAX_METADATA_BYTES, Policy
from app.runtime import Runtime
from app.storage.models import WebhookEndpoint
from app.tools import client_tools
from app.users import ownership
from app.users.principal import Principal
from app.web import shapes
from app.web.contract import operation


def policy(given: shapes.Policy | None) -> Policy:
    if given is None:
        return Policy()
    return Policy(
        tools=tuple(dict.fromkeys(given.tools or [])),
        auto_approve=bool(given.auto_approve),
        deny_unapproved=bool(given.deny_unapproved),
    )


def metadata(given: dict[str, Any] | None) -> dict[str, Any]:
    """The caller's own JSON object, kept and shown back; strings in it must be storable."""
    given = given or {}
    if problem := unstorable("metadata", given):
        raise UnprocessableError(problem, field="metadata")
    size = len(json.dumps(given, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_METADATA_BYTES:
        message = f"metadata: {size} bytes; the limit is {MAX_METADATA_BYTES}"
        raise PayloadTooLargeError(message, field="metadata")
    return given


def tools(rt: Runtime, given: list[shapes.ClientTool] | None, where: str = "tools") -> list[dict[str, Any]]:
    """A client's declared tools, as stored: a 422 naming the tool and field for a name a
    built-in has, one given twice, a parameters schema that is not an object schema or is
    past the limits."""
    declared = [t.model_dump(exclude_none=True) for t in given or []]
    try:
        return client_tools.check(declared, rt.registry.builtin_tool_names, where)
    except client_tools.DeclarationError as exc:
        raise UnprocessableError(str(exc), field=exc.field) from None


def webhook(rt: Runtime, who: Principal, given: str | None) -> str | None:
    """One of the caller's webhook endpoints (another's, or none, is a 404), by its id."""
    if given is None:
        return None
    return ownership.owned_row(rt, who, WebhookEndpoint, given, "webhook endpoint").id


def submitting(whose: str) -> Any:
    """The declaration of a route that takes `whose` client tool calls' outputs (a run's, a
    workstream's): one answer, one set of refusals."""
    return operation(
        f"Submit the outputs of {whose} waiting client tool calls; the turn goes on",
        body=shapes.ToolOutputs,
        answers={200: shapes.ToolOutputsTaken},
        errors={
            409: "A call named is not waiting for an output (the answer lists those that are)",
            422: "A waiting call's output is missing: every one comes in one request",
        },
        examples={"one": {"tool_outputs": [{"call_id": "call_1", "output": "42"}]}},
    )


def outputs(body: shapes.ToolOutputs) -> list[tool_outputs.Output]:
    return [tool_outputs.Output(o.call_id, o.output, bool(o.is_error)) for o in body.tool_outputs]
