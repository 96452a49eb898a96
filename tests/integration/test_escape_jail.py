"""Trying to get out of the jail, through the running service: each row is a bash call the fake
model makes in an auto-approved workstream, run by a real worker in bubblewrap, and says what it
must see: refused or contained, nothing leaked, and the service unharmed (a next turn works).

The service's own folder (its SQLite database, its config, the data root) is exposed read-only to
commands here, as an admin exposing /srv would: so every row is stopped by the jail's masks, its
namespaces or its limits, not by the files being out of sight anyway.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from app.sandbox.settings import DEFAULT_READ_ONLY_ROOTS
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.integration.client import Api, EventSocket
from tests.integration.conftest import BACKENDS
from tests.integration.people import People
from tests.integration.services import API_TOKEN, MODEL_KEY, Services, running
from tests.process_table import carrying, wait_until

pytestmark = pytest.mark.integration

CONFIG_MARKER = f"config-marker-{uuid.uuid4().hex}"
OTHER_SECRET = f"other-workstream-secret-{uuid.uuid4().hex}"
LIMITS = {"processes": 64, "memory_mb": 512, "file_size_mb": 8, "cpu_seconds": 30}

if shutil.which("bwrap") is None and not os.environ.get("CI"):
    pytest.skip("bubblewrap is not installed (apt-get install bubblewrap)", allow_module_level=True)


@pytest.fixture(scope="module", params=BACKENDS)
def services(  # by this name, a failure shows the service logs (conftest's report hook)
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, model_server: FakeModelServer
) -> Iterator[Services]:
    tmp = tmp_path_factory.mktemp(f"escape-{request.param}")
    roots = ", ".join(f'"{root}"' for root in (*DEFAULT_READ_ONLY_ROOTS, str(tmp)))
    limits = "".join(f"{key} = {value}\n" for key, value in LIMITS.items())
    config = (
        f'# {CONFIG_MARKER}\n[sandbox]\nread_only_roots = [{roots}]\ndata_root = "{tmp / "data"}"\n{limits}'
    )
    with running(request.param, tmp, model_server.openai_base_url, config) as services:
        yield services


@dataclass
class Folders:
    mine: Path
    other: Path


@pytest.fixture(scope="module")
def folders(services: Services) -> Folders:
    mine = services.tmp / "data" / "alice" / "ws-a"
    other = services.tmp / "data" / "bob" / "ws-b"
    for folder in (mine, other):
        folder.mkdir(parents=True, exist_ok=True)
    (other / "secret.txt").write_text(OTHER_SECRET)
    return Folders(mine, other)


@pytest.fixture
def model(model_server: FakeModelServer) -> Iterator[FakeModelServer]:
    model_server.reset()
    yield model_server
    model_server.reset()


def bash_turn(
    services: Services, model: FakeModelServer, folder: Path, command: str, timeout: int = 20
) -> str:
    """The bash result the model gets for `command`, run in a new workstream in `folder`."""
    api = Api(services.base_url, API_TOKEN)
    ws_id = api.create_workstream(working_dir=str(folder), auto_approve=True)
    sock = EventSocket(services.base_url, API_TOKEN, ws_id)
    try:
        model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": command, "timeout": timeout})]))
        model.enqueue(Reply(text="done"))
        turn_id = api.send(ws_id, "try it")
        sock.wait_turn_end(turn_id, timeout=timeout + 60)
        return str(sock.wait_type("tool_result")["output"])
    finally:
        sock.close()


def worker_pid(services: Services) -> int:
    return services.processes["worker"].pid


def assert_unharmed(services: Services, model: FakeModelServer, folder: Path) -> None:
    """The worker still runs and serves: a next turn's command runs."""
    assert os.path.exists(f"/proc/{worker_pid(services)}")
    assert bash_turn(services, model, folder, "echo next turn") == "next turn"


def secrets(services: Services) -> list[str]:
    return [MODEL_KEY, API_TOKEN, services.db.url, services.redis_url, CONFIG_MARKER, OTHER_SECRET]


# -- the rows ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    name: str
    command: str  # {pid} the worker's, {db} the SQLite file, {config}, {other}, {web}, {redis}, {pg}
    must_not_see: tuple[str, ...] = ()  # besides every secret of the service
    must_see: tuple[str, ...] = ()
    sqlite_only: bool = False


ROWS = [
    Row("environ of the worker, plain", "cat /proc/{pid}/environ", must_see=("Blocked",)),
    Row(  # encoded, a leak would pass the redaction: it must fail outright
        "environ of the worker, base64",
        "base64 -w0 /proc/{pid}/env''iron 2>&1; echo; echo end",
        must_see=("No such file", "end"),
    ),
    Row(
        "environ of the worker, via python",
        "python3 -c \"print(open('/proc/{pid}/env' + 'iron').read())\" 2>&1",
        must_see=("No such file",),
    ),
    Row(
        "environ of every process", "cat /proc/[0-9]*/env''iron | tr '\\0' '\\n'; echo end", must_see=("end",)
    ),
    Row("the service secrets in env", "env; printenv; echo end", must_not_see=("DATABASE_URL", "REDIS_URL")),
    Row("the service secrets in set", "set; echo end", must_not_see=("DATABASE_URL", "REDIS_URL")),
    Row(
        "the SQLite database, read",
        "cat {db}* | strings | head -50; echo end",
        ("SQLite format",),
        sqlite_only=True,
    ),
    Row(
        "the SQLite database, opened",
        "python3 -c \"import sqlite3; db = sqlite3.connect('{db}'); "
        "print(db.execute('select name from users').fetchall())\" 2>&1",
        must_see=("Error",),
        sqlite_only=True,
    ),
    Row(
        "the SQLite database, written",  # the text written is not the command's: that is stored
        "echo jail$((1 + 1))break | tee -a {db} {db}-wal > /dev/null 2>&1; echo end",
        must_see=("end",),
        sqlite_only=True,
    ),
    Row("the config file", "cat {config} 2>&1; echo end", must_see=("end",)),
    Row("another workstream's folder", "ls -A {other} 2>&1; cat {other}/secret.txt 2>&1; echo end"),
    Row(
        "Redis by bash /dev/tcp",
        "(exec 3<>/dev/tcp/127.0.0.1/{redis}; printf 'PING\\r\\n' >&3; head -c 7 <&3) 2>&1",
        ("PONG",),
    ),
    Row(
        "Redis by python socket",
        "python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', {redis}), 2); "
        "s.sendall(b'PING\\r\\n'); print(s.recv(10))\" 2>&1",
        ("PONG",),
        must_see=("refused",),  # the jail's own loopback: nothing listens there
    ),
    Row("Redis by redis-cli", "redis-cli -h 127.0.0.1 -p {redis} ping 2>&1; echo end", ("PONG",)),
    Row(
        "PostgreSQL by bash /dev/tcp",
        "(exec 3<>/dev/tcp/127.0.0.1/{pg} && echo CONNECTED) 2>&1",
        ("CONNECTED",),
        must_see=("refused",),
    ),
    Row("the web port", "curl -sS -m 5 http://127.0.0.1:{web}/health 2>&1; echo end", ('"ok"', "database")),
    Row("kill -9 of the worker", "kill -9 {pid} 2>&1; echo rc=$?", must_see=("rc=1",)),
    Row("ptrace by strace", "strace -p {pid} 2>&1 | head -3; echo end", ("attached",), must_see=("end",)),
    Row(
        "ptrace by python ctypes",
        'python3 -c "import ctypes; libc = ctypes.CDLL(None, use_errno=True); '
        "print('rc', libc.ptrace(16, {pid}, 0, 0))\"",
        must_see=("rc -1",),
    ),
    Row(
        "a setuid binary",
        "grep NoNewPrivs /proc/self/status; su -c 'id -u' root < /dev/null 2>&1; "
        "mount -t tmpfs x /mnt 2>&1; echo end",
        ("\n0\n",),
        must_see=("NoNewPrivs:\t1", "end"),
    ),
    Row(
        "a fork bomb",
        "f() {{ f & f & }}; f 2>/dev/null; echo survived",
        must_see=("survived",),
    ),
    Row(
        "a memory hog",
        "python3 -c 'b = bytearray(2 * 1024 ** 3)' 2>&1 | tail -1",
        must_see=("MemoryError",),
    ),
    Row(
        "a disk filler",
        "head -c 64M /dev/zero > fill; echo rc=$?; stat -c %s fill",
        must_see=("rc=153", str(LIMITS["file_size_mb"] * 1024 * 1024)),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_a_command_cannot_get_out(services, folders, model, row):
    if row.sqlite_only and services.db.backend != "sqlite":
        pytest.skip("the database is a server here, not a file")
    database = services.db.url.removeprefix("sqlite:///")
    command = row.command.format(
        pid=worker_pid(services),
        db=database,
        config=services.env["TURNSTONE_CONFIG"],
        other=folders.other,
        web=services.port,
        redis=services.redis.connection_pool.connection_kwargs["port"],
        pg=5432,
    )
    output = bash_turn(services, model, folders.mine, command)
    for seen in row.must_see:
        assert seen in output, output
    for secret in (*secrets(services), *row.must_not_see):
        assert secret not in output, (secret, output)
    if services.db.backend == "sqlite":
        for path in Path(database).parent.glob(Path(database).name + "*"):
            assert b"jail2break" not in path.read_bytes(), path
    assert_unharmed(services, model, folders.mine)


def test_the_fork_bomb_leaves_nothing_behind(services, folders, model):
    marker = f"tj-bomb-{uuid.uuid4().hex}"
    bomb = f"f() {{ (exec -a {marker} sleep 60) & f & f & }}; f 2>/dev/null; sleep 30"
    bash_turn(services, model, folders.mine, bomb, timeout=3)
    assert wait_until(lambda: not carrying(marker), 5), len(carrying(marker))
    assert_unharmed(services, model, folders.mine)


def test_health_says_the_sandbox_is_enforced(services):
    body = httpx.get(services.base_url + "/health", timeout=10).json()
    assert body["sandbox"]["enforced"] is True
    assert body["sandbox"]["mode"] == "auto" and body["sandbox"]["bwrap"] == shutil.which("bwrap")


# -- the network a workstream is given -----------------------------------------------------------


def test_a_workstream_gets_the_default_network_and_shows_it(services, folders):
    api = Api(services.base_url, API_TOKEN)
    ws_id = api.create_workstream(working_dir=str(folders.mine))
    assert api.workstream(ws_id)["network"] == "none"


def test_a_network_outside_the_allowed_ones_is_a_400_naming_them(services, folders):
    r = Api(services.base_url, API_TOKEN).http.post(
        "/v1/api/workstreams", json={"working_dir": str(folders.mine), "network": "internet"}
    )
    assert r.status_code == 400, r.text
    assert "none, proxy" in r.json()["error"]


@pytest.mark.parametrize("network", [7, True, ["none"], {"n": 1}, "none\x00", "\ud800", "h" * 100_000, ""])
def test_a_hostile_network_is_a_400(services, folders, network):
    body = json.dumps({"working_dir": str(folders.mine), "network": network})  # \ud800 escaped, as sent
    r = Api(services.base_url, API_TOKEN).http.post(
        "/v1/api/workstreams", content=body, headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 400, r.text
    assert "network" in r.json()["error"]


def test_only_an_administrator_gives_a_workstream_the_host_network(services, folders, model):
    people = People(services)
    user, admin = people.user("net-user"), people.user("net-admin", admin=True)
    body = {"working_dir": str(folders.mine), "network": "host"}
    refused = user.api(services).http.post("/v1/api/workstreams", json=body)
    assert refused.status_code == 403, refused.text
    assert "administrator" in refused.json()["error"]
    made = admin.api(services).http.post("/v1/api/workstreams", json=body)
    assert made.status_code == 201, made.text
    assert made.json()["network"] == "host"


def test_the_host_network_reaches_the_host_and_none_does_not(services, folders, model):
    api = Api(services.base_url, API_TOKEN)
    command = f"curl -sS -m 5 -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{services.port}/health 2>&1"
    for network, reached in (("host", True), ("none", False)):
        ws_id = api.create_workstream(working_dir=str(folders.mine), auto_approve=True, network=network)
        sock = EventSocket(services.base_url, API_TOKEN, ws_id)
        try:
            model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": command})]))
            model.enqueue(Reply(text="done"))
            sock.wait_turn_end(api.send(ws_id, "reach the web port"), timeout=60)
            output = sock.wait_type("tool_result")["output"]
        finally:
            sock.close()
        assert output.startswith("200") is reached, (network, output)


def proxy_turn(services: Services, model: FakeModelServer, folder: Path, command: str) -> str:
    """The bash result of `command` in a new workstream whose network is `proxy`."""
    api = Api(services.base_url, API_TOKEN)
    ws_id = api.create_workstream(working_dir=str(folder), auto_approve=True, network="proxy")
    sock = EventSocket(services.base_url, API_TOKEN, ws_id)
    try:
        model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": command})]))
        model.enqueue(Reply(text="done"))
        sock.wait_turn_end(api.send(ws_id, "through the proxy"), timeout=90)
        return str(sock.wait_type("tool_result")["output"])
    finally:
        sock.close()


# `--noproxy ''`: the jail's NO_PROXY sends 127.0.0.1 straight to its own loopback; these rows
# ask the proxy itself, which must refuse each (the service's default: no private networks).
PROXY_ROWS = [
    (
        "the web port",
        "curl -sS -m 5 --noproxy '' -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{web}/health",
    ),
    (
        "a private name",
        "curl -sS -m 5 --noproxy '' -o /dev/null -w '%{{http_code}}' http://localhost:{web}/health",
    ),
    (
        "metadata",
        "curl -sS -m 5 --noproxy '' -o /dev/null -w '%{{http_code}}' http://169.254.169.254/latest/meta-data/",
    ),
    (
        "redis by CONNECT",
        "curl -sS -m 5 --noproxy '' -o /dev/null -w '%{{http_code}}' https://127.0.0.1:{redis}/ 2>&1",
    ),
]


@pytest.mark.parametrize(("name", "command"), PROXY_ROWS, ids=[name for name, _ in PROXY_ROWS])
def test_the_proxy_network_goes_out_only_through_the_guard(services, folders, model, name, command):
    redis_port = services.redis.connection_pool.connection_kwargs["port"]
    output = proxy_turn(services, model, folders.mine, command.format(web=services.port, redis=redis_port))
    assert "403" in output and not output.startswith("200"), (name, output)
    assert_unharmed(services, model, folders.mine)


def test_a_proxy_workstreams_command_has_the_proxy_and_no_network_of_its_own(services, folders, model):
    redis_port = services.redis.connection_pool.connection_kwargs["port"]
    output = proxy_turn(
        services,
        model,
        folders.mine,
        f"echo proxy=$HTTPS_PROXY; (echo PING > /dev/tcp/127.0.0.1/{redis_port}) 2>&1 || echo direct-refused",
    )
    assert "proxy=http://127.0.0.1:" in output and "direct-refused" in output, output
