"""The whole service (SQLite) with one model per server family, all pointed at a replay server
that answers with the family's recorded bytes (tests/providers/wire/)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.replay_server import ReplayServer
from tests.integration.client import Api
from tests.integration.services import API_TOKEN, Services
from tests.providers.wire import FAMILIES, family

STREAM_IDLE_SECONDS = 2  # a stream silent this long is stalled: asked for again
METRICS_TOKEN = "metrics-token-for-the-provider-tests"


def model_config(replay: ReplayServer) -> str:
    # No generated titles: each family's recorded answers are for the turn's own requests only.
    entries = ["titles = false\n"]
    for name in FAMILIES:
        wire = "anthropic" if name == "anthropic" else "openai"
        base_url = replay.base_url(name, "" if wire == "anthropic" else "/v1")
        entry = (
            f'[models.{name}]\nprovider = "{wire}"\nmodel = "{family(name).MODEL}"\n'
            f'base_url = "{base_url}"\nprovider_family = "{name}"\nmax_tokens = 4096\n'
        )
        if wire == "anthropic":
            entry += "thinking_budget_tokens = 2048\n"
        entries.append(entry)
    return "".join(entries)


@pytest.fixture(scope="session")
def replay_server() -> Iterator[ReplayServer]:
    server = ReplayServer()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def provider_service(
    replay_server: ReplayServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Services]:
    tmp = tmp_path_factory.mktemp("providers-service")
    svc = Services("sqlite", tmp, replay_server.base_url("openai"))
    (tmp / "config.toml").write_text(model_config(replay_server))
    svc.env["TURNSTONE_CONFIG"] = str(tmp / "config.toml")
    svc.env["TURNSTONE_MODEL_STREAM_IDLE_SECONDS"] = str(STREAM_IDLE_SECONDS)
    svc.env["TURNSTONE_METRICS_TOKEN"] = METRICS_TOKEN
    try:
        svc.start()
        yield svc
    finally:
        svc.stop()


@pytest.fixture
def replay(replay_server: ReplayServer) -> Iterator[ReplayServer]:
    replay_server.reset()
    yield replay_server
    replay_server.reset()


@pytest.fixture
def api(provider_service: Services) -> Api:
    return Api(provider_service.base_url, API_TOKEN)


@pytest.fixture
def workdir(provider_service: Services, tmp_path: Path) -> Path:
    return tmp_path


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:  # type: ignore[type-arg]
    """A failed test shows the tails of the service's logs: CI keeps nothing else."""
    outcome = yield
    report = outcome.get_result()
    svc = getattr(item, "funcargs", {}).get("provider_service") or getattr(item, "funcargs", {}).get(
        "real_service"
    )
    if report.failed and svc is not None:
        for log in sorted(svc.tmp.glob("*.log")):
            report.sections.append((f"service log {log.name}", log.read_text(errors="replace")[-6000:]))
