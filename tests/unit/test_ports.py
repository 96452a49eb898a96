"""A listening port is chosen below the kernel's range for outgoing connections (where no client
connection can take it before the server binds it), free, and never handed out twice."""

from __future__ import annotations

import socket

from app import ports


def test_ports_are_below_the_outgoing_range_free_and_never_repeated():
    low = ports._ephemeral_low()
    chosen = [ports.listen_port() for _ in range(50)]
    assert len(set(chosen)) == 50
    assert all(port < low for port in chosen) or low <= ports.LISTEN_PORTS.start
    for port in chosen[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free when handed out


def test_a_port_in_use_is_passed_over(monkeypatch):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        monkeypatch.setattr(ports, "LISTEN_PORTS", range(taken, taken + 1))
        monkeypatch.setattr(ports, "_ephemeral_low", lambda: 65_536)
        held.listen()
        assert ports.listen_port() != taken
