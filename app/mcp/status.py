"""What workers publish about their MCP servers, and how the web tier reads it (Redis).

Each worker process writes one key, `turnstone:mcp:status:{worker}`, with a time to live,
on every change and every health tick; the web tier merges the keys it finds. The web tier
never starts a server."""

from __future__ import annotations

import json
import time
from typing import Any

import redis

from app.mcp.catalog import Offer
from app.mcp.manager import ServerView
from app.mcp.names import full_name, model_name

KEY_PREFIX = "turnstone:mcp:status:"
CONTROL_CHANNEL = "turnstone:mcp:control"  # {"op": "reload"} | {"op": "refresh", "server": ...}
MIN_TTL_SECONDS = 30


def report(worker: str, views: list[ServerView], offer: Offer) -> dict[str, Any]:
    return {
        "worker": worker,
        "ts": time.time(),
        "catalog_version": offer.catalog.version,
        "servers": [_server(v, offer) for v in views],
    }


def _server(view: ServerView, offer: Offer) -> dict[str, Any]:
    cfg, listing = view.config, view.listing
    return {
        "name": cfg.name,
        "origin": cfg.origin,
        "transport": cfg.transport,
        "state": view.state,
        "last_error": view.last_error,
        "counts": {
            "tools": len(listing.tools),
            "resources": len(listing.resources),
            "templates": len(listing.templates),
            "prompts": len(listing.prompts),
        },
        "tools": [model_name(cfg.name, t.name) for t in listing.tools],
        "resources": [r["uri"] for r in listing.resources],
        "templates": [r["uri"] for r in listing.templates],
        "prompts": [full_name(cfg.name, p.name) for p in listing.prompts],
        "warnings": list(offer.warnings.get(cfg.name, ())),
    }


def publish(client: redis.Redis, body: dict[str, Any], ttl: float) -> None:
    client.set(KEY_PREFIX + body["worker"], json.dumps(body), ex=max(MIN_TTL_SECONDS, int(ttl)))


def withdraw(client: redis.Redis, worker: str) -> None:
    client.delete(KEY_PREFIX + worker)


def read(client: redis.Redis) -> dict[str, Any]:
    """Every worker's report merged: per server, the newest report's view, with each worker's state."""
    reports = []
    for key in client.scan_iter(match=KEY_PREFIX + "*", count=100):
        raw = client.get(key)
        if raw:
            reports.append(json.loads(raw))
    reports.sort(key=lambda r: r["ts"])
    servers: dict[str, dict[str, Any]] = {}
    for r in reports:  # newest last: its view wins
        for s in r["servers"]:
            states = {**servers.get(s["name"], {}).get("workers", {}), r["worker"]: s["state"]}
            servers[s["name"]] = {**s, "workers": states}
    current = {s["name"] for s in reports[-1]["servers"]} if reports else set()
    return {
        "servers": [servers[n] for n in sorted(servers) if n in current],
        "workers": {r["worker"]: {"catalog_version": r["catalog_version"], "ts": r["ts"]} for r in reports},
    }


def summary(merged: dict[str, Any]) -> dict[str, int]:
    """/health's counts: connected servers, their resources (+ templates) and prompts."""
    live = [s for s in merged["servers"] if s["state"] == "connected"]
    return {
        "servers": len(live),
        "configured": len(merged["servers"]),
        "resources": sum(s["counts"]["resources"] + s["counts"]["templates"] for s in live),
        "prompts": sum(s["counts"]["prompts"] for s in live),
    }
