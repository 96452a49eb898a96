"""What kind of preview some bytes make (web, pdf, image, table, text, markdown), and how large
each kind may be.

Detection trusts the content first (PDF and image signatures, an HTML start), then the declared
media type, then the name's extension; bytes that are none of these and not UTF-8 text are
refused rather than shown as gibberish.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

KINDS = ("web", "pdf", "image", "table", "text", "markdown")
MAX_BYTES = {  # the spec's per-kind caps
    "web": 4 * 1024 * 1024,
    "pdf": 32 * 1024 * 1024,
    "image": 4 * 1024 * 1024,
    "table": 2 * 1024 * 1024,
    "text": 512 * 1024,
    "markdown": 512 * 1024,
}
LARGEST = max(MAX_BYTES.values())
# The media type each kind is served as (images keep their own).
SERVED_AS = {
    "web": "text/html; charset=utf-8",
    "pdf": "application/pdf",
    "text": "text/plain; charset=utf-8",
    "markdown": "text/plain; charset=utf-8",
}
_IMAGE_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_EXTENSIONS = {
    ".html": "web",
    ".htm": "web",
    ".pdf": "pdf",
    ".csv": "table",
    ".tsv": "table",
    ".json": "table",
    ".md": "markdown",
    ".markdown": "markdown",
}
_MEDIA_TYPES = {
    "text/html": "web",
    "application/xhtml+xml": "web",
    "application/pdf": "pdf",
    "text/csv": "table",
    "text/tab-separated-values": "table",
    "application/json": "table",
    "text/markdown": "markdown",
}


class KindError(ValueError):
    """The bytes cannot be shown as asked; the message says why, for the model to read."""


@dataclass(frozen=True)
class Classified:
    kind: str
    media_type: str  # what it is served as


def image_type(data: bytes) -> str | None:
    for signature, media_type in _IMAGE_SIGNATURES:
        if data.startswith(signature):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def classify(
    data: bytes, name: str = "", declared: str = "", kind: str | None = None, charset: str | None = None
) -> Classified:
    """The kind of `data` (named `name`, declared as media type `declared` with `charset`), or
    the `kind` asked for when the bytes can be shown that way; `KindError` when they cannot."""
    declared = declared.lower()
    found = kind or _detect(data, name, declared)
    if found == "image":
        media_type = image_type(data)
        if media_type is None:
            raise KindError("Error: not an image this pane shows (PNG, JPEG, GIF or WebP)")
    elif found == "pdf":
        if not data.startswith(b"%PDF-"):
            raise KindError("Error: not a PDF (it does not start with %PDF-)")
        media_type = SERVED_AS["pdf"]
    elif found == "web" and charset and charset.lower() not in ("utf-8", "utf8"):
        # a page in its own encoding: the browser decodes it as the site said
        media_type = f"text/html; charset={_token(charset)}"
    else:
        if not is_text(data):
            what = declared or "binary data"
            raise KindError(f"Error: cannot preview {what}: it is not text, a PDF or an image")
        media_type = _table_type(data, name, declared) if found == "table" else SERVED_AS[found]
    if len(data) > MAX_BYTES[found]:
        raise KindError(
            f"Error: too large to preview as {found}: {len(data):,} bytes, the limit is {MAX_BYTES[found]:,}"
        )
    return Classified(found, media_type)


def _detect(data: bytes, name: str, declared: str) -> str:
    if data.startswith(b"%PDF-"):
        return "pdf"
    if image_type(data):
        return "image"
    head = data[:512].lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html")):
        return "web"
    by_type = _MEDIA_TYPES.get(declared)
    by_name = _EXTENSIONS.get(os.path.splitext(name.lower())[1])
    found = by_type or by_name or "text"
    if found == "table" and (declared == "application/json" or name.lower().endswith(".json")):
        return "table" if _is_json_table(data) else "text"
    return found


def _is_json_table(data: bytes) -> bool:
    """A JSON array of objects or of arrays: rows a table can show."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return False
    return isinstance(value, list) and bool(value) and all(isinstance(row, dict | list) for row in value)


def is_text(data: bytes) -> bool:
    if b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _token(charset: str) -> str:
    """A charset name fit for a header (letters, digits, - _ . : only)."""
    kept = "".join(ch for ch in charset if ch.isascii() and (ch.isalnum() or ch in "-_.:"))
    return kept[:40] or "utf-8"


def _table_type(data: bytes, name: str, declared: str) -> str:
    """A table's format, for the client to parse: JSON rows, tab- or comma-separated."""
    if _is_json_table(data):
        return "application/json"
    first = data.split(b"\n", 1)[0]
    tabs = declared.startswith("text/tab-separated-values") or name.lower().endswith(".tsv")
    if tabs or (b"\t" in first and b"," not in first):
        return "text/tab-separated-values; charset=utf-8"
    return "text/csv; charset=utf-8"
