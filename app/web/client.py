"""The browser client: `/` serves the single page, `/static/...` its plain ES modules and CSS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Blueprint, send_from_directory

STATIC_DIR = Path(__file__).with_name("static")

# Defence in depth only: the client never turns model or tool text into HTML, and
# this policy would stop an injected script or inline handler if it ever did.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
    # the preview pane frames previews served from here (each inert by its own headers)
    "frame-src 'self'"
)

client = Blueprint("client", __name__)


def _secured(response: Any) -> Any:
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    # No build step and no hashed names: ask the browser to revalidate each load.
    response.headers["Cache-Control"] = "no-cache"
    return response


@client.get("/")
def index() -> Any:
    return _secured(send_from_directory(STATIC_DIR, "index.html"))


@client.get("/static/<path:filename>")
def static(filename: str) -> Any:
    return _secured(send_from_directory(STATIC_DIR, filename))
