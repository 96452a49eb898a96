"""Sign-in and tokens under /v1/api: login, logout, me, a user's own password and tokens; users
(create, disable, enable) for admins."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify, request

from app.errors import (
    BadRequestError,
    ForbiddenError,
    NotFoundError,
    TooManyRequestsError,
    UnauthorizedError,
    UnprocessableError,
)
from app.runtime import Runtime
from app.storage.models import User
from app.users import accounts as users
from app.users import passwords, permits, throttle, tokens
from app.users.passwords import PasswordError
from app.users.principal import Principal
from app.users.scopes import allowed_for
from app.web import shapes
from app.web.access import principal
from app.web.contract import operation

LOGIN_TOKEN_SECONDS = 12 * 3600  # what `POST /v1/api/login` hands the web client lives this long

accounts = Blueprint("accounts", __name__, url_prefix="/v1/api")

LOGIN_TOKEN_NAME = "web sign-in"
DEFAULT_TOKEN_NAME = "api token"


def _rt() -> Runtime:
    return current_app.extensions["runtime"]


@accounts.post("/login")
@operation(
    "Sign in with a user name and password: a token for 12 hours (public)",
    body=shapes.Login,
    answers={200: shapes.SignedIn},
    examples={"sign in": {"username": "alice", "password": "correct horse battery"}},
    errors={
        401: "Wrong user name or password",
        429: "Too many failed sign-ins: retry after `Retry-After` seconds",
    },
)
def login(body: shapes.Login) -> Any:
    name, password = body.username.strip().lower(), body.password
    rt, address = _rt(), request.remote_addr or "unknown"
    try:
        throttle.check(rt.redis, name, address)
    except TooManyRequestsError as exc:
        return _slowed(exc)
    user = users.signed_in(rt, name, password)
    if user is None:
        throttle.failed(rt.redis, name, address)
        raise UnauthorizedError("wrong user name or password")
    throttle.succeeded(rt.redis, name, address)
    raw, row = tokens.create(rt, user, LOGIN_TOKEN_NAME, expires_in=LOGIN_TOKEN_SECONDS, kind="login")
    return jsonify(token=raw, account=users.summary(user), **tokens.summary(row, user)), 200


def _slowed(exc: TooManyRequestsError) -> Any:
    response = jsonify(error=exc.message, **exc.details)
    response.headers["Retry-After"] = str(exc.details["retry_after"])
    return response, 429


@accounts.post("/logout")
@operation("Sign out: a sign-in's token is revoked", answers={200: shapes.LoggedOut})
def logout() -> Any:
    """Ends a sign-in: the login token is revoked. A pasted API token is only forgotten by the
    client (revoke it with DELETE /v1/api/tokens/ID)."""
    who = principal()
    revoked = who.token_kind == "login" and who.token_id is not None and tokens.revoke(_rt(), who.token_id)
    return jsonify(revoked=revoked), 200


@accounts.get("/me")
@operation("Who the token is: name, user id, scopes", answers={200: shapes.Me})
def me() -> Any:
    return jsonify(principal().as_dict()), 200


@accounts.post("/me/password")
@operation(
    "Change the caller's password. Their other sign-ins end (those tokens are revoked); this one "
    "and their API tokens keep working (revoke those with DELETE /v1/api/tokens/ID)",
    body=shapes.ChangePassword,
    answers={200: shapes.PasswordChanged},
    examples={"a new one": {"current": "correct horse battery", "new": "a longer passphrase now"}},
    errors={
        403: "`current` is not the caller's password (or the token lacks the write scope)",
        422: "`new` breaks the password rule (a NUL character, say)",
        429: "Too many wrong passwords (this and sign-in count together): retry after `Retry-After`",
    },
)
def change_password(body: shapes.ChangePassword) -> Any:
    """A wrong `current` counts as a failed sign-in of the user's name: otherwise this would be a
    way to guess a password that sign-in slows down. The second counter is the token's, not the
    client address's: the caller holds this one account's token, and a client's address is
    sign-in's to lock."""
    who, rt = principal(), _rt()
    address = f"token:{who.token_id}"
    if who.user_id is None:
        raise BadRequestError("the operator's token has no password: sign in as a user to change one")
    try:
        throttle.check(rt.redis, who.name, address)
    except TooManyRequestsError as exc:
        return _slowed(exc)
    try:
        passwords.check_new(body.new)
    except PasswordError as exc:
        raise UnprocessableError(f"new: {exc}", field="new") from None
    if not users.change_password(rt, who.user_id, body.current, body.new):
        throttle.failed(rt.redis, who.name, address)
        raise ForbiddenError("current: wrong password", field="current")
    throttle.succeeded(rt.redis, who.name, address)
    ended = tokens.revoke_sign_ins(rt, who.user_id, keep=who.token_id)
    kept = [t for t in tokens.list_for(rt, who.user_id) if t["kind"] != "login" and t["active"]]
    return jsonify(changed=True, sign_ins_ended=ended, api_tokens_kept=len(kept)), 200


@accounts.get("/me/notify-from")
@operation("The users whose workstreams may notify the caller by name", answers={200: shapes.UserNames})
def notify_senders() -> Any:
    """The users whose workstreams may notify the caller by name (besides the caller's own)."""
    return jsonify(users=permits.senders(_rt().db, _user_id())), 200


@accounts.put("/me/notify-from")
@operation(
    "Replace that list; unknown names are a 400 naming them",
    body=shapes.NotifySenders,
    answers={200: shapes.UserNames},
    examples={"two people": {"users": ["bob", "carol"]}},
)
def set_notify_senders(body: shapes.NotifySenders) -> Any:
    names = [name.strip().lower() for name in body.users]
    return jsonify(users=permits.replace(_rt().db, _user_id(), names)), 200


def _user_id() -> str:
    who = principal()
    if who.user_id is None:  # the operator reaches everyone already: it has no list to keep
        raise BadRequestError("the operator's token has no user: sign in as a user to keep this list")
    return who.user_id


@accounts.get("/tokens")
@operation(
    "The caller's tokens; an admin may ask for a user's (?user=NAME) or everyone's (?user=*)",
    query=shapes.TokenOwner,
    answers={200: shapes.TokenList},
    errors={404: "No such user (or the caller is not an administrator)"},
)
def list_tokens(query: shapes.TokenOwner) -> Any:
    who, wanted = principal(), query.user
    if wanted is None:
        return jsonify(tokens=tokens.list_for(_rt(), who.user_id) if who.user_id else []), 200
    if not who.is_admin:
        raise NotFoundError("no such user")  # not 403: whether a user exists is an admin's to know
    if wanted == "*":
        return jsonify(tokens=tokens.list_for(_rt(), None)), 200
    return jsonify(tokens=tokens.list_for(_rt(), users.get(_rt(), wanted).id)), 200


@accounts.post("/tokens")
@operation(
    "A new token for the caller (an admin: for any user); shown once. Its scopes are at most the "
    "caller's: a token never makes a stronger one",
    body=shapes.CreateToken,
    answers={201: shapes.NewToken},
    errors={404: "No such user (or the caller is not an administrator)"},
    examples={"read only, a month": {"name": "dashboard", "scopes": ["read"], "expires": "30d"}},
)
def create_token(body: shapes.CreateToken) -> Any:
    who = principal()
    user = _token_user(who, body.user)
    name = (body.name if body.name is not None else DEFAULT_TOKEN_NAME).strip()
    granted = None if body.scopes is None else tokens.requested_scopes(body.scopes)
    if granted is not None:
        beyond = [s for s in granted if not who.has(s)]
        if beyond:
            message = f"scopes: {', '.join(beyond)} is more than this token has"
            raise ForbiddenError(message, field="scopes")
    else:
        granted = tuple(s for s in allowed_for(user.is_admin) if who.has(s))
    expires_in = _lifetime(body)
    raw, row = tokens.create(_rt(), user, name or DEFAULT_TOKEN_NAME, granted, expires_in)
    return jsonify(token=raw, **tokens.summary(row, user)), 201


@accounts.delete("/tokens/<int:token_id>")
@operation("Revoke a token (revoking twice is no error)", answers={200: shapes.Revoked})
def revoke_token(token_id: int) -> Any:
    tokens.revoke(_rt(), token_id)  # revoking twice is no error: it is revoked either way
    return jsonify(token_id=token_id, revoked=True), 200


@accounts.get("/users")
@operation("Every user", answers={200: shapes.UserList})
def list_users() -> Any:
    return jsonify(users=[users.summary(u) for u in users.list_all(_rt())]), 200


@accounts.post("/users")
@operation(
    "Create a user",
    body=shapes.NewUser,
    answers={201: shapes.Account},
    examples={"a user": {"name": "alice", "password": "correct horse battery"}},
    errors={409: "A user of that name exists"},
)
def create_user(body: shapes.NewUser) -> Any:
    try:
        user = users.create(_rt(), body.name.strip().lower(), body.password, is_admin=bool(body.admin))
    except PasswordError as exc:
        raise UnprocessableError(f"password: {exc}", field="password") from None
    return jsonify(users.summary(user)), 201


@accounts.patch("/users/<name>")
@operation(
    "Disable or enable a user (a disabled user's tokens are refused from their next request and "
    "their sign-in fails; enabled again, their unrevoked, unexpired tokens work again), or set the "
    "groups they belong to (tool policy rules of a group apply to its members)",
    body=shapes.UserChange,
    answers={200: shapes.Account},
    examples={"disable": {"disabled": True}, "groups": {"groups": ["ops", "oncall"]}},
    errors={404: "No such user", 422: "An administrator may not disable their own account"},
)
def change_user(name: str, body: shapes.UserChange) -> Any:
    who, wanted = principal(), name.strip().lower()
    if body.disabled and wanted == who.name and who.user_id is not None:
        raise UnprocessableError("disabled: you cannot disable your own account", field="disabled")
    user = users.get(_rt(), wanted)
    if body.groups is not None:
        user = users.set_groups(_rt(), wanted, body.groups)
    if body.disabled is not None:
        user = users.set_disabled(_rt(), wanted, body.disabled)
    return jsonify(users.summary(user)), 200


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


def _lifetime(body: shapes.CreateToken) -> int | None:
    if body.expires is not None and body.expires_in is not None:
        raise UnprocessableError("expires: give expires or expires_in, not both", field="expires")
    if body.expires is not None:
        return tokens.parse_duration(body.expires)
    return None if body.expires_in is None else tokens.check_lifetime(body.expires_in, "expires_in")
