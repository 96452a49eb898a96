"""Storing attachments and previews: rows that name content, and the content itself, kept once
per workstream and SHA-256 (a file attached twice, or previewed from an attachment, is one blob).
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass

from sqlalchemy import delete
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col, select

from app.errors import NotFoundError
from app.storage.database import Database
from app.storage.models import Attachment, Blob, Preview, utcnow


@dataclass(frozen=True)
class Content:
    """What a preview shows, before it is stored."""

    kind: str
    media_type: str
    title: str
    source: str
    data: bytes
    base_url: str | None = None  # a web page's final URL, for its relative links


def new_id() -> str:
    return uuid.uuid4().hex


def _keep(s: Session, ws_id: str, data: bytes) -> str:
    """Keep `data` once per workstream; its digest. An identical blob written at the same moment
    by another request is the same blob: the insert gives way to it instead of failing."""
    digest = hashlib.sha256(data).hexdigest()
    if s.get(Blob, (ws_id, digest)) is None:
        values = {"ws_id": ws_id, "sha256": digest, "size": len(data), "data": data, "created_at": utcnow()}
        insert = postgresql.insert if s.get_bind().dialect.name == "postgresql" else sqlite.insert
        s.execute(insert(Blob).values(**values).on_conflict_do_nothing())
    return digest


def _bytes(s: Session, ws_id: str, digest: str) -> bytes:
    blob = s.get(Blob, (ws_id, digest))
    if blob is None:  # removed with its workstream between two reads
        raise NotFoundError("its content is gone")
    return bytes(blob.data)


def add_attachment(
    db: Database,
    ws_id: str,
    filename: str,
    media_type: str,
    data: bytes,
    text: str | None = None,
    pages: int | None = None,
    text_note: str | None = None,
) -> Attachment:
    """`text`, `pages`, `text_note`: a PDF's text as read (app/attachments/pdf_text.py)."""
    with db.session() as s:
        row = Attachment(
            id=new_id(),
            ws_id=ws_id,
            filename=filename,
            media_type=media_type,
            sha256=_keep(s, ws_id, data),
            size=len(data),
            text=text,
            pages=pages,
            text_note=text_note,
        )
        s.add(row)
    return row


def copy_attachments(s: Session, from_ws: str, to_ws: str, ids: set[str]) -> dict[str, str]:
    """Copies of `from_ws`'s attachments `ids` in `to_ws` (a fork's), their bytes with them:
    old id -> new id (an id no longer there is left out)."""
    rows = s.exec(select(Attachment).where(col(Attachment.id).in_(ids), Attachment.ws_id == from_ws)).all()
    copied = {}
    for row in rows:
        digest = _keep(s, to_ws, _bytes(s, from_ws, row.sha256))
        fields = row.model_dump(exclude={"id", "ws_id", "sha256"})
        copy = Attachment(id=new_id(), ws_id=to_ws, sha256=digest, **fields)
        s.add(copy)
        copied[row.id] = copy.id
    return copied


def attachment(db: Database, ws_id: str, attachment_id: str) -> tuple[Attachment, bytes]:
    """An attachment of this workstream (never another's) and its bytes."""
    with db.reader() as s:
        row = s.get(Attachment, attachment_id)
        if row is None or row.ws_id != ws_id:
            raise NotFoundError(f"no attachment {attachment_id} in this workstream")
        return row, _bytes(s, ws_id, row.sha256)


def attachments(db: Database, ws_id: str) -> list[Attachment]:
    with db.reader() as s:
        query = select(Attachment).where(Attachment.ws_id == ws_id).order_by(col(Attachment.created_at))
        return list(s.exec(query).all())


def add_preview(db: Database, ws_id: str, call_id: str | None, content: Content) -> Preview:
    with db.session() as s:
        row = Preview(
            id=new_id(),
            ws_id=ws_id,
            call_id=call_id,
            kind=content.kind,
            title=content.title,
            media_type=content.media_type,
            source=content.source,
            base_url=content.base_url,
            sha256=_keep(s, ws_id, content.data),
            size=len(content.data),
            signing_key=secrets.token_hex(32),
        )
        s.add(row)
    return row


def preview(db: Database, preview_id: str) -> Preview:
    with db.reader() as s:
        row = s.get(Preview, preview_id)
    if row is None:
        raise NotFoundError(f"no preview {preview_id}")
    return row


def preview_bytes(db: Database, row: Preview) -> bytes:
    with db.reader() as s:
        return _bytes(s, row.ws_id, row.sha256)


def previews(db: Database, ws_id: str) -> list[Preview]:
    with db.reader() as s:
        query = select(Preview).where(Preview.ws_id == ws_id).order_by(col(Preview.created_at))
        return list(s.exec(query).all())


def forget_workstream(s: Session, ws_id: str) -> None:
    """Everything of this kind a workstream kept, in the session that removes the workstream."""
    for table in (Preview, Attachment, Blob):
        s.execute(delete(table).where(col(table.ws_id) == ws_id))
