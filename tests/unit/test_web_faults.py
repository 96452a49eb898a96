"""What a request that failed unexpectedly is answered, and a socket's token check meeting a
passing fault: kept open, checked again (over a real socket: tests/integration/test_redis_outage.py)."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from sqlalchemy.exc import OperationalError

from app.errors import UnauthorizedError
from app.web import faults, websocket


def test_a_passing_fault_is_a_503_to_retry_and_anything_else_a_500_that_says_little():
    dropped = OperationalError("SELECT 1", {}, ConnectionError("server closed the connection"))
    assert faults.answer(dropped) == (503, {"error": faults.UNREACHABLE})
    assert faults.answer(redis.ConnectionError("refused")) == (503, {"error": faults.UNREACHABLE})
    assert faults.answer(KeyError("secret-looking detail")) == (500, {"error": "internal error"})


def test_a_sockets_token_check_that_meets_a_passing_fault_keeps_the_socket(monkeypatch):
    def unreachable(*_args: Any) -> None:
        raise OperationalError("SELECT", {}, ConnectionError("server closed the connection"))

    monkeypatch.setattr(websocket, "_authorized", unreachable)
    assert websocket._still_authorized(None, "token", "ws") is False  # type: ignore[arg-type]

    def revoked(*_args: Any) -> None:
        raise UnauthorizedError("token revoked")

    monkeypatch.setattr(websocket, "_authorized", revoked)
    with pytest.raises(UnauthorizedError):  # the socket closes, as before
        websocket._still_authorized(None, "token", "ws")  # type: ignore[arg-type]
    monkeypatch.setattr(websocket, "_authorized", lambda *_args: None)
    assert websocket._still_authorized(None, "token", "ws") is True  # type: ignore[arg-type]
