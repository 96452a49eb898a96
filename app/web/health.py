"""GET /health: process health, Redis and database reachability, worker count, the sandbox."""

from __future__ import annotations

import os
from typing import Any

import redis
from flask import Blueprint, current_app, jsonify
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from app import presence
from app.mcp import status as mcp_status
from app.runtime import Runtime
from app.web import shapes
from app.web.contract import operation

health = Blueprint("health", __name__)


@health.get("/health")
@operation(
    "Process, Redis, database and worker health, and whether commands run jailed (public)",
    answers={200: shapes.Health, 503: shapes.Health},
)
def check() -> Any:
    rt: Runtime = current_app.extensions["runtime"]
    body: dict[str, Any] = {"process": {"pid": os.getpid(), "ok": True}}
    body["redis"] = _redis_ok(rt)
    body["database"] = _database_ok(rt)
    body["workers"] = _workers(rt) if body["redis"]["ok"] else {"ok": False, "count": 0}
    body["sandbox"] = _sandbox(rt)
    # This web node's data root is where workers make and find folders (app/sandbox/folders.py).
    body["data_root"] = {"shared": rt.data_root_problem is None, "problem": rt.data_root_problem}
    if body["redis"]["ok"]:
        body["mcp"] = _mcp(rt)
    body["ok"] = body["redis"]["ok"] and body["database"]["ok"]
    return jsonify(body), 200 if body["ok"] else 503


def _redis_ok(rt: Runtime) -> dict[str, Any]:
    try:
        rt.redis.ping()
        return {"ok": True}
    except redis.RedisError as exc:
        return {"ok": False, "error": type(exc).__name__}


def _database_ok(rt: Runtime) -> dict[str, Any]:
    try:
        with rt.db.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        return {"ok": True, "dialect": rt.db.engine.dialect.name}
    except SQLAlchemyError as exc:
        return {"ok": False, "error": type(exc).__name__}


def _sandbox(rt: Runtime) -> dict[str, Any]:
    """Whether commands run jailed (app/sandbox/enforcement.py); not part of `ok`: an unjailed
    service still serves, and says so here."""
    try:
        return rt.sandbox.status().as_json()
    except SQLAlchemyError as exc:  # whether users exist is read from the database
        return {"enforced": False, "mode": rt.settings.sandbox.mode, "error": type(exc).__name__}


def _workers(rt: Runtime) -> dict[str, Any]:
    try:
        count = presence.count(rt.redis)
    except redis.RedisError as exc:
        return {"ok": False, "count": 0, "error": type(exc).__name__}
    return {"ok": count > 0, "count": count}


def _mcp(rt: Runtime) -> dict[str, Any]:
    """Connected MCP servers, their resources (templates included) and prompts, as workers report."""
    try:
        return mcp_status.summary(mcp_status.read(rt.redis))
    except redis.RedisError as exc:
        return {"servers": 0, "resources": 0, "prompts": 0, "error": type(exc).__name__}
