"""The access gate fails closed: a route nobody wrote a rule for is refused for everyone, before
its view runs or any token is read; public routes need no token."""

from __future__ import annotations

from pathlib import Path

from app import create_app
from app.settings import Settings
from app.web.access import RULES


def make_app(tmp_path: Path):  # type: ignore[no-untyped-def]
    # Nothing here connects: the gate refuses before any database or Redis is asked.
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}", "REDIS_URL": "redis://127.0.0.1:9/0"}
    return create_app(Settings.from_mapping({}, env))


def test_a_route_without_a_rule_is_refused_for_everyone(tmp_path):
    app = make_app(tmp_path)
    ran = []
    app.add_url_rule("/v1/api/forgotten", "forgotten", lambda: ran.append(1) or "open")
    client = app.test_client()
    for headers in ({}, {"Authorization": "Bearer anything"}):
        r = client.get("/v1/api/forgotten", headers=headers)
        assert r.status_code == 403 and r.json == {"error": "forbidden: forgotten has no access rule"}
    assert not ran
    app.extensions["runtime"].close()


def test_every_route_of_the_app_has_a_rule_and_the_public_ones_need_no_token(tmp_path):
    app = make_app(tmp_path)
    endpoints = {r.endpoint for r in app.url_map.iter_rules()}
    assert endpoints == set(RULES)
    client = app.test_client()
    assert client.get("/v1/api/openapi.json").status_code == 200
    assert client.get("/").status_code == 200
    r = client.get("/v1/api/workstreams")
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
    app.extensions["runtime"].close()
