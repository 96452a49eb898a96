"""Triggers through the running service (docs/triggers.md): a POST to a trigger's secret URL,
signed as GitHub signs (X-Hub-Signature-256), starts a run whose prompt carries the body; an
unsigned or wrongly signed request, an unknown id, a body too large or not JSON start nothing;
another user's trigger is not theirs to list or delete."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import httpx
import pytest

from tests.integration.people import People

pytestmark = pytest.mark.integration


def signed(secret: str, raw: bytes) -> dict[str, str]:
    digest = hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
    return {"X-Hub-Signature-256": f"sha256={digest}", "Content-Type": "application/json"}


def test_a_signed_post_starts_a_run_with_the_body_as_context(api, services, model):
    people = People(services)
    mine = people.user("trig").api(services)
    r = mine.http.post("/v1/api/triggers", json={"prompt": "Look at this push.", "timeout_s": 60})
    assert r.status_code == 201, r.text
    trigger = r.json()
    secret, path = trigger["secret"], trigger["path"]
    assert trigger["signed"] and path == f"/v1/hooks/{trigger['trigger_id']}"
    listed = mine.http.get("/v1/api/triggers").json()["triggers"]
    assert [t["trigger_id"] for t in listed] == [trigger["trigger_id"]] and "secret" not in listed[0]

    hook = httpx.Client(base_url=services.base_url, timeout=30)  # no token: the URL and the signature
    raw = json.dumps({"ref": "refs/heads/main", "commits": [{"message": "fix the build"}]}).encode()
    headers = {**signed(secret, raw), "X-GitHub-Event": "push"}
    r = hook.post(path, content=raw, headers=headers)
    assert r.status_code == 202, r.text
    run = mine.http.get(f"/v1/api/runs/{r.json()['run_id']}", params={"wait": 30}, timeout=40).json()
    assert run["status"] == "succeeded", run
    assert run["prompt"].startswith("Look at this push.") and "fix the build" in run["prompt"]
    assert "(event: push)" in run["prompt"] and run["metadata"]["trigger_id"] == trigger["trigger_id"]
    assert "fix the build" in model.history[-1].body["messages"][-1]["content"]

    before = len(mine.http.get("/v1/api/runs", params={"limit": 200}).json()["runs"])
    refused: list[tuple[bytes, dict[str, str], int]] = [
        (raw, {"Content-Type": "application/json"}, 401),  # unsigned
        (raw, signed("not-the-secret", raw), 401),
        (raw + b" ", signed(secret, raw), 401),  # the body changed after signing
        (raw, {"X-Hub-Signature-256": "sha1=abc"}, 401),
        (b"[1, 2]", signed(secret, b"[1, 2]"), 400),
        (b"{", signed(secret, b"{"), 400),
        (b"[" * 5000 + b"]" * 5000, {}, 400),
        (b'{"a": "' + b"x" * 300_000 + b'"}', {}, 413),
    ]
    for body, headers, status in refused:
        r = hook.post(path, content=body, headers=headers)
        assert r.status_code == status, (body[:20], r.text[:200])
        assert "error" in r.json()
    for bad in ("/v1/hooks/nope", "/v1/hooks/%00", "/v1/hooks/" + "a" * 40):
        assert hook.post(bad, content=raw, headers=signed(secret, raw)).status_code == 404
    assert len(mine.http.get("/v1/api/runs", params={"limit": 200}).json()["runs"]) == before

    other = people.user("trig-other").api(services)
    assert other.http.get("/v1/api/triggers").json()["triggers"] == []
    assert other.http.delete(f"/v1/api/triggers/{trigger['trigger_id']}").status_code == 404
    assert mine.http.delete(f"/v1/api/triggers/{trigger['trigger_id']}").status_code == 200
    assert hook.post(path, content=raw, headers=signed(secret, raw)).status_code == 404


def test_hostile_trigger_bodies_are_refused(api):
    hostile: list[dict[str, Any]] = [
        {},
        {"prompt": ""},
        {"prompt": 1},
        {"prompt": "a\x00"},
        {"prompt": "\ud800"},
        {"prompt": "p", "workstream": "nope"},
        {"prompt": "p", "signed": "yes"},
        {"prompt": "p", "policy": {"tools": [None]}},
        {"prompt": "p", "timeout_s": -1},
        {"prompt": "x" * (3 * 1024 * 1024)},
    ]
    for body in hostile:
        r = api.http.post(
            "/v1/api/triggers", content=json.dumps(body), headers={"Content-Type": "application/json"}
        )
        assert r.status_code in (400, 404, 413), (str(body)[:60], r.text[:200])
    assert api.http.get("/v1/api/triggers").json()["triggers"] == []
    r = api.http.post("/v1/api/triggers", json={"prompt": "open", "signed": False})
    assert r.status_code == 201 and "secret" not in r.json() and not r.json()["signed"]
    assert api.http.delete(f"/v1/api/triggers/{r.json()['trigger_id']}").status_code == 200


def test_a_trigger_starts_at_most_its_runs_per_minute(api, services):
    """TURNSTONE_TRIGGER_STARTS_PER_MINUTE is 5 in the test service."""
    hook = httpx.Client(base_url=services.base_url, timeout=30)
    made = api.http.post("/v1/api/triggers", json={"prompt": "alert", "signed": False}).json()
    path = made["path"]
    for n in range(5):
        r = hook.post(path, json={"n": n})
        assert r.status_code == 202, (n, r.text)
    r = hook.post(path, json={"n": 5})
    assert r.status_code == 429 and "error" in r.json(), r.text
    assert 1 <= int(r.headers["Retry-After"]) <= 60
    services.restart_web()  # the count is in Redis, not in a web process
    r = hook.post(path, json={"n": 6})
    assert r.status_code == 429, r.text

    # Another trigger has its own count; a signed one counts only requests that verify.
    signed_one = api.http.post("/v1/api/triggers", json={"prompt": "push"}).json()
    raw = b'{"ref": "main"}'
    for _ in range(8):
        assert hook.post(signed_one["path"], content=raw, headers=signed("wrong", raw)).status_code == 401
    r = hook.post(signed_one["path"], content=raw, headers=signed(signed_one["secret"], raw))
    assert r.status_code == 202, r.text
    for made_one in (made, signed_one):
        assert api.http.delete(f"/v1/api/triggers/{made_one['trigger_id']}").status_code == 200
