"""Redis faults a test can inject: a TCP proxy whose link can be cut (an outage that keeps the data),
and a private redis-server that can be stopped and restarted empty (Redis that loses its data)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import redis

from app.localredis import server_binary
from tests.integration.services import free_port


class RedisProxy:
    """Forwards 127.0.0.1:<port> to a Redis server; `cut()` drops every connection and stops
    listening (new ones are refused, as when Redis is down) until `restore()`."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = free_port()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._timers: list[threading.Timer] = []
        self.restore()

    def url(self, db: int) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def cut(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            doomed, self._open = self._open, set()
        if listener is not None:
            _close(listener)
        for s in doomed:
            _close(s)

    def cut_for(self, seconds: float) -> None:
        """An outage of `seconds`: cut now, restored in the background."""
        self.cut()
        timer = threading.Timer(seconds, self.restore)
        self._timers.append(timer)
        timer.start()

    def restore(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port))  # SO_REUSEADDR: the same port again
        with self._lock:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def close(self) -> None:
        for timer in self._timers:
            timer.cancel()
            timer.join()
        self.cut()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                down, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                up = socket.create_connection(self.upstream)
            except OSError:
                _close(down)
                continue
            with self._lock:
                if self._listener is not listener:  # cut while connecting
                    _close(down)
                    _close(up)
                    continue
                self._open.update((down, up))
            threading.Thread(target=self._pump, args=(down, up), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, down), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        _close(src)
        _close(dst)


class PrivateRedisServer:
    """A redis-server of the test's own, without persistence: a restart comes back empty."""

    def __init__(self) -> None:
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="tj-test-redis-"))
        self.process: subprocess.Popen[bytes] | None = None
        self._timers: list[threading.Timer] = []

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = [server_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(self.folder)]  # fmt: skip
        log = open(self.folder / "redis.log", "ab")  # noqa: SIM115 - lives as long as the server
        self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        probe = redis.Redis(port=self.port, socket_connect_timeout=1, retry=None)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.ConnectionError):
                if probe.ping():
                    return
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not start; see {self.folder}/redis.log")

    def stop(self) -> None:
        """Stop it (a pending `restart_later` too: a failed test must not leave a server behind)."""
        for timer in self._timers:
            timer.cancel()
            timer.join()
        self._timers.clear()
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    def discard(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def restart_later(self, seconds: float) -> threading.Thread:
        """Start the (stopped) server again after `seconds`, in the background."""
        timer = threading.Timer(seconds, self.start)
        self._timers.append(timer)
        timer.start()
        return timer


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        s.close()
