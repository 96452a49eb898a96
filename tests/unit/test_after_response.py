"""Work a request leaves for after its response: run when the request ends, each piece whatever
the others did, and only where something will run it."""

from __future__ import annotations

import logging
import threading

from app.web import after_response


def test_work_left_for_after_the_response_runs_when_the_request_ends_each_piece_regardless(caplog):
    ran: list[str] = []

    def fails() -> None:
        raise ConnectionError("Redis is gone")

    with after_response.collecting():
        defer = after_response.deferrer()
        assert defer is not None
        defer(lambda: ran.append("first"))
        defer(fails)
        defer(lambda: ran.append("third"))
        assert ran == []
    assert ran == ["first", "third"]
    assert "work left for after a response failed" in caplog.text
    assert caplog.records[-1].levelno == logging.ERROR and "Redis is gone" in caplog.text
    assert after_response.deferrer() is None  # the request is over


def test_nothing_is_left_for_after_a_response_where_nothing_would_run_it():
    assert after_response.deferrer() is None  # no request (the websocket's, a test client's)
    seen: list[object] = []
    with after_response.collecting():
        other = threading.Thread(target=lambda: seen.append(after_response.deferrer()))
        other.start()
        other.join()
    assert seen == [None]  # another thread's request is its own
