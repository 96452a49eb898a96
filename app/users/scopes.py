"""The four scopes a token carries, and how a list of them is read."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Scope(StrEnum):
    READ = "read"  # list, view, history, events
    WRITE = "write"  # create, send, cancel; one's own tokens
    APPROVE = "approve"  # decide tool calls
    ADMIN = "admin"  # users, other people's tokens and workstreams, admin APIs


ALL_SCOPES: tuple[str, ...] = tuple(s.value for s in Scope)
USER_SCOPES: tuple[str, ...] = (Scope.READ, Scope.WRITE, Scope.APPROVE)  # a non-admin's default


class ScopeError(ValueError):
    """A scope list names something that is not a scope, or a scope its user may not have."""


def parse(value: str | Iterable[str]) -> tuple[str, ...]:
    """`"read,write"` or `["read", "write"]` -> the scopes in canonical order; unknown is an error."""
    items = value.split(",") if isinstance(value, str) else list(value)
    names = {item.strip().lower() for item in items if item.strip()}
    unknown = sorted(names - set(ALL_SCOPES))
    if unknown:
        raise ScopeError(f"unknown scope(s) {', '.join(unknown)}; scopes are {', '.join(ALL_SCOPES)}")
    if not names:
        raise ScopeError(f"at least one scope is needed: {', '.join(ALL_SCOPES)}")
    return tuple(s for s in ALL_SCOPES if s in names)


def allowed_for(is_admin: bool) -> tuple[str, ...]:
    return ALL_SCOPES if is_admin else USER_SCOPES
