"""A fake SearxNG on 127.0.0.1: real HTTP, scripted answers, and a record of every query.

`answer(results)` scripts the next answers' results (SearxNG's JSON shape); `fail(status)`,
`garbage()` and `stall(seconds)` script a broken backend. `queries` holds each request's
query parameters, as the backend saw them.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


def result(title: str, url: str, content: str = "") -> dict[str, Any]:
    return {"title": title, "url": url, "content": content, "engine": "fake", "score": 1.0}


class FakeSearxNG:
    def __init__(self) -> None:
        self.queries: list[dict[str, str]] = []
        self.results: list[dict[str, Any]] = []
        self.status = 200
        self.body: bytes | None = None  # raw body instead of JSON, when set
        self.delay = 0.0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                return None

            def do_GET(self) -> None:
                fake._answer(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def answer(self, results: list[dict[str, Any]]) -> None:
        with self._lock:
            self.results, self.status, self.body, self.delay = list(results), 200, None, 0.0

    def fail(self, status: int) -> None:
        with self._lock:
            self.status = status

    def garbage(self) -> None:
        with self._lock:
            self.body = b"<html>Too many requests</html>"

    def stall(self, seconds: float) -> None:
        with self._lock:
            self.delay = seconds

    def reset(self) -> None:
        self.answer([])
        with self._lock:
            self.queries.clear()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, request: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(request.path)
        with self._lock:
            self.queries.append({k: v[-1] for k, v in parse_qs(parts.query).items()} | {"path": parts.path})
            status, body, delay = self.status, self.body, self.delay
            payload = {"query": "", "number_of_results": len(self.results), "results": self.results}
        if delay:
            time.sleep(delay)
        if parts.path != "/search":
            status = 404
        data = body if body is not None else json.dumps(payload).encode()
        try:
            request.send_response(status)
            request.send_header("Content-Type", "application/json" if body is None else "text/html")
            request.send_header("Content-Length", str(len(data)))
            request.end_headers()
            request.wfile.write(data)
        except OSError:
            pass  # the client gave up waiting (the timeout test)
