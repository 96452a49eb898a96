"""The whole service (SQLite) with one model per server family, all pointed at a replay server
that answers with the family's recorded bytes (tests/providers/wire/)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.replay_server import ReplayServer
from tests.integration.client import Api
from tests.integration.services import API_TOKEN, Services, running
from tests.providers.wire import FAMILIES, family


def model_config(replay: ReplayServer) -> str:
    entries = []
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
    with running("sqlite", tmp, replay_server.base_url("openai"), model_config(replay_server)) as svc:
        yield svc


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
