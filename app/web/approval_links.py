"""/v1/hooks/approvals/{ws_id}: what a pushed approval link shows and decides (public: the link's
signature is the permission; app/approval_links.py)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify

from app import approval_links as links
from app.runtime import Runtime
from app.web import shapes
from app.web.contract import operation
from app.web.requests import path_id

approval_links = Blueprint("approval_links", __name__, url_prefix="/v1/hooks/approvals")

_ERRORS = {404: "The link is not one (altered) or has expired", 409: "Those calls are no longer waiting"}


@approval_links.url_value_preprocessor
def _check_ws_id(_endpoint: str | None, values: dict[str, Any] | None) -> None:
    if values and "ws_id" in values:
        path_id("workstream", values["ws_id"])


def _rt() -> Runtime:
    return current_app.extensions["runtime"]


def _query(query: shapes.ApprovalLink) -> dict[str, str]:
    return {"turn": query.turn, "step": query.step, "exp": query.exp, "sig": query.sig}


@approval_links.get("/<ws_id>")
@operation(
    "The calls a pushed approval link decides (public: the signature is the permission)",
    query=shapes.ApprovalLink,
    answers={200: shapes.LinkedApproval},
    errors=_ERRORS,
)
def show(ws_id: str, query: shapes.ApprovalLink) -> Any:
    return jsonify(links.view(_rt(), ws_id, _query(query))), 200


@approval_links.post("/<ws_id>")
@operation(
    "Decide the calls of a pushed approval link, as the workstream's owner (public: the signature "
    "is the permission)",
    query=shapes.ApprovalLink,
    body=shapes.ApprovalLinkDecision,
    answers={200: shapes.Decided},
    errors=_ERRORS,
    examples={
        "approve": {"approved": True},
        "deny with a reason": {"approved": False, "feedback": "not now"},
    },
)
def decide(ws_id: str, query: shapes.ApprovalLink, body: shapes.ApprovalLinkDecision) -> Any:
    decided = links.decide(_rt(), ws_id, _query(query), body.approved, body.feedback, body.call_id)
    return jsonify(decided), 200
