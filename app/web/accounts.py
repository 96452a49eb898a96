"""Sign-in and tokens under /v1/api: login, logout, me, a user's own tokens; users for admins."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify, request

from app.errors import BadRequestError, NotFoundError, TooManyRequestsError, UnauthorizedError, check_text
from app.runtime import Runtime
from app.settings import MAX_NAME_CHARS, MAX_PASSWORD_CHARS
from app.storage.models import User
from app.users import accounts as users
from app.users import permits, throttle, tokens
from app.users.passwords import PasswordError
from app.users.principal import Principal
from app.users.scopes import allowed_for
from app.web.access import principal
from app.web.requests import field, json_body

LOGIN_TOKEN_SECONDS = 12 * 3600  # what `POST /v1/api/login` hands the web client lives this long

accounts = Blueprint("accounts", __name__, url_prefix="/v1/api")

LOGIN_TOKEN_NAME = "web sign-in"
DEFAULT_TOKEN_NAME = "api token"


def _rt() -> Runtime:
    return current_app.extensions["runtime"]


@accounts.post("/login")
def login() -> Any:
    body = json_body()
    name = field(body, "username", str, required=True, max_chars=MAX_NAME_CHARS).strip().lower()
    password = field(body, "password", str, required=True, max_chars=MAX_PASSWORD_CHARS)
    rt, address = _rt(), request.remote_addr or "unknown"
    try:
        throttle.check(rt.redis, name, address)
    except TooManyRequestsError as exc:
        response = jsonify(error=exc.message, **exc.details)
        response.headers["Retry-After"] = str(exc.details["retry_after"])
        return response, 429
    user = users.signed_in(rt, name, password)
    if user is None:
        throttle.failed(rt.redis, name, address)
        raise UnauthorizedError("wrong user name or password")
    throttle.succeeded(rt.redis, name, address)
    raw, row = tokens.create(rt, user, LOGIN_TOKEN_NAME, expires_in=LOGIN_TOKEN_SECONDS, kind="login")
    return jsonify(token=raw, account=users.summary(user), **tokens.summary(row, user)), 200


@accounts.post("/logout")
def logout() -> Any:
    """Ends a sign-in: the login token is revoked. A pasted API token is only forgotten by the
    client (revoke it with DELETE /v1/api/tokens/ID)."""
    who = principal()
    revoked = who.token_kind == "login" and who.token_id is not None and tokens.revoke(_rt(), who.token_id)
    return jsonify(revoked=revoked), 200


@accounts.get("/me")
def me() -> Any:
    return jsonify(principal().as_dict()), 200


@accounts.get("/me/notify-from")
def notify_senders() -> Any:
    """The users whose workstreams may notify the caller by name (besides the caller's own)."""
    return jsonify(users=permits.senders(_rt().db, _user_id())), 200


@accounts.put("/me/notify-from")
def set_notify_senders() -> Any:
    """Replace that list: `{"users": ["alice", ...]}`; unknown names are a 400 naming them."""
    names = field(json_body(), "users", list, required=True)
    if len(names) > permits.MAX_PERMITS:
        raise BadRequestError(f"users: at most {permits.MAX_PERMITS} names", field="users")
    for n, name in enumerate(names):
        if not isinstance(name, str):
            raise BadRequestError(f"users[{n}]: expected a user name", field="users")
        check_text(f"users[{n}]", name, MAX_NAME_CHARS)  # no NUL, no lone surrogate
    return jsonify(users=permits.replace(_rt().db, _user_id(), [name.strip().lower() for name in names])), 200


def _user_id() -> str:
    who = principal()
    if who.user_id is None:  # the operator reaches everyone already: it has no list to keep
        raise BadRequestError("the operator's token has no user: sign in as a user to keep this list")
    return who.user_id


@accounts.get("/tokens")
def list_tokens() -> Any:
    """The caller's tokens; an admin may ask for a user's (`?user=NAME`) or everyone's (`?user=*`)."""
    who, wanted = principal(), request.args.get("user")
    if wanted is None:
        return jsonify(tokens=tokens.list_for(_rt(), who.user_id) if who.user_id else []), 200
    if not who.is_admin:
        raise NotFoundError("no such user")  # not 403: whether a user exists is an admin's to know
    if wanted == "*":
        return jsonify(tokens=tokens.list_for(_rt(), None)), 200
    return jsonify(tokens=tokens.list_for(_rt(), users.get(_rt(), wanted).id)), 200


@accounts.post("/tokens")
def create_token() -> Any:
    """A new token for the caller (an admin: for any user, with `user`); printed once. Its scopes
    are at most the caller's: a token never makes a stronger one."""
    body, who = json_body(), principal()
    user = _token_user(who, field(body, "user", str, max_chars=MAX_NAME_CHARS))
    name = field(body, "name", str, default=DEFAULT_TOKEN_NAME, max_chars=MAX_NAME_CHARS).strip()
    scopes = body.get("scopes")
    granted = None if scopes is None else tokens.requested_scopes(_scope_list(scopes))
    if granted is not None:
        beyond = [s for s in granted if not who.has(s)]
        if beyond:
            raise BadRequestError(f"scopes: {', '.join(beyond)} is more than this token has", field="scopes")
    else:
        granted = tuple(s for s in allowed_for(user.is_admin) if who.has(s))
    expires_in = _lifetime(body)
    raw, row = tokens.create(_rt(), user, name or DEFAULT_TOKEN_NAME, granted, expires_in)
    return jsonify(token=raw, **tokens.summary(row, user)), 201


@accounts.delete("/tokens/<int:token_id>")
def revoke_token(token_id: int) -> Any:
    tokens.revoke(_rt(), token_id)  # revoking twice is no error: it is revoked either way
    return jsonify(token_id=token_id, revoked=True), 200


@accounts.get("/users")
def list_users() -> Any:
    return jsonify(users=[users.summary(u) for u in users.list_all(_rt())]), 200


@accounts.post("/users")
def create_user() -> Any:
    body = json_body()
    name = field(body, "name", str, required=True, max_chars=MAX_NAME_CHARS).strip().lower()
    password = field(body, "password", str, required=True, max_chars=MAX_PASSWORD_CHARS)
    try:
        user = users.create(_rt(), name, password, is_admin=field(body, "admin", bool, default=False))
    except PasswordError as exc:
        raise BadRequestError(f"password: {exc}", field="password") from None
    return jsonify(users.summary(user)), 201


def _token_user(who: Principal, wanted: str | None) -> User:
    if wanted is not None and (who.is_admin or wanted == who.name):
        return users.get(_rt(), wanted.strip().lower())
    if wanted is not None:
        raise NotFoundError("no such user")
    if who.user_id is None:
        raise BadRequestError(
            "user: required (the operator's token belongs to no user; name the user the token is for)",
            field="user",
        )
    user = users.by_id(_rt(), who.user_id)
    assert user is not None  # authenticate() just read it
    return user


def _scope_list(value: Any) -> list[str] | str:
    if isinstance(value, str):
        return field({"scopes": value}, "scopes", str, max_chars=MAX_NAME_CHARS)
    if isinstance(value, list) and len(value) <= 16 and all(isinstance(v, str) for v in value):
        return [field({"scopes": v}, "scopes", str, max_chars=MAX_NAME_CHARS) for v in value]
    raise BadRequestError(
        "scopes: expected a list of scope names or a comma-separated string", field="scopes"
    )


def _lifetime(body: dict[str, Any]) -> int | None:
    expires = field(body, "expires", str, max_chars=MAX_NAME_CHARS)
    expires_in = field(body, "expires_in", int)
    if expires is not None and expires_in is not None:
        raise BadRequestError("expires: give expires or expires_in, not both", field="expires")
    if expires is not None:
        return tokens.parse_duration(expires)
    return None if expires_in is None else tokens.check_lifetime(expires_in, "expires_in")
