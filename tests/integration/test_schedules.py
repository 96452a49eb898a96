"""Schedules through the running service (docs/schedules.md): beat fires one on time, each
firing a run; pause, resume and delete; a firing missed while beat was down runs once, not once
per missed time; another user's schedule is not found; hostile cron expressions and bodies are a
400 with nothing stored."""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

import pytest

from tests.integration.client import wait_until
from tests.integration.people import People

pytestmark = pytest.mark.integration


def make(api, **body: Any) -> dict[str, Any]:
    r = api.http.post("/v1/api/schedules", json=body)
    assert r.status_code == 201, r.text
    return dict(r.json())


def firings(api, schedule_id: str) -> list[dict[str, Any]]:
    r = api.http.get(f"/v1/api/schedules/{schedule_id}")
    assert r.status_code == 200, r.text
    return list(r.json()["firings"])


def test_beat_fires_a_schedule_on_time_and_pause_resume_and_delete_work(api, services):
    mine = People(services).user("sched").api(services)
    made = make(mine, every=2, prompt="tick", timezone="Europe/Berlin")
    times = [datetime.fromisoformat(t) for t in made["next_fire_times"]]
    assert len(times) == 5 and all(
        (b - a).total_seconds() == 2 for a, b in zip(times, times[1:], strict=False)
    )
    assert made["new_workstream_each_time"] and made["firings"] == []
    sid = made["schedule_id"]
    wait_until(
        lambda: len([f for f in firings(mine, sid) if f["started"]]) >= 2, timeout=30, what="two firings"
    )
    fired = firings(mine, sid)
    runs = [
        mine.http.get(f"/v1/api/runs/{f['run_id']}", params={"wait": 30}, timeout=40).json()
        for f in fired[:2]
    ]
    assert [r["status"] for r in runs] == ["succeeded", "succeeded"], runs
    assert runs[0]["ws_id"] != runs[1]["ws_id"]  # a new workstream each time
    assert runs[0]["metadata"]["schedule_id"] == sid and runs[0]["prompt"] == "tick"

    r = mine.http.post(f"/v1/api/schedules/{sid}/pause")
    assert r.status_code == 200 and r.json()["paused"] and r.json()["next_fire_times"] == []
    count = len(firings(mine, sid))
    time.sleep(4)
    assert len(firings(mine, sid)) == count
    r = mine.http.post(f"/v1/api/schedules/{sid}/resume")
    assert r.status_code == 200 and not r.json()["paused"]
    wait_until(lambda: len(firings(mine, sid)) > count, timeout=30, what="a firing after the resume")
    assert [s["schedule_id"] for s in mine.http.get("/v1/api/schedules").json()["schedules"]] == [sid]

    other = People(services).user("other").api(services)
    assert other.http.get(f"/v1/api/schedules/{sid}").status_code == 404
    assert other.http.post(f"/v1/api/schedules/{sid}/pause").status_code == 404
    assert other.http.delete(f"/v1/api/schedules/{sid}").status_code == 404
    assert other.http.get("/v1/api/schedules").json()["schedules"] == []
    assert mine.http.delete(f"/v1/api/schedules/{sid}").status_code == 200
    assert mine.http.get(f"/v1/api/schedules/{sid}").status_code == 404


def test_a_firing_missed_while_beat_was_down_runs_once(api, services, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sid = make(api, every=1, prompt="beat", workstream=ws_id)["schedule_id"]
    wait_until(lambda: len(firings(api, sid)) >= 1, timeout=30, what="a first firing")
    services.kill("beat")
    time.sleep(2)  # a sweep sent before the kill may still run
    before = len(firings(api, sid))
    time.sleep(5)  # five fire times pass with no beat
    assert len(firings(api, sid)) == before
    services.start_beat()
    wait_until(lambda: len(firings(api, sid)) > before, timeout=30, what="a firing after the restart")
    time.sleep(0.5)
    after = firings(api, sid)
    caught_up = [f for f in after[: len(after) - before] if f["started"]]
    assert 1 <= len(caught_up) <= 2, after  # the missed times once, then on time again
    fire_times = [f["fire_at"] for f in after]
    assert len(set(fire_times)) == len(fire_times)  # no time fired twice
    assert api.http.delete(f"/v1/api/schedules/{sid}").status_code == 200
    api.wait_idle(ws_id)


def test_hostile_cron_expressions_and_bodies_are_refused(api):
    before = api.http.get("/v1/api/schedules").json()["schedules"]
    hostile: list[dict[str, Any]] = [
        {},
        {"prompt": "p"},
        {"prompt": "p", "cron": "* * * * *", "every": 60},
        {"prompt": "p", "cron": "61 * * * *"},
        {"prompt": "p", "cron": "* * * *"},
        {"prompt": "p", "cron": "* * * * * *"},
        {"prompt": "p", "cron": "0 0 30 2 *"},
        {"prompt": "p", "cron": "*/0 * * * *"},
        {"prompt": "p", "cron": "@reboot"},
        {"prompt": "p", "cron": ""},
        {"prompt": "p", "cron": "\x00 * * * *"},
        {"prompt": "p", "cron": "\ud800 * * * *"},
        {"prompt": "p", "cron": "1," * 150 + "1 * * * *"},
        {"prompt": "p", "cron": 5},
        {"prompt": "p", "every": 0},
        {"prompt": "p", "every": -1},
        {"prompt": "p", "every": 10**20},
        {"prompt": "p", "every": 1.5},
        {"prompt": "p", "every": True},
        {"prompt": "p", "every": 60, "timezone": "Mars/Olympus"},
        {"prompt": "p", "every": 60, "timezone": "../../etc/passwd"},
        {"prompt": "p", "every": 60, "timezone": "\x00"},
        {"prompt": "", "every": 60},
        {"prompt": "p", "every": 60, "workstream": "nope"},
        {"prompt": "p", "every": 60, "new_workstream_each_time": False},
        {"prompt": "p", "every": 60, "policy": {"tools": "bash"}},
        {"prompt": "p", "every": 60, "timeout_s": 0},
    ]
    for body in hostile:
        raw = json.dumps(body)
        r = api.http.post("/v1/api/schedules", content=raw, headers={"Content-Type": "application/json"})
        # 400 what the document forbids; 404 a workstream not there; 422 well-formed but unusable
        assert r.status_code in (400, 404, 422), (raw[:80], r.text[:200])
        assert "error" in r.json()
    for path in ("nope", "%00", "a" * 40):
        assert api.http.get(f"/v1/api/schedules/{path}").status_code == 404
        assert api.http.post(f"/v1/api/schedules/{path}/pause").status_code == 404
    assert api.http.get("/v1/api/schedules").json()["schedules"] == before
    ok = make(api, cron="30 9 * * 1-5", timezone="America/New_York", prompt="weekday")
    assert all(datetime.fromisoformat(t).weekday() < 5 for t in ok["next_fire_times"])
    assert api.http.delete(f"/v1/api/schedules/{ok['schedule_id']}").status_code == 200
