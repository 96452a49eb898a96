"""A port for a server this process is about to start.

A port the kernel hands out as free (bind to port 0) is free only until the server binds it;
in between, an outgoing connection (a Redis or database client) may be given that very port,
and the server then cannot start. So a listening port is chosen below the kernel's range for
outgoing connections, where no client is ever given one, and checked free.
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

LISTEN_PORTS = range(20_000, 32_000)
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
TRIES = 200

_given: set[int] = set()  # handed out by this process: not handed out twice
_lock = threading.Lock()


def listen_port(host: str = "127.0.0.1") -> int:
    low = _ephemeral_low()
    with _lock:
        candidates = [p for p in LISTEN_PORTS if p < low and p not in _given]
        for port in random.sample(candidates, min(len(candidates), TRIES)):
            if _bindable(host, port):
                _given.add(port)
                return port
    with socket.socket() as s:  # no room below the outgoing range on this machine
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _ephemeral_low() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768
