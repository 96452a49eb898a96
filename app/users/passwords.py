"""Password hashing with argon2id (argon2-cffi's defaults, RFC 9106's low-memory profile).

argon2 is imported, and the hasher made, at the first password checked or set: a web process
that only serves tokens never needs them (argon2-cffi and cffi cost about 1 MB held)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from app.settings import MAX_PASSWORD_CHARS

MIN_PASSWORD_CHARS = 8

if TYPE_CHECKING:
    from argon2 import PasswordHasher

_DUMMY_PASSWORD = "not-a-password-anyone-has"


class PasswordError(ValueError):
    """A password that cannot be set: too short, too long, or not storable text."""


def check_new(password: str) -> str:
    if not MIN_PASSWORD_CHARS <= len(password) <= MAX_PASSWORD_CHARS:
        raise PasswordError(f"a password has {MIN_PASSWORD_CHARS}-{MAX_PASSWORD_CHARS} characters")
    if "\x00" in password:
        raise PasswordError("a password must not contain a NUL character")
    try:
        password.encode("utf-8")
    except UnicodeEncodeError:
        raise PasswordError("a password must be valid Unicode (no lone surrogates)") from None
    return password


def hash_password(password: str) -> str:
    hasher, _ = _argon2()
    return hasher.hash(check_new(password))


def is_correct(stored_hash: str | None, password: str) -> bool:
    """Whether `password` matches; with no stored hash (no such user) it takes as long and is False."""
    from argon2.exceptions import InvalidHashError, VerificationError

    hasher, dummy_hash = _argon2()
    try:
        return bool(hasher.verify(stored_hash or dummy_hash, password)) and stored_hash is not None
    except (VerificationError, InvalidHashError, ValueError):  # ValueError: unencodable text
        return False


@cache
def _argon2() -> tuple[PasswordHasher, str]:
    """The hasher, and the hash checked against when the user does not exist (so that an unknown
    name costs as long as a wrong password, and the answer's timing does not tell which names
    exist). Made together, so the first check costs the same whichever it is."""
    from argon2 import PasswordHasher

    hasher = PasswordHasher()
    return hasher, hasher.hash(_DUMMY_PASSWORD)
