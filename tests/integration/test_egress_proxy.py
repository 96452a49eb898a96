"""The egress proxy and its in-jail relay, through a real bwrap jail with its own network namespace.

The jail here is built by the test (the service's jail builder lives elsewhere): loopback only,
the proxy's folder bound in, the relay in front of the command.
"""

from __future__ import annotations

import contextlib
import http.server
import logging
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.sandbox.egress import EgressProxy
from app.sandbox.relay import SOCKET_IN_JAIL, egress_for
from app.settings import Settings
from tests.process_table import wait_until

BWRAP = shutil.which("bwrap")
pytestmark = pytest.mark.skipif(
    BWRAP is None or not os.path.exists("/usr/bin/curl"), reason="needs bwrap, curl"
)
PORT = 3128
PROXY = f"http://127.0.0.1:{PORT}"
METADATA_URL = "http://169.254.169.254/latest/meta-data/"


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", METADATA_URL)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = f"hello {self.path} proxy-auth={self.headers.get('Proxy-Authorization')}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def web() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _settings(allow_private: bool = False, domains: tuple[str, ...] = ()) -> Settings:
    return Settings.from_mapping(
        {"tools": {"allow_private_network": allow_private}, "sandbox": {"proxy_domains": list(domains)}}, {}
    )


def _jail_argv(proxy: EgressProxy, command: list[str]) -> tuple[list[str], dict[str, str]]:
    folder = os.path.dirname(proxy.socket_path)
    egress = egress_for(proxy.socket_path, PORT, "/usr/bin/python3")
    argv = [BWRAP or "bwrap", "--unshare-all", "--unshare-user", "--die-with-parent"]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    argv += ["--bind", folder, folder, "--", *egress.argv_prefix, *command]
    return argv, {"PATH": "/usr/bin:/bin", **egress.env}


def _jailed(proxy: EgressProxy, command: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    argv, env = _jail_argv(proxy, command)
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)


def _curl(proxy: EgressProxy, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    # --noproxy '': the relay's NO_PROXY keeps the jail's own 127.0.0.1 direct; these go to the host's.
    command = [
        "curl",
        "-sS",
        "--max-time",
        "20",
        "--noproxy",
        "",
        "-x",
        PROXY,
        "-w",
        "\n%{http_code}",
        *extra,
    ]
    return _jailed(proxy, [*command, url])


def test_loopback_through_the_proxy_is_refused_with_a_reason(web):
    with EgressProxy(_settings()) as proxy:
        done = _curl(proxy, f"http://127.0.0.1:{web}/hello")
    assert done.stdout.endswith("\n403"), done
    assert "turnstone-jobs egress proxy: 127.0.0.1 is a loopback address" in done.stdout


def test_allow_private_network_lets_the_proxy_reach_loopback_without_proxy_credentials(web):
    with EgressProxy(_settings(allow_private=True)) as proxy:
        done = _curl(proxy, f"http://127.0.0.1:{web}/hello", "-U", "user:secret")
    assert done.stdout == "hello /hello proxy-auth=None\n200", done


def test_python_urllib_in_the_jail_uses_the_proxy_environment(web):
    script = (
        "import os, urllib.request\n"
        "os.environ.pop('NO_PROXY'); os.environ.pop('no_proxy')\n"
        f"print(urllib.request.urlopen('http://127.0.0.1:{web}/from-python').read().decode())\n"
    )
    with EgressProxy(_settings(allow_private=True)) as proxy:
        done = _jailed(proxy, ["python3", "-I", "-c", script])
    assert done.returncode == 0, done
    assert done.stdout.strip() == "hello /from-python proxy-auth=None"


def test_a_name_that_resolves_to_loopback_is_refused(web):
    with EgressProxy(_settings()) as proxy:
        done = _curl(proxy, f"http://localhost:{web}/hello")
    assert done.stdout.endswith("\n403"), done
    assert "localhost resolves to" in done.stdout and "a loopback address" in done.stdout


def test_a_redirect_to_metadata_is_refused_at_the_second_hop(web):
    with EgressProxy(_settings(allow_private=True)) as proxy:
        done = _curl(proxy, f"http://127.0.0.1:{web}/redirect", "-L")
    assert done.stdout.endswith("\n403"), done
    assert "169.254.169.254 is a cloud metadata address" in done.stdout


def test_redis_and_postgresql_are_refused_through_the_proxy_and_unreachable_without_it():
    with EgressProxy(_settings()) as proxy:
        for port in (6379, 5432):
            done = _curl(proxy, f"http://127.0.0.1:{port}/", "-p")
            assert "403" in done.stderr + done.stdout, done
        direct = (
            "import socket\n"
            "for port in (6379, 5432, 80):\n"
            "    try:\n"
            "        socket.create_connection(('127.0.0.1', port), timeout=5)\n"
            "        print(port, 'open')\n"
            "    except OSError as exc:\n"
            "        print(port, type(exc).__name__)\n"
        )
        done = _jailed(proxy, ["python3", "-I", "-c", direct])
    assert done.stdout.split("\n")[:3] == [
        "6379 ConnectionRefusedError",
        "5432 ConnectionRefusedError",
        "80 ConnectionRefusedError",
    ], done


def test_a_connect_tunnel_carries_any_tcp_when_the_address_is_allowed():
    ping = (
        "import socket\n"
        f"s = socket.create_connection(('127.0.0.1', {PORT}))\n"
        "s.sendall(b'CONNECT 127.0.0.1:6379 HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
        "print(s.recv(100).split(b'\\r\\n')[0].decode())\n"
        "s.sendall(b'PING\\r\\n')\n"
        "print(s.recv(100).decode().strip())\n"
    )
    with EgressProxy(_settings(allow_private=True)) as proxy:
        done = _jailed(proxy, ["python3", "-I", "-c", ping])
    assert done.stdout.split("\n")[:2] == ["HTTP/1.1 200 Connection established", "+PONG"], done


def test_a_name_off_the_allow_list_is_refused_even_when_its_address_is_allowed(web):
    names = {"api.example.com": ["127.0.0.1"], "example.org": ["127.0.0.1"]}
    settings = _settings(allow_private=True, domains=("example.com",))
    with EgressProxy(settings, resolver=lambda host: names[host]) as proxy:
        refused = _curl(proxy, f"http://example.org:{web}/hello")
        literal = _curl(proxy, f"http://127.0.0.1:{web}/hello")
        allowed = _curl(proxy, f"http://api.example.com:{web}/hello")
    assert refused.stdout.endswith("\n403") and "example.org is not on the allowed domains" in refused.stdout
    assert literal.stdout.endswith("\n403"), literal
    assert allowed.stdout == "hello /hello proxy-auth=None\n200", allowed


def test_the_relay_exits_with_the_commands_status():
    with EgressProxy(_settings()) as proxy:
        assert _jailed(proxy, ["sh", "-c", "exit 7"]).returncode == 7
        assert _jailed(proxy, ["sh", "-c", "kill -TERM $$"]).returncode == 128 + signal.SIGTERM
        assert _jailed(proxy, ["/no/such/program"]).returncode == 127


def test_killing_the_jails_process_group_leaves_no_relay_or_command(tmp_path):
    marker = "7777.25"
    with EgressProxy(_settings()) as proxy:
        jail = _started_jail(proxy, marker)
        os.killpg(jail.pid, signal.SIGKILL)
        jail.wait(timeout=10)
        deadline = time.monotonic() + 10
        while (_running_with(marker) or _running_with(proxy.socket_path)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running_with(marker) and not _running_with(proxy.socket_path)


def test_killing_the_relay_kills_the_command():
    marker = "7777.5"
    with EgressProxy(_settings()) as proxy:
        jail = _started_jail(proxy, marker)
        for pid in _relays(proxy):
            os.kill(pid, signal.SIGKILL)
        assert jail.wait(timeout=20) != 0
        assert not _commands(marker)


def _started_jail(proxy: EgressProxy, marker: str) -> subprocess.Popen[bytes]:
    """A jailed `sleep <marker>` behind the proxy, in a process group of its own, once both its
    relay and its command run."""
    argv, env = _jail_argv(proxy, ["sleep", marker])
    jail = subprocess.Popen(argv, env=env, start_new_session=True)
    started = wait_until(lambda: bool(_relays(proxy) and _commands(marker)), 30)
    assert started, "the relay or the command never started"
    return jail


def _relays(proxy: EgressProxy) -> list[int]:
    # bwrap's command line names the socket too; the relay is the python one.
    return [p for p in _running_with(proxy.socket_path) if _cmdline(p).startswith("/usr/bin/python3 -I -c ")]


def _commands(marker: str) -> list[int]:
    return [p for p in _running_with(marker) if _cmdline(p).startswith("sleep ")]


def test_the_proxy_closes_its_tunnels_and_removes_its_socket_on_exit(web):
    with EgressProxy(_settings(allow_private=True)) as proxy:
        client = socket.socket(socket.AF_UNIX)
        client.connect(proxy.socket_path)
        client.sendall(f"CONNECT 127.0.0.1:{web} HTTP/1.1\r\n\r\n".encode())
        assert client.recv(100).startswith(b"HTTP/1.1 200")
        folder = os.path.dirname(proxy.socket_path)
        assert oct(os.stat(folder).st_mode & 0o777) == "0o700"
    client.settimeout(10)
    assert client.recv(100) == b""  # the tunnel was cut
    client.close()
    assert not os.path.exists(folder)


def _raw(proxy: EgressProxy, data: bytes, timeout: float = 10) -> bytes:
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(timeout)
        client.connect(proxy.socket_path)
        with contextlib.suppress(OSError):  # the proxy may answer and close before taking it all
            client.sendall(data)
        received = b""
        try:
            while chunk := client.recv(65536):
                received += chunk
        except OSError:
            pass
        return received


def test_hostile_requests_are_answered_or_closed_and_the_proxy_keeps_serving(web):
    with EgressProxy(_settings(allow_private=True), idle_timeout=1) as proxy:
        assert _raw(proxy, b"GET http://127.0.0.1/" + b"a" * (1 << 20) + b" HTTP/1.1\r\n\r\n").startswith(
            b"HTTP/1.1 431"
        )
        assert _raw(proxy, b"CONNECT 127.0.0.1\x00.evil:443 HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400")
        assert _raw(proxy, b"CONNECT example.com HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400")
        assert _raw(proxy, b"CONNECT [::1 HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400")
        assert _raw(proxy, b"\xff\xfe\x00garbage\r\n\r\n").startswith(b"HTTP/1.1 400")
        assert _raw(proxy, b"GET /relative HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400")
        assert _raw(proxy, b"").startswith(b"HTTP/1.1 408")  # says nothing: the idle timeout
        served = _raw(proxy, f"GET http://127.0.0.1:{web}/still HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert served.startswith(b"HTTP/1.0 200") and served.endswith(b"hello /still proxy-auth=None"), served


def test_a_connection_over_the_cap_gets_a_503(web):
    with EgressProxy(_settings(allow_private=True), max_connections=1) as proxy:
        holder = socket.socket(socket.AF_UNIX)
        holder.connect(proxy.socket_path)
        holder.sendall(f"CONNECT 127.0.0.1:{web} HTTP/1.1\r\n\r\n".encode())
        assert holder.recv(100).startswith(b"HTTP/1.1 200")
        assert _raw(proxy, b"GET http://127.0.0.1/ HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 503")
        holder.close()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\x00", b" ").decode(errors="replace")
    except OSError:
        return ""


def _running_with(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid() and text in _cmdline(int(entry.name)):
            try:
                state = Path(f"/proc/{entry.name}/stat").read_text().rpartition(")")[2].split()[0]
            except OSError:
                continue
            if state != "Z":
                found.append(int(entry.name))
    return found


def test_a_killed_relay_takes_its_command_with_it_even_outside_a_pid_namespace():
    # In bwrap the pid namespace would end the command anyway; the relay must not rely on it.
    marker = "7777.75"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with EgressProxy(_settings()) as proxy:
        egress = egress_for(proxy.socket_path, port, "/usr/bin/python3")
        relay = subprocess.Popen([*egress.argv_prefix, "sleep", marker], start_new_session=True)
        deadline = time.monotonic() + 30
        while not _commands(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _commands(marker), "the command never started"
        relay.kill()
        relay.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _commands(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _commands(marker)


def test_decisions_are_logged_with_host_and_port_never_headers(web, caplog):
    caplog.set_level(logging.INFO, logger="app.sandbox.egress")
    secret = "Bearer s3cret-token-value"
    with EgressProxy(_settings()) as proxy:
        refused = _raw(
            proxy, f"GET http://127.0.0.1:{web}/x HTTP/1.1\r\nAuthorization: {secret}\r\n\r\n".encode()
        )
    assert refused.startswith(b"HTTP/1.1 403")
    with EgressProxy(_settings(allow_private=True)) as proxy:
        allowed = _raw(
            proxy, f"GET http://127.0.0.1:{web}/x HTTP/1.1\r\nAuthorization: {secret}\r\n\r\n".encode()
        )
    assert allowed.startswith(b"HTTP/1.0 200")
    messages = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert (
        "WARNING",
        f"egress proxy refused 127.0.0.1:{web}: 127.0.0.1 is a loopback address; "
        "only public addresses may be fetched (tools.allow_private_network is off)",
    ) in messages
    assert ("INFO", f"egress proxy allowed 127.0.0.1:{web}") in messages
    assert secret not in caplog.text and "/x" not in caplog.text


def test_a_relay_that_cannot_listen_says_so_and_does_not_run_the_command(tmp_path):
    with socket.socket() as taken, EgressProxy(_settings()) as proxy:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        egress = egress_for(proxy.socket_path, taken.getsockname()[1], "/usr/bin/python3")
        done = subprocess.run(
            [*egress.argv_prefix, "touch", str(tmp_path / "ran")], capture_output=True, text=True, timeout=30
        )
    assert done.returncode == 125
    assert "egress relay: cannot listen on 127.0.0.1:" in done.stderr
    assert not (tmp_path / "ran").exists()


def test_metadata_in_any_disguise_is_refused_even_with_allow_private_network():
    with EgressProxy(_settings(allow_private=True)) as proxy:
        for target in ("[::ffff:169.254.169.254]:80", "0xa9fea9fe:80", "metadata.google.internal:80"):
            answer = _raw(proxy, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
            assert answer.startswith(b"HTTP/1.1 403"), (target, answer)
            assert b"metadata" in answer
        answer = _raw(proxy, b"GET http://[::ffff:a9fe:a9fe]/latest/meta-data/ HTTP/1.1\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 403") and b"169.254.169.254 inside an IPv6 address" in answer


def test_the_documented_wiring_a_read_only_socket_at_the_fixed_path_works(web):
    # What the jail builder does: the socket alone, read-only, at SOCKET_IN_JAIL under a tmpfs.
    egress = egress_for(SOCKET_IN_JAIL, PORT, "/usr/bin/python3")
    fetch = f"curl -sS --noproxy '' http://127.0.0.1:{web}/wired"
    with EgressProxy(_settings(allow_private=True)) as proxy:
        argv = [BWRAP or "bwrap", "--unshare-all", "--unshare-user", "--uid", "1000", "--die-with-parent"]
        argv += [
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--tmpfs",
            "/run",
        ]
        argv += ["--ro-bind", proxy.socket_path, SOCKET_IN_JAIL, "--", *egress.argv_prefix, "sh", "-c", fetch]
        done = subprocess.run(
            argv, env={"PATH": "/usr/bin:/bin", **egress.env}, capture_output=True, text=True
        )
    assert done.stdout == "hello /wired proxy-auth=None", done
