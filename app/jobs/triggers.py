"""Triggers: a secret URL that starts a run when something outside POSTs to it (a push, an
alert), with the request's JSON as the run's context. With a secret, a request counts only when
its X-Hub-Signature-256 (GitHub's form: `sha256=` and the HMAC-SHA256 of the raw body, in hex)
verifies; without one, the URL alone is the permission."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from typing import Any

from sqlalchemy import delete
from sqlmodel import col, select

from app.engine.life.turns import new_id
from app.errors import ConflictError, NotFoundError, UnauthorizedError
from app.jobs import hook_limit, store
from app.jobs.contract import Policy
from app.jobs.status import aware
from app.runtime import Runtime
from app.storage.models import Run, Trigger
from app.users import ownership
from app.users.principal import Principal
from app.users.scopes import ALL_SCOPES, USER_SCOPES

MAX_BODY_BYTES = 256 * 1024  # a request's JSON, which goes into the prompt
SIGNATURE_HEADER = "X-Hub-Signature-256"
HOOK_PATH = "/v1/hooks/"
MAX_TRIGGERS_PER_OWNER = 50


def create(
    rt: Runtime,
    who: Principal,
    prompt: str,
    ws_id: str | None,
    policy: Policy,
    timeout_s: int | None,
    signed: bool,
) -> tuple[Trigger, str | None]:
    if ws_id is not None:
        ownership.require_workstream(rt, who, ws_id)
    secret = secrets.token_hex(32) if signed else None
    trigger = Trigger(
        id=new_id(),
        owner_id=who.user_id,
        prompt=prompt,
        ws_id=ws_id,
        policy=policy.as_dict(),
        timeout_s=timeout_s,
        secret=secret,
        created_by=who.name,
    )
    with rt.db.session() as s:
        if (
            len(s.exec(select(Trigger.id).where(ownership.owned_clause(Trigger.owner_id, who))).all())
            >= MAX_TRIGGERS_PER_OWNER
        ):
            raise ConflictError(f"at most {MAX_TRIGGERS_PER_OWNER} triggers each", field="prompt")
        s.add(trigger)
    return trigger, secret


def shown(trigger: Trigger) -> dict[str, Any]:
    """A trigger as its owner sees it: its URL (the id is the secret part), never its secret."""
    return {
        "trigger_id": trigger.id,
        "path": HOOK_PATH + trigger.id,
        "prompt": trigger.prompt,
        "workstream": trigger.ws_id,
        "policy": trigger.policy,
        "timeout_s": trigger.timeout_s,
        "signed": trigger.secret is not None,
        "created_at": aware(trigger.created_at).isoformat(),
    }


def get(rt: Runtime, who: Principal, trigger_id: str) -> Trigger:
    return ownership.owned_row(rt, who, Trigger, trigger_id, "trigger")


def listing(rt: Runtime, who: Principal) -> list[dict[str, Any]]:
    return [shown(t) for t in ownership.owned_rows(rt, who, Trigger)]


def remove(rt: Runtime, trigger: Trigger) -> None:
    with rt.db.session() as s:
        s.exec(delete(Trigger).where(col(Trigger.id) == trigger.id))


def fire(
    rt: Runtime, trigger_id: str, raw: bytes, body: dict[str, Any], signature: str | None, event: str | None
) -> Run:
    """Start the trigger's run with `body` as context; UnauthorizedError when the trigger has a
    secret and `signature` does not verify it over `raw`, the bytes received."""
    with rt.db.reader() as s:
        trigger = s.get(Trigger, trigger_id)
    if trigger is None:
        raise NotFoundError(f"no trigger {trigger_id}")
    if trigger.secret is not None and not is_signed(trigger.secret, raw, signature):
        raise UnauthorizedError(f"{SIGNATURE_HEADER}: missing, or not this trigger's signature of the body")
    hook_limit.take(rt.redis, trigger.id, rt.settings.trigger_starts_per_minute)
    scopes = ALL_SCOPES if trigger.owner_id is None else USER_SCOPES
    who = Principal(name=f"trigger {trigger.id[:8]}", user_id=trigger.owner_id, scopes=frozenset(scopes))
    asked = store.Asked(
        prompt=_prompt(trigger.prompt, body, event),
        ws_id=trigger.ws_id,
        model=None,
        policy=Policy.from_stored(trigger.policy),
        timeout_s=trigger.timeout_s,
        metadata={"trigger_id": trigger.id, **({"event": event} if event else {})},
    )
    run, _ = store.create(rt, who, asked)
    return run


def is_signed(secret: str, raw: bytes, signature: str | None) -> bool:
    if not signature or not signature.startswith("sha256="):
        return False
    expected = hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature.removeprefix("sha256=").strip().lower())


def _prompt(prompt: str, body: dict[str, Any], event: str | None) -> str:
    shown_event = f" (event: {event})" if event else ""
    context = json.dumps(body, ensure_ascii=False, indent=1)
    return f"{prompt}\n\nThe request that started this run{shown_event}, as JSON:\n```json\n{context}\n```"
