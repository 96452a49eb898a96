"""Users and tokens for tests, made as an operator would: over the admin API with the operator's
token (and, where a test needs a token in a state no API makes quickly, an expired one, by
moving its expiry into the past in the database)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
from sqlmodel import Session

from app.storage.database import make_engine
from app.storage.models import ApiToken
from tests.integration.client import Api
from tests.integration.services import API_TOKEN, Services

PASSWORD = "correct horse battery staple"


@dataclass
class Person:
    name: str
    user_id: str
    admin: bool
    tokens: dict[str, str] = field(default_factory=dict)  # label -> raw token

    def api(self, services: Services, label: str = "all") -> Api:
        return Api(services.base_url, self.tokens[label])


class People:
    def __init__(self, services: Services) -> None:
        self.services = services
        self.operator = httpx.Client(
            base_url=services.base_url, headers={"Authorization": f"Bearer {API_TOKEN}"}, timeout=30
        )

    def user(self, prefix: str, admin: bool = False) -> Person:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        r = self.operator.post("/v1/api/users", json={"name": name, "password": PASSWORD, "admin": admin})
        assert r.status_code == 201, r.text
        person = Person(name=name, user_id=r.json()["user_id"], admin=admin)
        person.tokens["all"] = self.token(person)
        return person

    def token(self, person: Person, scopes: list[str] | None = None, **body: object) -> str:
        payload: dict[str, object] = {"user": person.name, **body}
        if scopes is not None:
            payload["scopes"] = scopes
        r = self.operator.post("/v1/api/tokens", json=payload)
        assert r.status_code == 201, r.text
        return str(r.json()["token"])

    def token_id(self, raw: str) -> int:
        r = httpx.get(
            self.services.base_url + "/v1/api/me", headers={"Authorization": f"Bearer {raw}"}, timeout=30
        )
        assert r.status_code == 200, r.text
        return int(r.json()["token_id"])

    def expired(self, person: Person) -> str:
        raw = self.token(person, expires="1d")
        token_id = self.token_id(raw)
        engine = make_engine(self.services.db.url)
        try:
            with Session(engine) as s:
                row = s.get(ApiToken, token_id)
                assert row is not None
                row.expires_at = datetime.now(UTC) - timedelta(minutes=1)
                s.add(row)
                s.commit()
        finally:
            engine.dispose()
        return raw

    def revoked(self, person: Person) -> str:
        raw = self.token(person)
        r = self.operator.delete(f"/v1/api/tokens/{self.token_id(raw)}")
        assert r.status_code == 200, r.text
        return raw
