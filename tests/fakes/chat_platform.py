"""A fake chat platform on 127.0.0.1: Discord's webhook and bot endpoints, a JSON webhook receiver
and ntfy topics, over real HTTP, with a record of every post and a switch to fail.

Point `[notify] discord_api_base` at `discord_api_base` and `ntfy_base_url` at `ntfy_base_url`;
a generic webhook posts to `webhook_url(name)`. `posts` holds what arrived (kind, path, headers,
body); `wait_for(...)` waits for one; `fail(status)` answers every post so; `go_down()` closes
the listening socket (connections are refused) until `come_back()`.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WEBHOOK = re.compile(r"/discord/api/webhooks/([0-9]+)/([A-Za-z0-9_.-]+)")
BOT = re.compile(r"/discord/api/v10/channels/([0-9]+)/messages")
NTFY = re.compile(r"/ntfy/([A-Za-z0-9_-]+)")
HOOK = re.compile(r"/hooks/([A-Za-z0-9_-]+)")


@dataclass(frozen=True)
class Post:
    kind: str  # discord-webhook, discord-bot, webhook, ntfy
    target: str  # the webhook id, channel id, hook name or topic
    headers: dict[str, str]
    body: Any  # parsed JSON, or text (ntfy)

    @property
    def content(self) -> str:
        if isinstance(self.body, dict):
            return str(self.body.get("content", self.body.get("text", "")))
        return str(self.body)


class FakeChatPlatform:
    def __init__(self) -> None:
        self.posts: list[Post] = []
        self.status = 0  # 0: answer as the platform would
        self.bot_token: str | None = None  # the token a bot post must carry, when set
        self._changed = threading.Condition()
        self._port = 0
        self._server: ThreadingHTTPServer | None = None
        self.come_back()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def discord_api_base(self) -> str:
        return self.base + "/discord/api"

    @property
    def ntfy_base_url(self) -> str:
        return self.base + "/ntfy"

    def discord_webhook(self, webhook_id: str = "111", token: str = "hook-token") -> str:
        return f"{self.discord_api_base}/webhooks/{webhook_id}/{token}"

    def webhook_url(self, name: str) -> str:
        return f"{self.base}/hooks/{name}"

    # -- switches -------------------------------------------------------------------------------

    def reset(self) -> None:
        with self._changed:
            self.posts.clear()
            self.status = 0
            self.bot_token = None
        if self._server is None:
            self.come_back()

    def fail(self, status: int) -> None:
        self.status = status

    def go_down(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def come_back(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                return None

            def do_POST(self) -> None:
                fake._receive(self)

        server = ThreadingHTTPServer(("127.0.0.1", self._port), Handler)
        server.daemon_threads = True
        self._port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.go_down()

    # -- what arrived ---------------------------------------------------------------------------

    def wait_for(self, count: int = 1, timeout: float = 30.0, **match: str) -> list[Post]:
        """The posts matching `match` (kind=..., target=...), once there are `count` of them."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = [p for p in self.posts if all(getattr(p, k) == v for k, v in match.items())]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{count} post(s) matching {match} did not arrive; got {self.posts}")
                self._changed.wait(left)

    def _receive(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length)
        kind, target = self._route(handler.path)
        if kind is None:
            return self._answer(handler, 404, {"message": "404: Not Found"})
        if self.status:
            return self._answer(handler, self.status, {"message": "failing on purpose"})
        if (
            kind == "discord-bot"
            and self.bot_token
            and handler.headers.get("Authorization") != f"Bot {self.bot_token}"
        ):
            return self._answer(handler, 401, {"message": "401: Unauthorized"})
        try:
            body: Any = raw.decode() if kind == "ntfy" else json.loads(raw)
        except ValueError:
            return self._answer(handler, 400, {"message": "bad body"})
        if kind.startswith("discord") and not (
            isinstance(body, dict) and 0 < len(body.get("content", "")) <= 2000
        ):
            return self._answer(handler, 400, {"message": "content: 1-2000 characters"})
        with self._changed:
            self.posts.append(Post(kind, target, dict(handler.headers.items()), body))
            self._changed.notify_all()
        self._answer(handler, 204 if kind == "discord-webhook" else 200, {"id": str(len(self.posts))})

    @staticmethod
    def _route(path: str) -> tuple[str | None, str]:
        for kind, pattern in (
            ("discord-webhook", WEBHOOK),
            ("discord-bot", BOT),
            ("ntfy", NTFY),
            ("webhook", HOOK),
        ):
            found = pattern.fullmatch(path)
            if found:
                return kind, found.group(1)
        return None, ""

    @staticmethod
    def _answer(handler: BaseHTTPRequestHandler, status: int, body: dict[str, Any]) -> None:
        data = b"" if status == 204 else json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
