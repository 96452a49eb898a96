"""API tokens: a random secret shown once, stored as its SHA-256; a user's, with scopes and an
expiry. `TURNSTONE_API_TOKEN` (the environment) is the operator's, with every scope."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import update
from sqlmodel import col, select

from app.errors import BadRequestError, NotFoundError, UnauthorizedError, UnprocessableError
from app.storage.models import ApiToken, User, utcnow
from app.users import principal as principals
from app.users.principal import Principal
from app.users.scopes import ALL_SCOPES, ScopeError, allowed_for, parse
from app.users.store import Store

MAX_TOKEN_SECONDS = 366 * 24 * 3600  # the longest `--expires` / `expires_in` a token may ask for

TOKEN_PREFIX = "tj_"
MAX_TOKEN_CHARS = 512  # far past any token this service makes; longer is not looked up
_DURATION = re.compile(r"([1-9][0-9]{0,5})([smhd])")
UNKNOWN_TOKEN = "unauthorized: unknown token (send Authorization: Bearer <token>)"
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def parse_duration(text: str) -> int:
    """`"30d"`, `"12h"`, `"90m"`, `"45s"` -> seconds, at most MAX_TOKEN_SECONDS."""
    m = _DURATION.fullmatch(text.strip())
    if not m:
        raise BadRequestError(
            f"expires: expected a number and a unit (s, m, h, d), e.g. 30d; got {text[:40]!r}",
            field="expires",
        )
    return check_lifetime(int(m.group(1)) * _UNIT_SECONDS[m.group(2)], "expires")


def check_lifetime(seconds: int, field: str) -> int:
    if not 1 <= seconds <= MAX_TOKEN_SECONDS:
        message = f"{field}: between 1 second and {MAX_TOKEN_SECONDS // 86400} days"
        raise UnprocessableError(message, field=field)
    return seconds


def create(
    rt: Store,
    user: User,
    name: str,
    scopes: tuple[str, ...] | None = None,
    expires_in: int | None = None,
    kind: str = "api",
) -> tuple[str, ApiToken]:
    """A new token for `user` (the raw text is returned here and never again)."""
    granted = allowed_for(user.is_admin) if scopes is None else scopes
    beyond = [s for s in granted if s not in allowed_for(user.is_admin)]
    if beyond:
        raise BadRequestError(f"scopes: {', '.join(beyond)} is only for admin users", field="scopes")
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(
        name=name,
        token_hash=hash_token(raw),
        user_id=user.id,
        scopes=list(granted),
        kind=kind,
        expires_at=utcnow() + timedelta(seconds=expires_in) if expires_in else None,
    )
    with rt.db.session() as s:
        s.add(row)
    return raw, row


def authenticate(rt: Store, raw: str | None) -> Principal:
    """The principal a presented token speaks for; UnauthorizedError (401) says why not."""
    if not raw:
        raise UnauthorizedError("unauthorized: send Authorization: Bearer <token>")
    configured = rt.settings.api_token
    if configured and hmac.compare_digest(raw.encode(errors="replace"), configured.encode()):
        return principals.operator()
    if len(raw) > MAX_TOKEN_CHARS:
        raise UnauthorizedError(UNKNOWN_TOKEN)
    with rt.db.reader() as s:
        found = s.exec(
            select(ApiToken, User)
            .join(User, col(ApiToken.user_id) == col(User.id), isouter=True)
            .where(ApiToken.token_hash == hash_token(raw.encode(errors="replace").decode()))
        ).first()
    if found is None:
        raise UnauthorizedError(UNKNOWN_TOKEN)
    row, user = found
    if row.revoked_at is not None:
        raise UnauthorizedError("unauthorized: this token was revoked")
    if row.expires_at is not None and _aware(row.expires_at) <= datetime.now(UTC):
        raise UnauthorizedError("unauthorized: this token has expired")
    if user is None:  # made before users existed: the operator's, as it always was
        return principals.operator(token_id=row.id)
    if user.disabled_at is not None:
        raise UnauthorizedError("unauthorized: this token's user is disabled")
    # A user no longer admin keeps no admin scope, whatever the token says.
    scopes = frozenset(s for s in row.scopes if s in allowed_for(user.is_admin))
    return Principal(name=user.name, user_id=user.id, scopes=scopes, token_id=row.id, token_kind=row.kind)


def _aware(when: datetime) -> datetime:
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def list_for(rt: Store, user_id: str | None) -> list[dict[str, Any]]:
    """Tokens of one user (None: everyone's), newest first; never the secret nor its hash."""
    query = select(ApiToken, User).join(User, col(ApiToken.user_id) == col(User.id), isouter=True)
    if user_id is not None:
        query = query.where(ApiToken.user_id == user_id)
    with rt.db.reader() as s:
        rows = s.exec(query.order_by(col(ApiToken.id).desc())).all()
    return [summary(row, user) for row, user in rows]


def summary(row: ApiToken, user: User | None) -> dict[str, Any]:
    now = datetime.now(UTC)
    expired = row.expires_at is not None and _aware(row.expires_at) <= now
    return {
        "token_id": row.id,
        "name": row.name,
        "user": user.name if user else principals.OPERATOR_NAME,
        "scopes": list(row.scopes) if user else list(ALL_SCOPES),
        "kind": row.kind,
        "created_at": _aware(row.created_at).isoformat(),
        "expires_at": _aware(row.expires_at).isoformat() if row.expires_at else None,
        "revoked_at": _aware(row.revoked_at).isoformat() if row.revoked_at else None,
        "active": row.revoked_at is None and not expired,
    }


def owner_of(rt: Store, token_id: int) -> tuple[ApiToken, str | None]:
    """The token and its user's id (None: the operator's); NotFoundError when there is none."""
    with rt.db.reader() as s:
        row = s.get(ApiToken, token_id)
    if row is None:
        raise NotFoundError(f"no token {token_id}")
    return row, row.user_id


def revoke(rt: Store, token_id: int) -> bool:
    """Revoked from now on; False when it was revoked already."""
    with rt.db.session() as s:
        moved = s.exec(
            update(ApiToken)
            .where(col(ApiToken.id) == token_id, col(ApiToken.revoked_at).is_(None))
            .values(revoked_at=utcnow())
        )
    return bool(moved.rowcount == 1)


def revoke_sign_ins(rt: Store, user_id: str, keep: int | None) -> int:
    """Revokes the user's sign-in (login) tokens but `keep`; their API tokens stay. How many."""
    query = update(ApiToken).where(
        col(ApiToken.user_id) == user_id, col(ApiToken.kind) == "login", col(ApiToken.revoked_at).is_(None)
    )
    if keep is not None:
        query = query.where(col(ApiToken.id) != keep)
    with rt.db.session() as s:
        moved = s.exec(query.values(revoked_at=utcnow()))
    return int(moved.rowcount or 0)


def requested_scopes(value: Any, field: str = "scopes") -> tuple[str, ...]:
    try:
        return parse(value)
    except ScopeError as exc:
        raise BadRequestError(f"{field}: {exc}", field=field) from None
