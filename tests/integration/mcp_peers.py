"""The MCP servers the tests talk to: our fake (tests/fakes/mcp_server.py) over stdio or streamable
HTTP, and the real third-party ones `.ci/run` installs (server-everything, mcp-server-time)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.services import free_port, is_ci

ROOT = Path(__file__).resolve().parents[2]
EVERYTHING = ROOT / "tests/.npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"


class FakeMCP:
    """The fake server's control folder: what it lists, what it was asked, what was cancelled."""

    def __init__(self, control: Path) -> None:
        self.control = control
        control.mkdir(parents=True, exist_ok=True)
        self.http: subprocess.Popen[bytes] | None = None
        self.port: int | None = None

    def stdio(self, without: tuple[str, ...] = ()) -> dict[str, Any]:
        """The server over stdio; `without`: list methods it answers "Method not found"."""
        dropped = [arg for method in without for arg in ("--without", method)]
        return {
            "command": sys.executable,
            "args": ["-m", "tests.fakes.mcp_server", "--control", str(self.control), *dropped],
            "cwd": str(ROOT),
        }

    def start_http(self, port: int | None = None) -> dict[str, Any]:
        self.port = port or self.port or free_port()
        log = open(self.control / "http.log", "ab")  # noqa: SIM115 - closed with the process
        self.http = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.fakes.mcp_server",
                "--control",
                str(self.control),
                "--http",
                str(self.port),
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_for_port(self.port)
        return {"type": "http", "url": f"http://127.0.0.1:{self.port}/mcp"}

    def stop_http(self) -> None:
        if self.http is not None:
            self.http.kill()
            self.http.wait(10)
            self.http = None

    def lists(self, tools: list[str] = (), resources: list[str] = (), prompts: list[str] = ()) -> None:  # type: ignore[assignment]
        (self.control / "lists.json").write_text(
            json.dumps({"tools": list(tools), "resources": list(resources), "prompts": list(prompts)})
        )

    def faults(self, **methods: str) -> None:
        """Make list methods fail or hang: `faults(tools_list="hang")`; `faults()` heals them all."""
        wanted = {name.replace("_", "/"): fault for name, fault in methods.items()}
        (self.control / "faults.new").write_text(json.dumps(wanted))
        (self.control / "faults.new").replace(self.control / "faults.json")  # read whole or not at all

    def hung(self) -> list[str]:
        """The list methods that started to hang, one line per request."""
        path = self.control / "faults.log"
        return path.read_text().splitlines() if path.exists() else []

    def pid(self) -> int:
        """The process id of the server that started last."""
        return int((self.control / "pid").read_text())

    def calls(self) -> list[str]:
        path = self.control / "calls.log"
        return path.read_text().splitlines() if path.exists() else []

    def cancelled(self) -> list[str]:
        path = self.control / "cancelled.log"
        return path.read_text().splitlines() if path.exists() else []


def wait_for_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


def everything_stdio() -> dict[str, Any]:
    return {"command": _node(), "args": [str(_everything()), "stdio"]}


def start_everything_http() -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    port = free_port()
    proc = subprocess.Popen(
        [_node(), str(_everything()), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_port(port)
    return proc, {"type": "http", "url": f"http://127.0.0.1:{port}/mcp"}


def time_server() -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        _missing("node is not installed")
    return str(node)


def _everything() -> Path:
    if not EVERYTHING.exists():
        _missing(f"{EVERYTHING} is missing: .ci/run installs it with npm")
    return EVERYTHING


def _missing(why: str) -> None:
    if is_ci():
        pytest.fail(why)
    pytest.skip(why)
