"""Work a request leaves to be done after its response has gone out, in the same thread.

A send answers 202 once its turn is stored; sending the turn's first step and publishing the
events that announce it follow right after the response (`turns.send`'s `defer`). Our gunicorn
worker (`JsonThreadWorker`) runs that work once it has written the response and before it
reads the connection's next request, so graceful shutdown waits for it like for the response.
Under any other server, and in a websocket's long-lived request, `deferrer()` is None and the
work is done before the answer, as it always was.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

_request = threading.local()


@contextmanager
def collecting() -> Iterator[None]:
    """Around one request: the work it defers runs when the block ends, each piece whatever
    the others did (a piece that fails is logged; the response is already out)."""
    _request.work = []
    try:
        yield
    finally:
        work, _request.work = _request.work, None
        for piece in work:
            try:
                piece()
            except Exception:
                log.exception("work left for after a response failed")


def deferrer() -> Callable[[Callable[[], None]], None] | None:
    """Where this request's work can be left for after its response; None where nothing
    would run it."""
    work: list[Callable[[], None]] | None = getattr(_request, "work", None)
    return work.append if work is not None else None
