"""The real parts an integration test runs against: web (gunicorn), Celery worker, beat, and
notify's channel gateway (gunicorn).

Each runs as its own process, as in production, against a real Redis database
number (of the test Redis, or of a private one when nothing answers there) and a
real database (a SQLite file, or a PostgreSQL database made for the run and dropped after it).
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest
import redis

from app import presence
from app.localredis import PrivateRedis, is_reachable
from app.ports import listen_port

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
API_TOKEN = "test-token-" + uuid.uuid4().hex[:8]
MODEL_KEY = "sk-fake-" + uuid.uuid4().hex  # a secret: must never reach tool output
REDIS_HOST = os.environ.get("TEST_REDIS_HOST", "127.0.0.1")
REDIS_PORT = int(os.environ.get("TEST_REDIS_PORT", "6379"))
PG_ADMIN_URL = os.environ.get("TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/test")
TEST_REDIS_DBS = range(8, 16)  # one per running service; 0-7 are left to everything else
REDIS_LEASE_KEY = "tj:test:lease"
REDIS_LEASE_SECONDS = 2 * 3600  # longer than a CI run; a crashed run frees its database by then


def free_port() -> int:
    """A port for a server a test starts (app/ports.py: never one a client connection can take)."""
    return listen_port()


def is_ci() -> bool:
    """Under CI a missing part is an error: a skip there would hide a broken machine."""
    return bool(os.environ.get("CI"))


def start_private_redis_if_absent() -> PrivateRedis | None:
    """When nothing answers at the test Redis address, start the private Redis that
    `turnstone-jobs run` would, and point the address (here and in the environment) at it.

    Called once per pytest session (tests/conftest.py) before any module imports REDIS_HOST
    or REDIS_PORT by value; the caller stops what it returns."""
    global REDIS_HOST, REDIS_PORT
    if is_reachable(f"redis://{REDIS_HOST}:{REDIS_PORT}/0"):
        return None
    private = PrivateRedis()
    private.start()
    REDIS_HOST, REDIS_PORT = "127.0.0.1", private.port
    os.environ["TEST_REDIS_HOST"], os.environ["TEST_REDIS_PORT"] = REDIS_HOST, str(REDIS_PORT)
    return private


PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies
# Looked up here, not in the forked child: loading a library after fork could wait on a lock
# another thread of the run held at the fork.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl


def _ends_with(parent: int) -> Callable[[], None]:
    """For a service process, before it execs: it is sent SIGTERM when the test run that started
    it dies. A run killed without its teardown (SIGTERM, SIGKILL, a timeout) otherwise leaves its
    web, worker and beat running against its Redis database; the next run that takes over the
    lease empties that database, and the orphaned worker then takes that run's tasks."""

    def arm() -> None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # it died before the signal was armed
            os._exit(1)

    return arm


def lease_redis_db() -> int:
    """A Redis database no other test run is using: two runs sharing one would share queues,
    and each one's worker would take the other's tasks. A lease whose run died (killed, so it
    never flushed its database) is taken over, its database emptied, rather than left to block
    runs for the lease's two hours."""
    for db in TEST_REDIS_DBS:
        if take_lease(redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db)):
            return db
    raise RuntimeError(f"every test Redis database ({TEST_REDIS_DBS}) is leased by another run")


def take_lease(client: redis.Redis) -> bool:
    """Lease `client`'s database for this process: free, or held by a run that died."""
    mine = lease_holder()
    if client.set(REDIS_LEASE_KEY, mine, nx=True, ex=REDIS_LEASE_SECONDS):
        return True
    holder = client.get(REDIS_LEASE_KEY)
    if holder is None or not holder_is_gone(holder.decode(errors="replace")):
        return False
    return bool(client.eval(_TAKE_OVER, 1, REDIS_LEASE_KEY, holder, mine, REDIS_LEASE_SECONDS))


# The lease passes from a dead holder to a new one only if nobody took it meanwhile; the dead
# run's keys (its queues above all) go with it.
_TAKE_OVER = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('FLUSHDB')
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
return 1
"""


def lease_holder(pid: int | None = None) -> str:
    """Who holds a lease: this machine and a process of it."""
    return f"{socket.gethostname()}:{os.getpid() if pid is None else pid}"


def holder_is_gone(holder: str) -> bool:
    """Whether a lease's holder is a process of this machine that no longer runs (a holder on
    another machine sharing the Redis is never judged from here). A bare process id (a lease
    taken before holders named their machine) counts as this machine's when Redis is."""
    host, _, pid = holder.rpartition(":")
    ours = host == socket.gethostname() or (not host and REDIS_HOST in ("127.0.0.1", "localhost"))
    if not ours or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, someone else's
        return False
    return False


def is_postgres_reachable() -> bool:
    try:
        psycopg.connect(PG_ADMIN_URL, connect_timeout=3).close()
    except psycopg.OperationalError:
        return False
    return True


def postgres_available() -> bool:
    """Whether the PostgreSQL tests can run; False skips them, but under CI absence raises."""
    if is_postgres_reachable():
        return True
    if is_ci():
        raise RuntimeError(f"PostgreSQL is not reachable at {PG_ADMIN_URL} (CI is set: no skipping)")
    return False


class Database:
    """A database for one test session: SQLite in tmp, or a fresh PostgreSQL database."""

    __test__ = False  # imported as `TestDatabase` by test modules: not a test class

    def __init__(self, backend: str, tmp: Path) -> None:
        self.backend = backend
        self.name = f"tj_test_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        if backend == "sqlite":
            self.url = f"sqlite:///{tmp / 'service.db'}"
        else:
            with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{self.name}"')
            self.url = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + self.name

    def drop(self) -> None:
        if self.backend != "postgresql":
            return
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


class Services:
    def __init__(self, backend: str, tmp: Path, model_base_url: str) -> None:
        self.tmp = tmp
        self.db = Database(backend, tmp)
        self.redis_url = f"redis://{REDIS_HOST}:{REDIS_PORT}/{lease_redis_db()}"
        self.redis = redis.Redis.from_url(self.redis_url)
        self._clear_redis()
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.gateway_port = free_port()
        self.gateway_url = f"http://127.0.0.1:{self.gateway_port}"
        self.workdir = tmp / "work"
        self.workdir.mkdir(exist_ok=True)
        self.data_root = tmp / "data"
        self.metrics_dir = tmp / "metrics"  # every process's metrics, summed by /metrics
        self.metrics_dir.mkdir(exist_ok=True)
        self.env = {
            **os.environ,
            "DATABASE_URL": self.db.url,
            "REDIS_URL": self.redis_url,
            "PORT": str(self.port),
            "TURNSTONE_API_TOKEN": API_TOKEN,
            "TURNSTONE_MODEL": "openai:fake-model",
            "OPENAI_BASE_URL": model_base_url,
            "OPENAI_API_KEY": MODEL_KEY,
            # Where the operator may name a workstream's folder: every test's tmp_path lies here.
            "TURNSTONE_WORKING_DIR": str(tmp.parent),
            "TURNSTONE_DATA_ROOT": str(self.data_root),  # each workstream's own folder is made here
            "TURNSTONE_HEARTBEAT_SECONDS": "0.5",
            "TURNSTONE_STALE_AFTER_SECONDS": "5",
            "TURNSTONE_SWEEP_INTERVAL_SECONDS": "1",
            "TURNSTONE_WATCH_POLL_SECONDS": "1",  # beat's pass over due watches (15 s in production)
            # no probes of the models' servers on beat's clock: test_model_health.py sends its own
            "TURNSTONE_MODEL_HEALTH_SECONDS": "0",
            # webhooks to test receivers on loopback, retried twice a second apart (test_webhooks.py)
            "TURNSTONE_WEBHOOKS_ALLOW_PRIVATE_NETWORK": "1",
            "TURNSTONE_WEBHOOK_RETRY_DELAYS": "1,1,3600",
            "TURNSTONE_CLIENT_TOOL_TIMEOUT_SECONDS": "10",  # a client tool's wait (test_client_tools.py)
            "TURNSTONE_TRIGGER_STARTS_PER_MINUTE": "5",  # a trigger's rate limit (test_triggers.py)
            "TURNSTONE_SCHEDULE_MIN_EVERY_SECONDS": "1",  # schedules fired seconds apart (test_schedules.py)
            "TURNSTONE_MODEL_RETRIES": "1",
            "TURNSTONE_MODEL_BACKOFF_SECONDS": "0.05",
            # The whole suite is one operator, and its sockets add up: the caps have tests of their own.
            "TURNSTONE_SOCKETS_PER_PRINCIPAL": "100000",
            "GATEWAY_PORT": str(self.gateway_port),
            "PYTHONUNBUFFERED": "1",
            "PROMETHEUS_MULTIPROC_DIR": str(self.metrics_dir),
            # the test-only tool source (tests/fakes/tool_source.py) is loaded by the worker
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._worker_seq = 0

    def _clear_redis(self) -> None:
        """Flush what a crashed earlier run left, keeping this run's lease."""
        self.redis.flushdb()
        self.redis.set(REDIS_LEASE_KEY, os.getpid(), ex=REDIS_LEASE_SECONDS)

    # -- processes ----------------------------------------------------------------

    def start(self) -> None:
        subprocess.run([str(BIN / "turnstone-jobs"), "migrate"], env=self.env, cwd=ROOT, check=True)
        self.start_web()
        self.start_worker()
        self.start_beat()
        self.start_gateway()

    def _spawn(
        self, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            argv,
            env={**self.env, **(env or {})},
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_ends_with(os.getpid()),  # noqa: PLW1509 - prctl only, before exec
        )
        self.processes[name] = proc
        return proc

    def start_web(
        self,
        worker_class: str = "app.web.gunicorn_worker.JsonThreadWorker",
        name: str = "web",
        port: int | None = None,
        workers: int = 1,
        env: dict[str, str] | None = None,
        threads: int = 32,
    ) -> str:
        """The web process with the Procfile's worker class (or a test's subclass of it, on a
        port of its own, `workers` gunicorn workers, `env` added to the service's); its base URL."""
        base_url = f"http://127.0.0.1:{port}" if port else self.base_url
        self._spawn(
            name,
            [
                str(BIN / "gunicorn"),
                "--config",
                "python:app.web.gunicorn_config",
                "--worker-class",
                worker_class,
                "--workers",
                str(workers),
                "--threads",
                str(threads),
                "--bind",
                base_url.removeprefix("http://"),
                "app:create_app()",
            ],
            env,
        )
        self._wait(lambda: httpx.get(base_url + "/health", timeout=2).status_code in (200, 503), name)
        return base_url

    def start_worker(
        self,
        key: str = "worker",
        concurrency: int = 8,
        queues: str = "model_steps,tool_batches,control",
        env: dict[str, str] | None = None,
    ) -> str:
        """A Celery worker, known as `key` in `processes` (a second one needs its own), consuming
        `queues`; its name."""
        self._worker_seq += 1
        name = f"w{self._worker_seq}-{os.getpid()}@tests"
        self._spawn(
            key,
            [sys.executable, "-m", "workers", "--pool", "threads",
             "--concurrency", str(concurrency),
             "--queues", queues, "--hostname", name,
             "--without-gossip", "--without-mingle", "--loglevel", "INFO"],
            env,
        )  # fmt: skip
        # Ready when this very worker announces itself (a killed one's entry lingers a while).
        self._wait(lambda: presence.is_present(self.redis, name), key)
        return name

    def start_beat(self) -> None:
        self._spawn(
            "beat",
            [
                sys.executable,
                "-m",
                "beat",
                "--schedule",
                str(self.tmp / "beat-schedule"),
                "--loglevel",
                "INFO",
            ],
        )

    def start_gateway(self) -> None:
        """notify's channel gateway, as the Procfile runs it; ready once it has registered itself
        in the services table (its /health names the row)."""
        self._spawn(
            "gateway",
            [str(BIN / "gunicorn"), "--workers", "1", "--threads", "8",
             "--bind", self.gateway_url.removeprefix("http://"), "app.gateway:create_app()"],
        )  # fmt: skip
        self._wait(lambda: httpx.get(self.gateway_url + "/health", timeout=2).json()["service_id"], "gateway")

    def kill(self, name: str) -> None:
        """SIGKILL, as a crash would: no clean-up runs."""
        proc = self.processes.pop(name)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def log_size(self, name: str) -> int:
        """Bytes the process known as `name` has logged so far: a `since` for `tasks_received`."""
        return (self.tmp / f"{name}.log").stat().st_size

    def tasks_received(self, worker: str, task: str, since: int = 0) -> int:
        """How many `task` messages the worker known as `worker` has taken off its queues, by
        what its log says past byte `since`."""
        with (self.tmp / f"{worker}.log").open("rb") as f:
            f.seek(since)
            return len(re.findall(rb"Task " + re.escape(task.encode()) + rb"\[[^\]]+\] received", f.read()))

    def stop_gracefully(self, name: str, timeout: float = 30) -> None:
        """SIGTERM, as a deploy stops a process: a Celery worker finishes its running tasks first."""
        proc = self.processes.pop(name)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=timeout)

    def kill_group(self, name: str) -> None:
        """SIGKILL to a process and its children (a gunicorn master and its workers), as a
        crash of the machine's process would: nothing of it answers any more."""
        proc = self.processes.pop(name)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def restart_web(self) -> None:
        """Kill the web process group outright (master and workers, as a crash would: every
        websocket drops) and start a new one on the same port."""
        proc = self.processes.pop("web")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        self.start_web()

    def stop(self) -> None:
        for proc in self.processes.values():
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for proc in self.processes.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        self.processes.clear()
        self.redis.flushdb()  # the lease goes with it
        self.db.drop()

    def _wait(self, ready, what: str, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                if ready():
                    return
            except (httpx.HTTPError, KeyError, ValueError) as exc:
                last = exc
            time.sleep(0.1)
        logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in self.tmp.glob("*.log"))
        raise RuntimeError(f"{what} did not become ready ({last})\n{logs}")


@contextmanager
def running(backend: str, tmp: Path, model_base_url: str, config: str = "") -> Iterator[Services]:
    """The whole service on `backend` in `tmp`, with `config` as its config.toml when given,
    stopped at the end; a PostgreSQL one is skipped where PostgreSQL is not reachable (not under CI)."""
    if backend == "postgresql" and not postgres_available():
        pytest.skip("PostgreSQL is not reachable")
    services = Services(backend, tmp, model_base_url)
    if config:
        (tmp / "config.toml").write_text(config)
        services.env["TURNSTONE_CONFIG"] = str(tmp / "config.toml")
    try:
        services.start()
        yield services
    finally:
        services.stop()


def own_service(
    backend: str,
    tmp_path_factory: pytest.TempPathFactory,
    model_base_url: str,
    name: str,
    config: Callable[[Path], str],
) -> Iterator[Services]:
    """A service of a test module's own, on `backend`, its config.toml `config(tmp)` (tmp: its
    folder): for a module-scoped fixture named `services`, so that a failure shows its logs."""
    tmp = tmp_path_factory.mktemp(f"{name}-{backend}")
    with running(backend, tmp, model_base_url, config(tmp)) as services:
        yield services
