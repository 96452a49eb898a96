"""Our gunicorn worker: gthread, with the errors gunicorn answers itself (a URL too long, a bad
header) sent as JSON like every other error, a read timeout on request bodies, the work a
request leaves for after its response (`app/web/after_response.py`), and websockets handed to
the process's hub once upgraded (`app/web/sockets/`), so that none holds a request thread.

Run it with `gunicorn --worker-class app.web.gunicorn_worker.JsonThreadWorker 'app:create_app()'`.
"""

from __future__ import annotations

import json
import resource
import ssl
from typing import Any

from gunicorn import util
from gunicorn.http import errors
from gunicorn.workers.gthread import ThreadWorker

from app.web import after_response
from app.web.sockets import handover

# A request whose body stops arriving (shorter than its Content-Length, a stalled client)
# is answered 400 after this long without a byte, instead of holding a thread for ever.
REQUEST_READ_TIMEOUT_SECONDS = 30.0

MAX_ERROR_DETAIL_CHARS = 200

# Parse errors that are not a plain 400; every other parse error is the client's and a 400
# (a Transfer-Encoding gunicorn does not know too: gunicorn's 501 would read as our fault).
# By name: older gunicorn releases lack some of them.
_STATUS = tuple(
    (kind, status, reason)
    for name, status, reason in (
        ("LimitRequestLine", 414, "URI Too Long"),
        ("LimitRequestHeaders", 431, "Request Header Fields Too Large"),
        ("ExpectationFailed", 417, "Expectation Failed"),
        ("ForbiddenProxyRequest", 403, "Forbidden"),
        # The application's own fault (a header it tried to send) or the server's configuration.
        ("InvalidResponseHeader", 500, "Internal Server Error"),
        ("InvalidResponseHeaderName", 500, "Internal Server Error"),
        ("ConfigurationProblem", 500, "Internal Server Error"),
    )
    if (kind := getattr(errors, name, None)) is not None
)


def error_status(exc: BaseException) -> tuple[int, str]:
    """The status gunicorn's error `exc` is answered with."""
    for kind, status, reason in _STATUS:
        if isinstance(exc, kind):
            return status, reason
    if isinstance(exc, errors.ParseException | ssl.SSLError):
        return 400, "Bad Request"
    return 500, "Internal Server Error"


def json_error(status: int, reason: str, detail: str) -> bytes:
    """A whole HTTP/1.1 response, closing the connection, whose body is `{"error": ...}`."""
    message = f"{reason.lower()}: {detail}" if detail else reason.lower()
    body = json.dumps({"error": message[: MAX_ERROR_DETAIL_CHARS + len(reason) + 2]}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


class JsonThreadWorker(ThreadWorker):
    """gunicorn's gthread worker, answering its own errors in JSON and timing out body reads."""

    @property
    def read_timeout(self) -> float:
        """Seconds; a subclass may set its own. Read from the settings when asked, in the worker:
        the master loads this class too and has no other use for the settings module."""

        return REQUEST_READ_TIMEOUT_SECONDS

    def init_process(self) -> None:
        _allow_many_sockets()
        super().init_process()

    def handle_request(self, req: Any, conn: Any) -> Any:
        if _is_websocket(req) and not isinstance(conn.sock, ssl.SSLSocket):
            return self._upgrade(req, conn)
        conn.sock.settimeout(self.read_timeout)
        with after_response.collecting():  # once the response is out (a send's events)
            return super().handle_request(req, conn)

    def _upgrade(self, req: Any, conn: Any) -> bool:
        """The view authorizes and answers 101; the connection then leaves gunicorn for the hub
        (`finish_request` lets it go without closing it)."""
        conn.sock.settimeout(self.read_timeout)
        with handover.slot() as slot:
            keep = super().handle_request(req, conn)
        if slot.opening is None:  # not upgraded (a 4xx): an ordinary response
            return bool(keep)
        conn.sock.settimeout(None)
        conn.handed_over = True
        from app.web.websocket import hub_of

        hub_of(self.wsgi).adopt(conn.sock, slot.opening)
        return False

    def finish_request(self, conn: Any, fs: Any) -> None:
        if getattr(conn, "handed_over", False):
            self.nr_conns -= 1  # the hub has it now: not closed here, and not counted
            return
        super().finish_request(conn, fs)

    def handle_exit(self, sig: Any, frame: Any) -> None:
        self._stop_sockets()
        super().handle_exit(sig, frame)

    def handle_quit(self, sig: Any, frame: Any) -> None:
        self._stop_sockets()
        super().handle_quit(sig, frame)

    def _stop_sockets(self) -> None:
        from app.web.websocket import HUB

        hub = getattr(self.wsgi, "extensions", {}).get(HUB)
        if hub is not None:
            hub.stop()

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        status, reason = error_status(exc)
        ip = addr[0] if addr else ""
        if status >= 500:
            self.log.exception("error handling a request from %s", ip)
        else:
            # The class only: the message of a bad request line holds the URL, and with it any token.
            self.log.warning("invalid request from %s: %s (%d)", ip, type(exc).__name__, status)
        detail = "" if status >= 500 else str(exc)
        try:
            util.write_nonblock(client, json_error(status, reason, detail))
        except OSError:
            self.log.debug("could not send the error response")


def _allow_many_sockets() -> None:
    """Each open websocket is a file descriptor: let this process open as many as the system
    allows it (the soft limit up to the hard one)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _is_websocket(req: Any) -> bool:
    return any(name == "UPGRADE" and value.lower() == "websocket" for name, value in req.headers)
