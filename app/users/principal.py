"""Who is asking: the user (or the operator) behind a token, with the token's scopes."""

from __future__ import annotations

from dataclasses import dataclass

from app.users.scopes import ALL_SCOPES, Scope

OPERATOR_NAME = "operator"  # TURNSTONE_API_TOKEN, and tokens made before users existed


@dataclass(frozen=True)
class Principal:
    name: str
    user_id: str | None  # None: the operator
    scopes: frozenset[str]
    token_id: int | None = None  # None: the operator's environment token
    token_kind: str = "api"  # api, login

    @property
    def is_operator(self) -> bool:
        return self.user_id is None

    @property
    def is_admin(self) -> bool:
        """Sees and steers every workstream: an admin user's token with the admin scope."""
        return Scope.ADMIN in self.scopes

    def has(self, scope: str) -> bool:
        return scope in self.scopes

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "user_id": self.user_id,
            "scopes": [s for s in ALL_SCOPES if s in self.scopes],
            "admin": self.is_admin,
            "token_id": self.token_id,
            "token_kind": self.token_kind,
        }


def operator(token_id: int | None = None, name: str = OPERATOR_NAME) -> Principal:
    return Principal(name=name, user_id=None, scopes=frozenset(ALL_SCOPES), token_id=token_id)
