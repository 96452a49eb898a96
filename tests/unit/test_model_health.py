"""Model health (app/providers/health.py) without a service: the chain a step tries, the probe's
answers against real loopback servers, the setting, and beat's schedule."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from app.providers import health
from app.settings import ModelSettings, Settings, SettingsError
from tests.fakes.model_server import FakeModelServer
from tests.integration.services import free_port


def model(name: str, **fields) -> ModelSettings:
    return ModelSettings(name=name, provider="openai", model=name, base_url="http://127.0.0.1:1/v1", **fields)


class Recorded:
    """What a Redis client's MGET of the health keys would give."""

    def __init__(self, states: dict[str, str]) -> None:
        self.values = {
            health.KEY.format(name=n): json.dumps({"state": s, "reason": f"{n} is {s}", "checked_at": 1.0})
            for n, s in states.items()
        }

    def mget(self, keys):  # noqa: ANN001
        return [self.values.get(k) for k in keys]


A, B, C = model("a"), model("b"), model("c")


@pytest.mark.parametrize(
    ("states", "first", "rest", "moved"),
    [
        ({}, A, [B, C], False),  # nothing known: as configured
        ({"a": "ok", "b": "degraded"}, A, [B, C], False),
        ({"a": "degraded"}, B, [C, A], True),  # an unknown fallback counts as well
        ({"a": "degraded", "b": "degraded", "c": "ok"}, C, [B, A], True),
        ({"a": "degraded", "b": "degraded", "c": "degraded"}, A, [B, C], False),  # none better
    ],
)
def test_a_degraded_model_goes_after_the_first_fallback_that_is_not(states, first, rest, moved):
    got_first, got_rest, skipped = health.healthy_first(Recorded(states), A, [B, C])
    assert (got_first, got_rest, skipped is not None) == (first, rest, moved)


def test_a_model_without_fallbacks_is_never_looked_up():
    class Untouchable:
        def mget(self, keys):  # noqa: ANN001
            raise AssertionError("no fallbacks: no Redis read on the step's path")

    assert health.healthy_first(Untouchable(), A, []) == (A, [], None)


def test_the_probe_says_what_each_server_did():
    with FakeModelServer() as server:
        served = ModelSettings(
            name="s", provider="openai", model="m", base_url=server.openai_base_url, api_key="k"
        )
        assert health.probe(served).state == health.OK
        claude = ModelSettings(
            name="c", provider="anthropic", model="m", base_url=server.anthropic_base_url, api_key="k"
        )
        assert health.probe(claude).state == health.OK
        server.listing_status = 429
        assert health.probe(served).reason == "the server answered 429"
        assert health.probe(claude).reason == "the server answered 429"
    nothing = ModelSettings(
        name="n", provider="openai", model="m", base_url=f"http://127.0.0.1:{free_port()}/v1"
    )
    assert health.probe(nothing, timeout_seconds=2).reason.startswith("it cannot be reached")
    keyless = ModelSettings(name="k", provider="anthropic", model="m")
    assert health.probe(keyless).reason == "no API key is configured"


@pytest.mark.parametrize(("value", "seconds"), [("0", 0.0), ("30", 30.0), ("2.5", 2.5)])
def test_the_probe_interval_is_seconds_or_off(value, seconds):
    assert (
        Settings.from_mapping({}, {"TURNSTONE_MODEL_HEALTH_SECONDS": value}).model_health_seconds == seconds
    )


@pytest.mark.parametrize("value", ["-1", "soon", "inf", "nan"])
def test_a_bad_probe_interval_is_refused_at_start(value):
    with pytest.raises(SettingsError, match="TURNSTONE_MODEL_HEALTH_SECONDS"):
        Settings.from_mapping({}, {"TURNSTONE_MODEL_HEALTH_SECONDS": value})


@pytest.mark.parametrize(("value", "scheduled"), [("45", True), ("0", False)])
def test_beat_probes_on_its_clock_unless_turned_off(value, scheduled):
    env = {**os.environ, "TURNSTONE_MODEL_HEALTH_SECONDS": value, "REDIS_URL": "redis://127.0.0.1:1/0"}
    env.pop("TURNSTONE_CONFIG", None)
    code = (
        "import beat, json; "
        "print(json.dumps({k: v['schedule'] for k, v in beat.app.conf.beat_schedule.items()}))"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    schedule = json.loads(done.stdout.strip().splitlines()[-1])
    assert ("model-health" in schedule) is scheduled
    if scheduled:
        assert schedule["model-health"] == 45.0
