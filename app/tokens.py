"""API tokens: created by the CLI and stored hashed, or given by TURNSTONE_API_TOKEN."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from sqlmodel import select

from app.runtime import Runtime
from app.storage.models import ApiToken

ENV_TOKEN_NAME = "env"


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def create(rt: Runtime, name: str) -> str:
    """A new token; only its hash is stored, so this is the one time it is seen."""
    raw = "tj_" + secrets.token_urlsafe(32)
    with rt.db.session() as s:
        s.add(ApiToken(name=name, token_hash=hash_token(raw)))
    return raw


def verify(rt: Runtime, raw: str | None) -> str | None:
    """The token's name when it is valid, else None."""
    if not raw:
        return None
    configured = rt.settings.api_token
    if configured and hmac.compare_digest(raw.encode(), configured.encode()):
        return ENV_TOKEN_NAME
    with rt.db.reader() as s:
        row = s.exec(select(ApiToken).where(ApiToken.token_hash == hash_token(raw))).first()
    return row.name if row else None
