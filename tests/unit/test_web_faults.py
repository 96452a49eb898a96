"""What a request that failed unexpectedly is answered, and a socket's token check meeting a
passing fault: kept open, checked again (over a real socket: tests/integration/test_redis_outage.py)."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from sqlalchemy.exc import OperationalError

from app.errors import NotFoundError, UnauthorizedError
from app.users.principal import Principal
from app.web import faults, websocket


def test_a_passing_fault_is_a_503_to_retry_and_anything_else_a_500_that_says_little():
    dropped = OperationalError("SELECT 1", {}, ConnectionError("server closed the connection"))
    assert faults.answer(dropped) == (503, {"error": faults.UNREACHABLE})
    assert faults.answer(redis.ConnectionError("refused")) == (503, {"error": faults.UNREACHABLE})
    assert faults.answer(KeyError("secret-looking detail")) == (500, {"error": "internal error"})


def test_a_sockets_token_check_that_meets_a_passing_fault_keeps_the_socket(monkeypatch):
    """The hub's check of a token's open sockets: a passing fault refuses nothing (the sockets stay
    and are checked again shortly); a revoked token refuses each of them; a good one none."""
    work = websocket.Work(None)  # type: ignore[arg-type]
    ws_ids = {"a", "b"}

    def unreachable(*_args: Any) -> None:
        raise OperationalError("SELECT", {}, ConnectionError("server closed the connection"))

    monkeypatch.setattr(websocket.tokens, "authenticate", unreachable)
    assert work.recheck("token", ws_ids) == {"a": None, "b": None}

    def revoked(*_args: Any) -> None:
        raise UnauthorizedError("token revoked")

    monkeypatch.setattr(websocket.tokens, "authenticate", revoked)
    assert work.recheck("token", ws_ids) == {"a": (401, "token revoked"), "b": (401, "token revoked")}

    def gone(_rt: Any, _who: Any, view_args: dict[str, Any]) -> None:
        if view_args["ws_id"] == "b":
            raise NotFoundError("no workstream b")

    reader = Principal(name="u", user_id="u1", scopes=frozenset({"read"}))
    monkeypatch.setattr(websocket.tokens, "authenticate", lambda *_args: reader)
    monkeypatch.setattr(websocket.access, "check_owned", gone)
    assert work.recheck("token", ws_ids) == {"a": None, "b": (404, "no workstream b")}

    def bug(*_args: Any) -> None:
        raise RuntimeError("a bug, not a passing fault")

    monkeypatch.setattr(websocket.tokens, "authenticate", bug)
    with pytest.raises(RuntimeError):  # logged by the hub's sweep, never taken for a pass
        work.recheck("token", ws_ids)
