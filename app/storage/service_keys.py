"""Values the service's processes share through the database (`service_keys`): made once by
whichever process needs one first; the primary key settles a race, and the loser takes the winner's."""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError

from app.storage.database import Database
from app.storage.models import ServiceKey


def get_or_make(db: Database, name: str, value: str) -> tuple[str, bool]:
    """The value stored under `name`, storing `value` there if none is yet; and whether this call
    stored it."""
    with db.reader() as s:
        row = s.get(ServiceKey, name)
    if row is not None:
        return row.secret, False
    try:
        with db.session() as s:
            s.add(ServiceKey(name=name, secret=value))
    except IntegrityError:  # another process made it first: theirs is the one
        with db.reader() as s:
            found = s.get(ServiceKey, name)
        assert found is not None
        return found.secret, False
    return value, True
