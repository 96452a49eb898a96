"""The jail around bash, with the real bwrap: what a command sees, reaches and keeps, and that it
dies with its call (timeout, cancel, a killed worker); and what happens where bwrap is missing."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from sqlmodel import Session

from app.sandbox import pids
from app.sandbox.enforcement import Sandbox
from app.sandbox.jail import Egress
from app.sandbox.settings import DEFAULT_READ_ONLY_ROOTS, SandboxSettings
from app.settings import Settings, ToolSettings
from app.storage.database import Database
from app.storage.migrate import upgrade
from app.storage.models import User
from app.tools import bash
from app.tools.core.base import ToolContext
from tests.process_table import carrying, wait_until

ROOT = Path(__file__).resolve().parents[2]

if shutil.which("bwrap") is None and not os.environ.get("CI"):
    pytest.skip("bubblewrap is not installed (apt-get install bubblewrap)", allow_module_level=True)


class Host:
    """A service's files laid out under an exposed root, as an admin exposing /srv would have
    them: the config, the SQLite database, and the data root with two workstreams' folders."""

    def __init__(self, tmp: Path, **policy: object) -> None:
        self.exposed = tmp / "srv"
        self.data_root = self.exposed / "data"
        self.folder = self.data_root / "alice" / "ws1"
        self.other = self.data_root / "bob" / "ws2"
        for folder in (self.folder, self.other):
            folder.mkdir(parents=True)
        (self.other / "notes.txt").write_text("bob's notes")
        self.config = self.exposed / "config.toml"
        self.config.write_text('api_token = "config-secret"\n')
        self.database = self.exposed / "service.db"
        self.database.write_text("database-bytes")
        (self.exposed / "readme.txt").write_text("readable")
        roots = (*DEFAULT_READ_ONLY_ROOTS, str(self.exposed))
        sandbox = SandboxSettings(**{"read_only_roots": roots, "data_root": str(self.data_root), **policy})
        self.settings = Settings(
            database_url=f"sqlite:///{self.database}", config_file=str(self.config), sandbox=sandbox
        )
        self.sandbox = Sandbox(self.settings, None)

    def context(self, network: str = "none", **fields: object) -> ToolContext:
        settings = fields.pop("settings", ToolSettings(timeout=20))
        return ToolContext(
            "ws", str(self.folder), settings=settings, sandbox=self.sandbox, network=network, **fields
        )

    def run(self, command: str, network: str = "none", timeout: int = 20, **fields: object) -> bash.Completed:
        return bash.run(command, timeout, self.context(network, **fields))


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path)


# -- what a command sees -------------------------------------------------------------------------


def test_a_command_runs_in_its_folder_as_an_unprivileged_user_and_writes_there(host):
    done = host.run("id -u; pwd; echo made > made.txt; echo HOME=$HOME")
    assert done.text.splitlines() == ["1000", str(host.folder), f"HOME={host.folder}"]
    assert (host.folder / "made.txt").read_text() == "made\n"


def test_the_folder_and_a_private_tmp_are_the_only_writable_places(host):
    name = f"jail-{uuid.uuid4().hex}"
    done = host.run(
        f"touch /usr/{name} 2>&1; touch {host.exposed}/{name} 2>&1; echo x > /tmp/{name} && cat /tmp/{name}"
    )
    assert done.text.count("Read-only file system") == 2, done.text
    assert done.text.endswith("x")
    assert not Path(f"/tmp/{name}").exists()  # the jail's /tmp is its own


def test_hidden_files_under_an_exposed_root_are_masked(host):
    done = host.run(
        f"exec 2>/dev/null; cat {host.exposed}/readme.txt; echo; cat {host.config}; cat {host.database}; "
        f"cat {host.other}/notes.txt; ls -A {host.data_root}; ls -A {host.data_root}/*; cat /etc/shadow; "
        "ls -A /etc/ssh; echo end"
    )
    assert done.text == "readable\nalice\nws1\nend"  # the config, the database, bob's: nothing


def test_a_fresh_proc_shows_only_the_jail_and_not_the_worker(host, monkeypatch):
    monkeypatch.setenv("TJ_WORKER_ONLY", "worker-environment-value")
    done = host.run(f"ls /proc | grep -c '^[0-9]'; cat /proc/{os.getpid()}/environ; cat /proc/*/environ")
    count = int(done.text.splitlines()[0])
    assert count < 10, done.text
    assert f"/proc/{os.getpid()}/environ: No such file" in done.text
    assert "worker-environment-value" not in done.text


def test_the_environment_is_the_allow_list_and_never_a_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("TJ_VISIBLE", "shown")
    monkeypatch.setenv("TJ_HIDDEN", "not-listed")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-listed-but-secret-0123456789")
    host = Host(tmp_path, env=("TJ_VISIBLE", "OPENAI_API_KEY"))
    names = host.run("env | cut -d= -f1 | sort").text.splitlines()
    assert "TJ_VISIBLE" in names and "HOME" in names and "PATH" in names
    assert "TJ_HIDDEN" not in names and "OPENAI_API_KEY" not in names
    assert len(names) < 12, names


# -- the network ---------------------------------------------------------------------------------


@pytest.fixture
def listener():
    """A loopback TCP service of the host (as Redis or PostgreSQL would be)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.1)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                server.accept()[0].close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


@pytest.mark.parametrize("network", ["none", "proxy"])
def test_no_network_reaches_no_loopback_service_of_the_host(host, listener, network):
    done = host.run(f"(echo > /dev/tcp/127.0.0.1/{listener}) 2>&1 && echo CONNECTED", network)
    assert "CONNECTED" not in done.text
    assert "Network is unreachable" in done.text or "Connection refused" in done.text


def test_the_host_network_reaches_the_host(host, listener):
    assert host.run(f"echo > /dev/tcp/127.0.0.1/{listener} && echo CONNECTED", "host").text == "CONNECTED"


def test_a_proxy_network_with_egress_gets_its_socket_variables_and_prefix(tmp_path):
    host = Host(tmp_path)
    path = str(tmp_path / "egress.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    host.sandbox.egress = Egress(path, {"HTTP_PROXY": "http://127.0.0.1:3128"}, ("env", "TJ_RELAY=ran"))
    try:
        command = f"test -S {path} && echo socket; echo $HTTP_PROXY $TJ_RELAY"
        assert host.run(command, "proxy").text == "socket\nhttp://127.0.0.1:3128 ran"
        assert host.run(command, "none").text == ""  # only `proxy` gets the way out
    finally:
        server.close()


# -- the limits ----------------------------------------------------------------------------------


def test_a_file_past_the_size_limit_is_not_written(tmp_path):
    host = Host(tmp_path, file_size_mb=1)
    done = host.run("head -c 3000000 /dev/zero > big; echo rc=$?")
    assert "rc=153" in done.text  # 128 + SIGXFSZ
    assert (host.folder / "big").stat().st_size <= 1024 * 1024


def test_a_memory_hog_fails_inside_its_limit(tmp_path):
    host = Host(tmp_path, memory_mb=256)
    done = host.run("python3 -c 'b = bytearray(512 * 1024 * 1024)' 2>&1; echo rc=$?")
    assert "MemoryError" in done.text and "rc=1" in done.text


FORKS = """import os, time
for n in range(100):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(5)
        os._exit(0)
print(n)"""


@pytest.mark.skipif(pids.is_needed() and not pids.is_available(), reason="root without a pids cgroup")
def test_a_fork_bomb_is_held_to_the_process_limit(tmp_path):
    host = Host(tmp_path, processes=30)
    forks = FORKS
    done = host.run(f"python3 -c '{forks}'", timeout=10)
    assert int(done.text) < 30, done.text  # bash, python and bwrap's own count too
    assert host.run("echo still fine").text == "still fine"


def test_a_limit_above_the_hard_one_refuses_the_command(tmp_path):
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit on open files here")
    host = Host(tmp_path, open_files=hard + 1)
    done = host.run("echo ran")
    assert done.returncode == 126 and "ran" not in done.text


# -- the jail dies with its call -----------------------------------------------------------------


def test_a_timeout_ends_every_process_of_the_jail(host):
    marker = f"tj-{uuid.uuid4().hex}"
    started = time.monotonic()
    done = host.run(
        f"(exec -a {marker} sleep 300) & (exec -a {marker} sleep 300) & echo up; sleep 300", timeout=1
    )
    assert done.stopped == "timeout" and done.text.startswith("up")
    assert time.monotonic() - started < 5
    assert wait_until(lambda: not carrying(marker), 3), carrying(marker)


def test_cancel_ends_every_process_of_the_jail(host):
    marker = f"tj-{uuid.uuid4().hex}"
    cancel_at = time.monotonic() + 0.5
    command = f"setsid bash -c 'exec -a {marker} sleep 300' & echo up; sleep 300"
    done = host.run(command, is_cancelled=lambda: time.monotonic() >= cancel_at)
    assert done.stopped == "cancelled"
    assert time.monotonic() - cancel_at < 2
    assert wait_until(lambda: not carrying(marker), 3), carrying(marker)


WORKER = """
import sys, threading
from app.sandbox.enforcement import Sandbox
from app.sandbox.settings import SandboxSettings
from app.settings import Settings, ToolSettings
from app.tools import bash
from app.tools.core.base import ToolContext
emit = lambda text: print(text, end="", flush=True)
sandbox = Sandbox(Settings(sandbox=SandboxSettings(data_root=sys.argv[1])), None)
ctx = ToolContext("ws", sys.argv[1], settings=ToolSettings(timeout=60), emit_output=emit, sandbox=sandbox)
call = threading.Thread(target=bash.execute, args=({"command": sys.argv[2], "stop_on_error": False}, ctx))
call.start()
call.join()
"""


def test_a_killed_worker_takes_its_jail_with_it(tmp_path):
    marker = f"tj-{uuid.uuid4().hex}"
    command = f"echo up; (exec -a {marker} sleep 300) & sleep 2; touch finished"
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(tmp_path), command], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert worker.stdout is not None
    assert worker.stdout.readline() == "up\n"
    worker.kill()
    worker.wait()
    assert wait_until(lambda: not carrying(marker), 10), carrying(marker)
    time.sleep(2.5)
    assert not (tmp_path / "finished").exists()


# -- where bwrap is missing ----------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'users.sqlite'}"
    upgrade(url)
    database = Database(url)
    yield database
    database.dispose()


def missing(mode: str, db: Database | None, tmp_path: Path) -> Sandbox:
    policy = SandboxSettings(mode=mode, bwrap=str(tmp_path / "no-such-bwrap"), data_root=str(tmp_path))
    return Sandbox(Settings(sandbox=policy), db)


def test_auto_without_bwrap_runs_unjailed_while_the_operator_is_alone(tmp_path, db):
    sandbox = missing("auto", db, tmp_path)
    ctx = ToolContext("ws", str(tmp_path), sandbox=sandbox)
    assert bash.run("id -u", 10, ctx).text == str(os.geteuid())  # the worker's own user
    status = sandbox.status().as_json()
    assert status["enforced"] is False and status["bwrap"] is None and status["mode"] == "auto"
    assert "UNJAILED" in status["reason"]


def test_auto_without_bwrap_refuses_commands_once_users_exist(tmp_path, db):
    with Session(db.engine) as s:
        s.add(User(id="u1", name="alice", password_hash="x"))
        s.commit()
    sandbox = missing("auto", db, tmp_path)
    ctx = ToolContext("ws", str(tmp_path), sandbox=sandbox)
    outcome = bash.execute({"command": "touch ran", "stop_on_error": False}, ctx)
    assert outcome.is_error and outcome.output.startswith("Error: ")
    assert "apt-get install bubblewrap" in outcome.output
    assert not (tmp_path / "ran").exists()
    assert "users" in sandbox.status().reason


def test_required_without_bwrap_refuses_every_command(tmp_path):
    sandbox = missing("required", None, tmp_path)
    outcome = bash.execute({"command": "touch ran"}, ToolContext("ws", str(tmp_path), sandbox=sandbox))
    assert outcome.is_error and "apt-get install bubblewrap" in outcome.output
    assert not (tmp_path / "ran").exists()


def test_with_bwrap_the_status_says_enforced(host):
    status = host.sandbox.status().as_json()
    assert status == {
        "enforced": True,
        "mode": "auto",
        "bwrap": shutil.which("bwrap"),
        "reason": "every command runs in bubblewrap",
    }


def test_a_bwrap_that_cannot_create_its_namespaces_counts_as_missing(tmp_path):
    # /bin/false stands for a bwrap a container's seccomp profile stops at its first unshare.
    policy = SandboxSettings(bwrap="/bin/false", mode="required", data_root=str(tmp_path))
    sandbox = Sandbox(Settings(sandbox=policy), None)
    status = sandbox.status()
    assert status.enforced is False and status.bwrap == "/bin/false"
    assert "cannot create its namespaces" in status.reason
    outcome = bash.execute({"command": "touch ran"}, ToolContext("ws", str(tmp_path), sandbox=sandbox))
    assert outcome.is_error and "cannot create its namespaces" in outcome.output
    assert not (tmp_path / "ran").exists()


def test_an_unjailed_start_is_said_loudly_and_a_jailed_one_quietly(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="app.sandbox.enforcement"):
        missing("auto", None, tmp_path).warn_if_unjailed()
        Host(tmp_path).sandbox.warn_if_unjailed()
    (record,) = caplog.records
    assert (
        "SANDBOX NOT ENFORCED" in record.getMessage() and "apt-get install bubblewrap" in record.getMessage()
    )
