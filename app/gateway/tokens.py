"""The service JWT between the notify tool and the channel gateway, and the secret it is signed with.

HS256 with `aud` turnstone-channel and a one-minute life. The secret is `TURNSTONE_SERVICE_SECRET`;
without it (a local run) one is generated once and kept in `service_keys`, so that every process
on the same database signs and checks with the same one.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from app.settings import NotifySettings
from app.storage import service_keys
from app.storage.database import Database

SERVICE_JWT_AUDIENCE = "turnstone-channel"
SERVICE_JWT_ISSUER = "turnstone-jobs"
SERVICE_JWT_SECONDS = 60  # a token's life: long enough for one delivery, too short to replay later
SERVICE_JWT_LEEWAY_SECONDS = 5  # clock difference between the worker and the gateway tolerated

ALGORITHM = "HS256"
KEY_NAME = "service-jwt"
_cached: dict[str, str] = {}  # database URL -> its generated secret (it never changes once made)


class TokenError(Exception):
    """A service JWT that is missing, malformed, badly signed, expired, or for someone else."""


def service_secret(db: Database, settings: NotifySettings) -> str:
    """The environment's secret, else the database's (made here if no process made it yet)."""
    if settings.service_secret:
        return settings.service_secret
    if db.url not in _cached:
        _cached[db.url] = _stored_secret(db)
    return _cached[db.url]


def _stored_secret(db: Database) -> str:
    return service_keys.get_or_make(db, KEY_NAME, secrets.token_urlsafe(48))[0]


def sign(secret: str, subject: str = "notify", now: float | None = None) -> str:
    issued = int(time.time() if now is None else now)
    claims = {
        "iss": SERVICE_JWT_ISSUER,
        "aud": SERVICE_JWT_AUDIENCE,
        "sub": subject,
        "iat": issued,
        "exp": issued + SERVICE_JWT_SECONDS,
    }
    import jwt  # here, not at the top: PyJWT loads cryptography (about 9 MB), needed only to notify

    return jwt.encode(claims, secret, algorithm=ALGORITHM)


def verify(secret: str, token: str | None) -> dict[str, Any]:
    """The token's claims; `TokenError` saying why not (never echoing the token)."""
    if not token:
        raise TokenError("a service token is required (Authorization: Bearer JWT)")
    import jwt

    try:
        return jwt.decode(
            token,
            secret,
            algorithms=[ALGORITHM],  # never the token's own choice ("none", or RS256 with our secret)
            audience=SERVICE_JWT_AUDIENCE,
            issuer=SERVICE_JWT_ISSUER,
            leeway=SERVICE_JWT_LEEWAY_SECONDS,
            options={"require": ["exp", "iat", "aud", "iss"]},
        )
    except jwt.ExpiredSignatureError:
        raise TokenError("the service token has expired") from None
    except jwt.InvalidAudienceError:
        raise TokenError(f"the service token is not for {SERVICE_JWT_AUDIENCE}") from None
    except jwt.InvalidTokenError as exc:
        raise TokenError(f"invalid service token: {type(exc).__name__}") from None
