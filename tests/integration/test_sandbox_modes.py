"""A service whose bwrap is missing (`[sandbox] bwrap` names no program), in mode auto: it says so
in /health, runs commands unjailed while the operator is its only user, and refuses them, with
an error naming the package, once a user exists."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.integration.client import Api, EventSocket
from tests.integration.conftest import BACKENDS
from tests.integration.people import People
from tests.integration.services import API_TOKEN, Services, own_service

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=BACKENDS)
def services(  # by this name, a failure shows the service logs (conftest's report hook)
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, model_server: FakeModelServer
) -> Iterator[Services]:
    def config(tmp: Path) -> str:
        return f'[sandbox]\nbwrap = "{tmp / "no-such-bwrap"}"\n'

    yield from own_service(request.param, tmp_path_factory, model_server.openai_base_url, "no-bwrap", config)


def bash_result(services: Services, model: FakeModelServer, folder: str, command: str) -> dict:
    api = Api(services.base_url, API_TOKEN)
    ws_id = api.create_workstream(working_dir=folder, auto_approve=True)
    sock = EventSocket(services.base_url, API_TOKEN, ws_id)
    try:
        model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": command})]))
        model.enqueue(Reply(text="done"))
        sock.wait_turn_end(api.send(ws_id, "run it"), timeout=60)
        return dict(sock.wait_type("tool_result"))
    finally:
        sock.close()


def sandbox_health(services: Services) -> dict:
    return dict(httpx.get(services.base_url + "/health", timeout=10).json()["sandbox"])


def test_without_bwrap_commands_run_unjailed_only_until_a_user_exists(services, model, tmp_path):
    health = sandbox_health(services)
    assert health["enforced"] is False and health["bwrap"] is None and health["mode"] == "auto"
    assert "UNJAILED" in health["reason"]
    assert "SANDBOX NOT ENFORCED" in (services.tmp / "worker.log").read_text()

    alone = bash_result(services, model, str(tmp_path), "id -u; touch ran-alone")
    assert alone["output"] == str(os.geteuid()) and not alone["is_error"]  # the worker's own user
    assert (tmp_path / "ran-alone").exists()

    People(services).user("first-user")
    refused = bash_result(services, model, str(tmp_path), "touch ran-with-users")
    assert refused["is_error"] and refused["output"].startswith("Error: ")
    assert "apt-get install bubblewrap" in refused["output"]
    assert not (tmp_path / "ran-with-users").exists()
    health = sandbox_health(services)
    assert health["enforced"] is False and "has users" in health["reason"]
