"""Password hashing with argon2id (argon2-cffi's defaults, RFC 9106's low-memory profile)."""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from app.settings import MAX_PASSWORD_CHARS, MIN_PASSWORD_CHARS

_HASHER = PasswordHasher()
# Checked against when the user does not exist, so that an unknown name costs as long as a
# wrong password and the answer's timing does not tell which names exist.
_DUMMY_HASH = _HASHER.hash("not-a-password-anyone-has")


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
    return _HASHER.hash(check_new(password))


def is_correct(stored_hash: str | None, password: str) -> bool:
    """Whether `password` matches; with no stored hash (no such user) it takes as long and is False."""
    try:
        return bool(_HASHER.verify(stored_hash or _DUMMY_HASH, password)) and stored_hash is not None
    except (VerificationError, InvalidHashError, ValueError):  # ValueError: unencodable text
        return False
