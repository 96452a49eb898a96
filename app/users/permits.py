"""Who may notify whom by name: a workstream's notify reaches its owner's own channels, and
another user's only when that user has given the owner leave (or an admin owns the workstream)."""

from __future__ import annotations

from sqlalchemy import delete
from sqlmodel import col, select

from app.errors import UnprocessableError
from app.memory import owners
from app.storage.database import Database
from app.storage.models import NotifyPermit, User

MAX_PERMITS = 200  # names one user may list


def senders(db: Database, user_id: str) -> list[str]:
    """The names of the users whose workstreams may notify `user_id`, sorted."""
    with db.reader() as s:
        query = select(User.name).join(NotifyPermit, col(NotifyPermit.sender_id) == col(User.id))
        return sorted(s.exec(query.where(NotifyPermit.user_id == user_id)).all())


def replace(db: Database, user_id: str, names: list[str]) -> list[str]:
    """Give leave to exactly `names` (user names); BadRequestError naming the unknown ones."""
    wanted = sorted(set(names))
    with db.session() as s:
        found = dict(s.exec(select(User.name, User.id).where(col(User.name).in_(wanted))).all())
        unknown = [name for name in wanted if name not in found]
        if unknown:
            message = f"users: no such user {', '.join(map(repr, unknown[:5]))}"
            raise UnprocessableError(message, field="users")
        s.exec(delete(NotifyPermit).where(col(NotifyPermit.user_id) == user_id))
        for name in wanted:
            if found[name] != user_id:
                s.add(NotifyPermit(user_id=user_id, sender_id=found[name]))
    return senders(db, user_id)


def may_notify(db: Database, owner_id: str | None, username: str) -> bool:
    """Whether a workstream of `owner_id` (None: the operator's) may notify `username`."""
    with db.reader() as s:
        if owners.is_admin(s, owner_id):  # the operator (None) or an admin user
            return True
        target = s.exec(select(User.id).where(User.name == username)).first()
        if target is None:
            return False
        if target == owner_id:
            return True
        permit = select(NotifyPermit).where(
            NotifyPermit.user_id == target, NotifyPermit.sender_id == owner_id
        )
        return s.exec(permit).first() is not None
