"""Users: created and disabled by the operator's CLI, checked at sign-in."""

from __future__ import annotations

import re
import uuid
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from app.errors import BadRequestError, ConflictError, NotFoundError
from app.settings import USER_NAME_PATTERN
from app.storage.models import User, utcnow
from app.users import passwords
from app.users.store import Store

_NAME = re.compile(USER_NAME_PATTERN)


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise BadRequestError(
            "name: 1-64 characters, lower-case letters, digits, '.', '_' or '-', starting with a letter "
            "or digit",
            field="name",
        )
    return name


def create(rt: Store, name: str, password: str, is_admin: bool = False) -> User:
    user = User(
        id=uuid.uuid4().hex,
        name=check_name(name),
        password_hash=passwords.hash_password(password),
        is_admin=is_admin,
    )
    try:
        with rt.db.session() as s:
            s.add(user)
    except IntegrityError:
        raise ConflictError(f"a user named {name!r} exists already") from None
    return user


def find(rt: Store, name: str) -> User | None:
    if not _NAME.fullmatch(name):
        return None
    with rt.db.reader() as s:
        return s.exec(select(User).where(User.name == name)).first()


def get(rt: Store, name: str) -> User:
    user = find(rt, name)
    if user is None:
        raise NotFoundError(f"no user {name!r}")
    return user


def by_id(rt: Store, user_id: str) -> User | None:
    with rt.db.reader() as s:
        return s.get(User, user_id)


def list_all(rt: Store) -> list[User]:
    with rt.db.reader() as s:
        return list(s.exec(select(User).order_by(col(User.name))).all())


def disable(rt: Store, name: str) -> User:
    """From now on the user's tokens are refused (401) and their sign-in fails."""
    with rt.db.session() as s:
        user = s.exec(select(User).where(User.name == name)).first()
        if user is None:
            raise NotFoundError(f"no user {name!r}")
        if user.disabled_at is None:
            user.disabled_at = utcnow()
            s.add(user)
    return user


def signed_in(rt: Store, name: str, password: str) -> User | None:
    """The enabled user `name` when `password` is theirs; None otherwise, after the same work."""
    user = find(rt, name)
    ok = passwords.is_correct(user.password_hash if user else None, password)
    return user if ok and user is not None and user.disabled_at is None else None


def summary(user: User) -> dict[str, Any]:
    return {
        "user_id": user.id,
        "name": user.name,
        "admin": user.is_admin,
        "disabled": user.disabled_at is not None,
        "created_at": user.created_at.isoformat(),
    }
