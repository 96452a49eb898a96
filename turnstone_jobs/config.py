"""Where the client finds its server and token: arguments first, then the environment."""

from __future__ import annotations

import os

DEFAULT_URL = "http://127.0.0.1:8080"
URL_ENV = "TURNSTONE_URL"
TOKEN_ENV = "TURNSTONE_TOKEN"
DEFAULT_TIMEOUT = 30.0  # seconds for one HTTP request
DEFAULT_RECONNECT_TIMEOUT = 60.0  # how long a dropped event stream keeps trying to reconnect


def server_url(given: str | None = None) -> str:
    return (given or os.environ.get(URL_ENV) or DEFAULT_URL).rstrip("/")


def token(given: str | None = None) -> str | None:
    return given or os.environ.get(TOKEN_ENV) or None
