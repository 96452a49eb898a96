"""Users: created, disabled and enabled by the operator's CLI or an admin's API calls, checked at
sign-in; a user's own password change."""

from __future__ import annotations

import re
import uuid
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from app.errors import BadRequestError, ConflictError, NotFoundError, UnprocessableError
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
    return set_disabled(rt, name, True)


def set_disabled(rt: Store, name: str, disabled: bool) -> User:
    """Disabled: every token of the user is refused from its next request (tokens.authenticate
    reads the user each time; open websockets at their next re-check). Enabled again: the tokens
    not revoked or expired meanwhile work again. Repeating either changes nothing."""
    with rt.db.session() as s:
        user = s.exec(select(User).where(User.name == name)).first() if _NAME.fullmatch(name) else None
        if user is None:
            raise NotFoundError(f"no user {name[:64]!r}")
        if (user.disabled_at is not None) != disabled:
            user.disabled_at = utcnow() if disabled else None
            s.add(user)
    return user


MAX_GROUPS = 32  # a user's groups: each is a scope every model step of theirs reads rules for


def set_groups(rt: Store, name: str, groups: list[str]) -> User:
    """The user's groups become `groups` (names as users' are: lower case; repeats dropped);
    from the next model step of their workstreams, the groups' policy rules apply to them."""
    wanted = sorted({g.strip().lower() for g in groups})
    for group in wanted:
        if not _NAME.fullmatch(group):
            raise UnprocessableError(f"groups: {group[:64]!r} is not a group name", field="groups")
    if len(wanted) > MAX_GROUPS:
        raise UnprocessableError(f"groups: at most {MAX_GROUPS}", field="groups")
    with rt.db.session() as s:
        user = s.exec(select(User).where(User.name == name)).first() if _NAME.fullmatch(name) else None
        if user is None:
            raise NotFoundError(f"no user {name[:64]!r}")
        user.groups = wanted or None
        s.add(user)
    return user


def change_password(rt: Store, user_id: str, current: str, new: str) -> bool:
    """The user's password becomes `new` when `current` is theirs (False, nothing changed, when
    not); `new` must meet passwords.check_new (PasswordError). The write is conditional on the
    hash that was checked, so of two changes racing from the same password one wins."""
    user = by_id(rt, user_id)
    if user is None or not passwords.is_correct(user.password_hash, current):
        return False
    new_hash = passwords.hash_password(new)
    with rt.db.session() as s:
        moved = s.exec(
            update(User)
            .where(col(User.id) == user_id, col(User.password_hash) == user.password_hash)
            .values(password_hash=new_hash)
        )
    return bool(moved.rowcount == 1)


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
        "groups": list(user.groups or []),
        "created_at": user.created_at.isoformat(),
    }
