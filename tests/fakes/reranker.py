"""A fake Cohere/Jina-style reranker on 127.0.0.1: real HTTP, `POST /rerank`, and a record of
every request.

It scores a document by the share of the query's words (of four letters or more: no "the" or
"on") that it contains, 0 to 1, so relevance is predictable in tests. `fail(status)`,
`garbage()`, `raw(body)` and `stall(seconds)` script a broken endpoint;
`flat()` gives every document the same score (a reranker that separates nothing); `logits()`
gives scores outside 0..1, as a raw cross-encoder would.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_WORD = re.compile(r"[a-z0-9]{4,}")


def overlap(query: str, document: str) -> float:
    words = set(_WORD.findall(query.lower()))
    return len(words & set(_WORD.findall(document.lower()))) / len(words) if words else 0.0


class FakeReranker:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.reset()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                return None

            def do_POST(self) -> None:
                fake._answer(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def reset(self) -> None:
        with self._lock:
            self.status, self.delay, self.mode = 200, 0.0, "overlap"
            self.body: bytes | None = None  # a raw answer instead of scores, when set
            self.requests = []

    def fail(self, status: int) -> None:
        with self._lock:
            self.status = status

    def garbage(self) -> None:
        with self._lock:
            self.body = b"<html>upstream error</html>"

    def raw(self, body: bytes) -> None:
        """Answer 200 with `body` as it is."""
        with self._lock:
            self.body = body

    def stall(self, seconds: float) -> None:
        with self._lock:
            self.delay = seconds

    def flat(self) -> None:
        with self._lock:
            self.mode = "flat"

    def logits(self) -> None:
        with self._lock:
            self.mode = "logits"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _scores(self, query: str, documents: list[str]) -> list[float]:
        if self.mode == "flat":
            return [0.5] * len(documents)
        scores = [overlap(query, document) for document in documents]
        return [12 * score - 6 for score in scores] if self.mode == "logits" else scores

    def _answer(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        payload = json.loads(request.rfile.read(length) or b"{}")
        with self._lock:
            self.requests.append(
                {"path": request.path, "body": payload, "authorization": request.headers.get("Authorization")}
            )
            status, body, delay = self.status, self.body, self.delay
            scores = self._scores(str(payload.get("query", "")), list(payload.get("documents", [])))
        if delay:
            time.sleep(delay)
        ranked = sorted(enumerate(scores), key=lambda pair: -pair[1])
        answer = {"results": [{"index": index, "relevance_score": score} for index, score in ranked]}
        data = body if body is not None else json.dumps(answer).encode()
        if request.path != "/rerank":
            status = 404
        try:
            request.send_response(status)
            request.send_header("Content-Type", "application/json")
            request.send_header("Content-Length", str(len(data)))
            request.end_headers()
            request.wfile.write(data)
        except OSError:
            pass  # the client gave up waiting (the timeout test)
