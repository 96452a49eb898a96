"""/v1/api/policies: an admin's tool policy rules (thin routes over app.policies.store)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify

from app.policies import store
from app.storage.database import Database
from app.web import shapes
from app.web.access import principal
from app.web.contract import operation
from app.web.requests import path_id

policies = Blueprint("policies", __name__, url_prefix="/v1/api/policies")


def _db() -> Database:
    return current_app.extensions["runtime"].db


@policies.get("")
@operation("Every tool policy rule, oldest first", answers={200: shapes.PolicyList})
def list_policies() -> Any:
    return jsonify(policies=store.list_all(_db()))


@policies.post("")
@operation(
    "Add a tool policy rule: it holds from the next model step of every workstream it covers",
    body=shapes.NewPolicy,
    answers={201: shapes.PolicyRule},
    errors={
        409: f"There are {store.MAX_RULES} rules already",
        422: "A pattern the service will not match with, or a user nobody has",
    },
    examples={
        "no rm -rf /": {"effect": "deny", "tool": "bash", "command": "rm -rf /*", "reason": "never"},
        "ask before a push": {"effect": "ask", "tool": "bash", "command": "git push*"},
        "web tools for alice": {"effect": "allow", "tool": "web_*", "user": "alice"},
    },
)
def create_policy(body: shapes.NewPolicy) -> Any:
    rule = store.create(_db(), created_by=principal().name, **body.given())
    return jsonify(rule), 201


@policies.delete("/<policy_id>")
@operation("Delete a tool policy rule", answers={200: shapes.PolicyDeleted})
def delete_policy(policy_id: str) -> Any:
    store.delete(_db(), path_id("policy rule", policy_id))
    return jsonify(deleted=policy_id)
