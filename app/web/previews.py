"""Attachments and previews over HTTP: upload a file to a workstream, list and describe its
previews (with short-lived signed links), and serve a preview's content inert."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from flask import Blueprint, Response, current_app, jsonify, request
from werkzeug.exceptions import ClientDisconnected, RequestEntityTooLarge

from app import attachments
from app.attachments import pdf_text
from app.engine.life import workstreams
from app.errors import BadRequestError, PayloadTooLargeError, UnprocessableError
from app.previews import links, store
from app.providers.content import SENDABLE_MEDIA_TYPES
from app.runtime import Runtime
from app.settings import MAX_NAME_CHARS
from app.storage.models import Attachment, Preview
from app.web import shapes
from app.web.contract import operation
from app.web.requests import path_id

ATTACHMENT_MAX_BYTES = 32 * 1024 * 1024  # a file attached to a workstream (the largest preview, a PDF)

previews = Blueprint("previews", __name__, url_prefix="/v1/api")
MULTIPART_HINT = "send the file as multipart/form-data, in a field named 'file'"
_MULTIPART_ROOM = 64 * 1024  # the form's own boundaries and headers around the file


def _rt() -> Runtime:
    return current_app.extensions["runtime"]


@previews.post("/workstreams/<ws_id>/attachments")
@operation(
    "Attach a file (a multipart form's `file` part, at most 32 MiB)",
    upload=True,
    answers={201: shapes.Attachment},
)
def attach(ws_id: str) -> Any:
    rt = _rt()
    workstreams.get(rt, path_id("workstream", ws_id))
    filename, media_type, data = _uploaded_file()
    # A PDF's text is read now, once, for the model (app/attachments/pdf_text.py).
    read = pdf_text.extract(data) if attachments.sniffed(data) == attachments.PDF else None
    if read is None:
        row = store.add_attachment(rt.db, ws_id, filename, media_type, data)
    else:
        row = store.add_attachment(rt.db, ws_id, filename, media_type, data, read.text, read.pages, read.note)
    return jsonify(attachment_summary(row)), 201


@previews.get("/workstreams/<ws_id>/attachments")
@operation("The workstream's attachments", answers={200: shapes.AttachmentList})
def list_attachments(ws_id: str) -> Any:
    rt = _rt()
    workstreams.get(rt, path_id("workstream", ws_id))
    return jsonify(attachments=[attachment_summary(row) for row in store.attachments(rt.db, ws_id)])


@previews.get("/workstreams/<ws_id>/attachments/<attachment_id>/content")
@operation(
    "An attachment's bytes, as a download (an image the model is sent as one is served as that image)",
    answers={200: "the file"},
    content=None,  # its own media type
)
def attachment_content(ws_id: str, attachment_id: str) -> Any:
    rt = _rt()
    workstreams.get(rt, path_id("workstream", ws_id))
    row, data = store.attachment(rt.db, ws_id, path_id("attachment", attachment_id))
    # Its type as its bytes say for an image a browser may show; anything else is a download of
    # bytes, never a page (the name a person gave it, and its claimed type, decide nothing).
    kind = attachments.sniffed(data)
    shown = kind if kind in SENDABLE_MEDIA_TYPES else "application/octet-stream"
    response = Response(data, status=200, mimetype=None, content_type=shown)
    disposition = "inline" if kind in SENDABLE_MEDIA_TYPES else "attachment"
    response.headers.update(
        {
            "Content-Disposition": f"{disposition}; filename*=UTF-8''{quote(row.filename, safe='')}",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "sandbox; default-src 'none'",
            "Cache-Control": "private, max-age=300",
        }
    )
    return response


@previews.get("/workstreams/<ws_id>/previews")
@operation("What open_preview showed in this workstream, oldest first", answers={200: shapes.PreviewList})
def list_previews(ws_id: str) -> Any:
    rt = _rt()
    workstreams.get(rt, path_id("workstream", ws_id))
    return jsonify(previews=[preview_summary(row) for row in store.previews(rt.db, ws_id)])


@previews.get("/previews/<preview_id>")
@operation("A preview, with fresh signed links to its content", answers={200: shapes.Preview})
def describe_preview(preview_id: str) -> Any:
    row = store.preview(_rt().db, path_id("preview", preview_id))
    return jsonify(preview_summary(row))


@previews.get("/previews/<preview_id>/content")
@operation(
    "A preview's content, served inert (public: the signed link is the permission)",
    query=shapes.PreviewLink,
    answers={200: "the content, with a sandboxing Content-Security-Policy"},
    content=None,  # the preview's own media type
    errors={403: "The link is invalid or has expired"},
)
def preview_content(preview_id: str, query: shapes.PreviewLink) -> Any:
    """No token here (an iframe cannot send one): the link's signature is the permission."""
    rt = _rt()
    row = store.preview(rt.db, path_id("preview", preview_id))
    remote = query.remote
    if not links.is_valid(row, query.exp, remote, query.sig):
        return jsonify(error="this preview link is invalid or has expired; ask for a new one"), 403
    data = store.preview_bytes(rt.db, row)
    if row.kind == "web" and remote == "1" and row.base_url:
        data = links.with_base(data, row.base_url)
    response = Response(data, status=200, mimetype=None, content_type=row.media_type)
    response.headers.update(links.headers(row, remote == "1"))
    return response


def _uploaded_file() -> tuple[str, str, bytes]:
    request.max_content_length = ATTACHMENT_MAX_BYTES + _MULTIPART_ROOM
    if (request.content_length or 0) > request.max_content_length:
        raise _too_large()
    if not request.mimetype.startswith("multipart/form-data"):
        raise BadRequestError(
            "body: send the file as multipart/form-data, in a field named 'file'", field="file"
        )
    try:
        upload = request.files.get("file")
    except RequestEntityTooLarge:
        raise _too_large() from None
    except ClientDisconnected:
        raise BadRequestError("body: shorter than its Content-Length", field="file") from None
    except ValueError:  # a malformed multipart body
        raise BadRequestError("body: not a readable multipart form", field="file") from None
    if upload is None:  # werkzeug also drops a part whose file name is not UTF-8
        raise BadRequestError(
            "file: required (a multipart field named 'file', its file name in UTF-8)", field="file"
        )
    data = upload.read(ATTACHMENT_MAX_BYTES + 1)
    if len(data) > ATTACHMENT_MAX_BYTES:
        raise _too_large()
    if not data:
        raise UnprocessableError("file: empty", field="file")  # the document cannot say "not empty"
    return _filename(upload.filename), _media_type(upload.mimetype), data


def _too_large() -> PayloadTooLargeError:
    return PayloadTooLargeError(
        f"file: over the attachment limit of {ATTACHMENT_MAX_BYTES:,} bytes", field="file"
    )


def _filename(name: str | None) -> str:
    """The name a person gave it, as a plain file name (no folders, no control characters)."""
    base = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    clean = "".join(ch for ch in base if ch.isprintable() and not 0xD800 <= ord(ch) <= 0xDFFF).strip()
    return clean[:MAX_NAME_CHARS] or "attachment"


def _media_type(value: str | None) -> str:
    text = (value or "").strip().lower()
    if not text or len(text) > 200 or not all(ch.isascii() and ch.isprintable() for ch in text):
        return "application/octet-stream"
    return text


def attachment_summary(row: Attachment) -> dict[str, Any]:
    return {
        "attachment_id": row.id,
        "target": f"attachment:{row.id}",
        "filename": row.filename,
        "media_type": row.media_type,
        "size": row.size,
        "created_at": row.created_at.isoformat(),
        "pages": row.pages,
        "text_note": row.text_note,
    }


def preview_summary(row: Preview) -> dict[str, Any]:
    return {
        "preview_id": row.id,
        "ws_id": row.ws_id,
        "call_id": row.call_id,
        "kind": row.kind,
        "title": row.title,
        "media_type": row.media_type,
        "source": row.source,
        "size": row.size,
        "created_at": row.created_at.isoformat(),
        "url": links.content_link(row, remote=False),
        "remote_url": links.content_link(row, remote=True) if row.kind == "web" else None,
        "expires_in": links.LINK_SECONDS,
    }
