"""`POST /v1/api/workstreams/{id}/compact`: summarise the conversation's older messages now
(app/compaction/manual.py)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify

from app.compaction import manual
from app.runtime import Runtime
from app.web import shapes
from app.web.contract import operation
from app.web.requests import path_id

compaction = Blueprint("compaction", __name__, url_prefix="/v1/api/workstreams/<ws_id>")


def _rt() -> Runtime:
    return current_app.extensions["runtime"]


@compaction.post("/compact")
@operation(
    "Compact: summarise the conversation's older messages now (they stay stored)",
    answers={202: shapes.CompactStarted},
    errors={409: "Nothing to summarise yet: the newest messages always stay whole"},
)
def compact(ws_id: str) -> Any:
    path_id("workstream", ws_id)
    return jsonify(manual.request(_rt(), ws_id)), 202
