"""How preview content is reached and kept inert: short-lived signed links (an iframe or an
image cannot send the API token), and the headers each kind is served with.

A link is `/v1/api/previews/{id}/content?exp=…&remote=0|1&sig=…`, signed with the preview's own
key (never sent anywhere), so it opens that one preview, as asked, until it expires.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import re
import time
from urllib.parse import quote

from app.storage.models import Preview

LINK_SECONDS = 600
_HEAD = re.compile(rb"<head(\s[^>]*)?>", re.IGNORECASE)
_ALLOW_REMOTE = "img-src * data: blob:; style-src * 'unsafe-inline'; font-src * data:; media-src *"
_NO_REMOTE = "img-src data:; style-src 'unsafe-inline'; font-src data:; media-src 'none'"


def _signature(row: Preview, expires: int, remote: bool) -> str:
    message = f"{row.id}:{expires}:{int(remote)}".encode()
    return hmac.new(row.signing_key.encode(), message, hashlib.sha256).hexdigest()


def content_link(row: Preview, remote: bool = False, now: float | None = None) -> str:
    expires = int((time.time() if now is None else now) + LINK_SECONDS)
    sig = _signature(row, expires, remote)
    return f"/v1/api/previews/{row.id}/content?exp={expires}&remote={int(remote)}&sig={sig}"


def is_valid(row: Preview, expires: str, remote: str, sig: str, now: float | None = None) -> bool:
    if not expires.isdigit() or remote not in ("0", "1") or len(expires) > 12:
        return False
    if int(expires) < (time.time() if now is None else now):
        return False
    return hmac.compare_digest(_signature(row, int(expires), remote == "1"), sig)


def headers(row: Preview, remote: bool) -> dict[str, str]:
    """Served so that nothing in it runs: a sandbox without scripts or an origin, and (for
    pages) no remote images, styles or fonts unless this link turns them on."""
    common = {
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cross-Origin-Resource-Policy": "same-origin",
        "Cache-Control": "private, max-age=300",
        "Content-Disposition": f"inline; filename*=UTF-8''{quote(_filename(row), safe='')}",
    }
    if row.kind == "pdf":
        # Chromium will not show a PDF in a sandboxed frame; its viewer is the sandbox here.
        policy = "frame-ancestors 'self'"
    elif row.kind == "web":
        loads = _ALLOW_REMOTE if remote else _NO_REMOTE
        policy = f"sandbox; default-src 'none'; {loads}; form-action 'none'; frame-ancestors 'self'"
    else:
        policy = "sandbox; default-src 'none'; frame-ancestors 'self'"
    return {**common, "Content-Security-Policy": policy}


def _filename(row: Preview) -> str:
    extension = {"web": ".html", "pdf": ".pdf", "markdown": ".md", "text": ".txt"}
    suffix = extension.get(row.kind) or "." + row.media_type.split(";")[0].split("/")[-1].split("-")[-1]
    stem = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in row.title)[:80] or "preview"
    return stem + suffix


def with_base(page: bytes, base_url: str) -> bytes:
    """The page with a `<base>` at the top of its head, so that its relative links and images
    point at its own site (asked for only with remote content on)."""
    tag = f'<base href="{html.escape(base_url, quote=True)}">'.encode()
    match = _HEAD.search(page[:65536])
    at = match.end() if match else 0
    return page[:at] + tag + page[at:]
