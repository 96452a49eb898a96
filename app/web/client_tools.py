"""A workstream's client tools (docs/runs.md, "Client tools"): declare them, see which calls
wait, submit their outputs. A run's are declared with the run (app/web/runs.py)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify

from app.engine.life import workstreams
from app.jobs import tool_outputs
from app.runtime import Runtime
from app.storage.models import Turn
from app.tools import client_tools as declarations
from app.web import run_fields, shapes
from app.web.contract import operation
from app.web.requests import path_id

client_tools = Blueprint("client_tools", __name__, url_prefix="/v1/api/workstreams/<ws_id>")


def _rt() -> Runtime:
    return current_app.extensions["runtime"]


def _view(rt: Runtime, ws_id: str) -> dict[str, Any]:
    ws = workstreams.get(rt, ws_id)
    with rt.db.reader() as s:
        turn = s.get(Turn, ws.active_turn_id) if ws.active_turn_id else None
        waiting = tool_outputs.shown(tool_outputs.waiting_rows(s, turn))
    required = {"type": "submit_tool_outputs", "tool_calls": waiting} if waiting else None
    return {"tools": ws.client_tools, "required_action": required}


@client_tools.get("/client_tools")
@operation(
    "The workstream's client tools, and its calls waiting for their outputs",
    answers={200: shapes.ClientToolsView},
)
def get_client_tools(ws_id: str) -> Any:
    path_id("workstream", ws_id)
    return jsonify(_view(_rt(), ws_id)), 200


@client_tools.put("/client_tools")
@operation(
    "Declare the workstream's client tools (replacing those it had; [] removes them)",
    body=shapes.WorkstreamClientTools,
    answers={200: shapes.ClientToolsView},
    errors={
        422: "A name a built-in tool has, a name given twice, or parameters that are not an object schema"
    },
    examples={
        "one": {
            "tools": [
                {
                    "name": "lookup_order",
                    "description": "Look an order up in our shop",
                    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
                }
            ]
        }
    },
)
def put_client_tools(ws_id: str, body: shapes.WorkstreamClientTools) -> Any:
    path_id("workstream", ws_id)
    rt = _rt()
    declared = run_fields.tools(rt, body.tools)
    workstreams.get(rt, ws_id)  # a 404 for one that is gone
    with rt.db.session() as s:
        declarations.declare(s, ws_id, declared)
    return jsonify(_view(rt, ws_id)), 200


@client_tools.post("/tool_outputs")
@run_fields.submitting("the workstream's")
def submit_tool_outputs(ws_id: str, body: shapes.ToolOutputs) -> Any:
    path_id("workstream", ws_id)
    rt = _rt()
    ws = workstreams.get(rt, ws_id)
    return jsonify({"call_ids": tool_outputs.submit(rt, ws.active_turn_id, run_fields.outputs(body))}), 200
