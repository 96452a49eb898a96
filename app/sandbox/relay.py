"""The in-jail half of the egress proxy: 127.0.0.1:PORT inside the jail, relayed to its Unix socket.

A jail in `proxy` mode has its own network namespace, so it cannot reach a TCP port of the
host; the host's EgressProxy (app/sandbox/egress.py) listens on a Unix socket instead, and
this script, run inside the jail, listens on 127.0.0.1:PORT and copies each connection to
that socket. It starts the user's command as its child and exits with the command's exit
status (128+N when a signal N ended it); the command gets SIGKILL if the relay dies, so
neither outlives the other.

The script is stdlib-only and imports nothing of `app`: it runs as `python -I -c SOURCE`.

The interface for the jail builder:

    egress = egress_for(SOCKET_IN_JAIL, port, python)
    # 1. bind proxy.socket_path read-only at SOCKET_IN_JAIL: `--tmpfs /run --ro-bind PATH
    #    /run/turnstone-egress.sock` (bwrap must create the mount point, so it goes under a
    #    writable tmpfs, not the read-only root; connecting to a socket needs no write access)
    # 2. argv = [*egress.argv_prefix, *command]
    # 3. env.update(egress.env): HTTP_PROXY, HTTPS_PROXY, ALL_PROXY (and lower case) =
    #    http://127.0.0.1:PORT, NO_PROXY=localhost,127.0.0.1 (the jail's own loopback)

Usage of the script itself: relay.py SOCKET PORT -- COMMAND [ARG...]
"""

from __future__ import annotations

import ctypes
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

SOCKET_IN_JAIL = "/run/turnstone-egress.sock"
DEFAULT_PORT = 3128
CHUNK = 64 * 1024
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Egress:
    """What the jail builder adds for `proxy` mode: an argv prefix and environment variables."""

    argv_prefix: tuple[str, ...]
    env: dict[str, str]


def egress_for(socket_in_jail: str = SOCKET_IN_JAIL, port: int = DEFAULT_PORT, python: str = "") -> Egress:
    """The relay's argv prefix and the proxy environment, for a socket bound at `socket_in_jail`."""
    source = Path(__file__).read_text(encoding="utf-8")
    argv = (python or sys.executable, "-I", "-c", source, socket_in_jail, str(port), "--")
    url = f"http://127.0.0.1:{port}"
    env = {name: url for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")}
    env.update({name.lower(): url for name in list(env)})
    env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1"
    return Egress(argv, env)


def _relay(client: socket.socket, socket_path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(socket_path)
        peers = {client: upstream, upstream: client}
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                selector.register(sock, selectors.EVENT_READ)
            open_reads = 2
            while open_reads:
                for key, _ in selector.select():
                    source = key.fileobj
                    data = source.recv(CHUNK)  # type: ignore[union-attr]
                    if data:
                        peers[source].sendall(data)  # type: ignore[index]
                        continue
                    selector.unregister(source)
                    open_reads -= 1
                    peers[source].shutdown(socket.SHUT_WR)  # type: ignore[index]
    except OSError:
        pass  # either side went away
    finally:
        upstream.close()
        client.close()


def _serve(listener: socket.socket, socket_path: str) -> None:
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_relay, args=(client, socket_path), daemon=True).start()


def _die_with(parent: int) -> None:
    # The command gets SIGKILL when the relay dies, however it dies; a relay that died
    # before the signal was armed has already left the command an orphan, so it stops here.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(137)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: relay SOCKET PORT -- COMMAND [ARG...]\n")
        return 2
    socket_path, port, command = argv[0], int(argv[1]), argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
    except OSError as exc:
        sys.stderr.write(f"egress relay: cannot listen on 127.0.0.1:{port} ({exc.strerror or exc})\n")
        return 125
    threading.Thread(target=_serve, args=(listener, socket_path), daemon=True).start()
    for name in ("SIGTERM", "SIGINT", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        relay = os.getpid()
        child = subprocess.Popen(command, preexec_fn=lambda: _die_with(relay))
    except OSError as exc:
        sys.stderr.write(f"{command[0]}: {exc.strerror or exc}\n")
        return 127
    status = child.wait()
    return 128 - status if status < 0 else status


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))
