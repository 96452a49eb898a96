"""Attachments reach the model: a file a person attached to a workstream and sent with a message
goes to the model in that message, as what the model can take (docs/attachments.md).

- an image (PNG, JPEG, GIF, WebP, as its bytes say, whatever the upload claimed) as an image
  part; a model that cannot see gets the `[roles] perception` model's description of it
  (app/attachments/perception.py), or a note that says it was not shown;
- a PDF as its text, read once when it was attached, in a child process with limits
  (app/attachments/pdf_text.py); to a model that reads PDFs (`supports_pdf`), as the file;
- UTF-8 text as itself, up to INLINE_TEXT_CHARS;
- anything else as a line naming it, and how a tool reads it (`read_file attachment:<id>`).

A message names its attachments by id (`POST .../send {attachments}`); the turn keeps the list
and its user message carries it, so the conversation is what was sent however it is replayed.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from sqlmodel import col, select

from app.errors import NotFoundError, UnprocessableError
from app.providers.content import SENDABLE_MEDIA_TYPES
from app.storage.database import Database
from app.storage.models import Attachment, Workstream
from app.tools.files.images import MAX_IMAGE_BYTES

MAX_PER_MESSAGE = 16
INLINE_TEXT_CHARS = 100_000  # of a text file or a PDF's text, what the message carries
# A PDF sent as a document part to a model that reads them, at most: Anthropic takes 100 pages
# and 32 MB a request; a larger one goes as its text.
DOCUMENT_MAX_BYTES = 10 * 1024 * 1024
DOCUMENT_MAX_PAGES = 100
PDF = "application/pdf"

# Leading bytes of the types the model is sent as themselves (RIFF....WEBP is checked apart).
_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", PDF),
)


def sniffed(data: bytes) -> str | None:
    """The type `data` is by its first bytes (an image the model may see, or a PDF), else None."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    for signature, media_type in _SIGNATURES:
        if data.startswith(signature):
            return media_type
    return None


def summary(row: Attachment) -> dict[str, Any]:
    """How a message names an attachment (stored with the turn and its message, shown in events
    and the history)."""
    return {
        "attachment_id": row.id,
        "filename": row.filename,
        "media_type": row.media_type,
        "size": row.size,
    }


def header(item: dict[str, Any], what: str) -> str:
    return f"\n\n[attached {item['filename']} ({what}): attachment:{item['attachment_id']}]"


Loader = Callable[[str], tuple[Attachment, bytes] | None]


def parts(text: str, attached: list[dict[str, Any]], load: Loader) -> list[dict[str, Any]]:
    """A user message's content for the model: its text, then each attachment as a part (`load`
    gives an attachment's row and bytes, None once it is gone)."""
    out: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for item in attached:
        found = load(str(item.get("attachment_id")))
        if found is None:
            out.append({"type": "text", "text": header(item, "deleted since: not shown")})
            continue
        row, data = found
        out.extend(_parts(item, row, data))
    return out


def _parts(item: dict[str, Any], row: Attachment, data: bytes) -> list[dict[str, Any]]:
    kind = sniffed(data)
    size = f"{len(data):,} bytes"
    if kind in SENDABLE_MEDIA_TYPES:
        if len(data) > MAX_IMAGE_BYTES:
            note = f"{kind}, {size}: too large to show, the limit is {MAX_IMAGE_BYTES:,} bytes"
            return [{"type": "text", "text": header(item, note)}]
        image = _file_part("image", kind, row, data)
        if row.description:
            image["description"] = row.description
        return [{"type": "text", "text": header(item, f"{kind}, {size}")}, image]
    if kind == PDF:
        if row.text is None:
            as_text = header(item, f"PDF, {size}; {row.text_note or 'its text was not read'}")
        else:
            pages = f"{row.pages} page{'s' if row.pages != 1 else ''}"
            as_text = header(item, f"PDF, {pages}; its text follows") + "\n" + _cut(row.text)
        if len(data) > DOCUMENT_MAX_BYTES or (row.pages or 0) > DOCUMENT_MAX_PAGES:
            return [{"type": "text", "text": as_text}]
        # A model that reads PDFs (`supports_pdf`) is sent the file after `header`; any other, `text`.
        document = _file_part("document", PDF, row, data)
        document.update(header=header(item, f"PDF, {size}"), text=as_text, pages=row.pages)
        return [document]
    text = _utf8(data)
    if text is not None:
        return [
            {
                "type": "text",
                "text": header(item, f"{row.media_type}, {size}; its text follows") + "\n" + _cut(text),
            }
        ]
    return [{"type": "text", "text": header(item, f"{row.media_type}, {size}; not text: read_file reads it")}]


def _file_part(part_type: str, media_type: str, row: Attachment, data: bytes) -> dict[str, Any]:
    """The file itself, as a part the wire formats send (app/providers/content.py)."""
    return {
        "type": part_type,
        "media_type": media_type,
        "data": base64.b64encode(data).decode("ascii"),
        "attachment_id": row.id,
        "filename": row.filename,
    }


def _utf8(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\x00" in text else text


def _cut(text: str) -> str:
    if len(text) <= INLINE_TEXT_CHARS:
        return text
    rest = len(text) - INLINE_TEXT_CHARS
    return f"{text[:INLINE_TEXT_CHARS]}\n[… {rest:,} more characters: read_file reads the rest]"


def for_message(db: Database, ws_id: str, ids: list[str] | None) -> list[dict[str, Any]] | None:
    """What a message sent with these attachment ids carries (each once, in order); None for
    none. NotFoundError for a workstream that is not there, UnprocessableError for an id that
    is not one of its attachments."""
    if not ids:
        return None
    wanted = list(dict.fromkeys(ids))
    with db.reader() as s:
        query = select(Attachment).where(col(Attachment.id).in_(wanted), col(Attachment.ws_id) == ws_id)
        found = {row.id: row for row in s.exec(query).all()}
        missing = next((i for i in wanted if i not in found), None)
        if missing is not None and s.get(Workstream, ws_id) is None:
            raise NotFoundError(f"no workstream {ws_id}")
    if missing is not None:
        raise UnprocessableError(
            f"attachments: {missing!r} is not an attachment of this workstream (attach the file first)",
            field="attachments",
        )
    return [summary(found[i]) for i in wanted]
