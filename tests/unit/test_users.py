"""The users modules' pure parts: scopes, lifetimes, passwords, principals, the ownership rule,
the owners a process keeps."""

from __future__ import annotations

import pytest

from app.errors import BadRequestError, UnprocessableError
from app.storage.models import Workstream
from app.users import ownership, passwords, principal, scopes, tokens
from app.users.known_owners import KnownOwners, Owner
from app.users.principal import Principal


def test_scopes_parse_in_canonical_order_and_refuse_unknown_or_none():
    assert scopes.parse("approve, READ") == ("read", "approve")
    assert scopes.parse(["admin", "write"]) == ("write", "admin")
    with pytest.raises(scopes.ScopeError, match="sudo"):
        scopes.parse("read,sudo")
    with pytest.raises(scopes.ScopeError):
        scopes.parse(" , ")
    assert scopes.allowed_for(False) == ("read", "write", "approve")
    assert "admin" in scopes.allowed_for(True)


@pytest.mark.parametrize(
    ("text", "seconds"), [("30d", 30 * 86400), ("12h", 43200), ("90m", 5400), ("45s", 45)]
)
def test_lifetimes(text, seconds):
    assert tokens.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "30", "d", "0d", "-1d", "1.5d", "30 days", "1w", "1d\x00"])
def test_bad_lifetimes_are_400_naming_expires(text):
    with pytest.raises(BadRequestError) as exc:
        tokens.parse_duration(text)
    assert exc.value.details["field"] == "expires"


def test_a_lifetime_past_the_limit_is_422_naming_expires():
    """Well-formed, past what the service allows: the document cannot say the limit in days."""
    with pytest.raises(UnprocessableError) as exc:
        tokens.parse_duration("367d")
    assert exc.value.status == 422 and exc.value.details["field"] == "expires"


def test_passwords_hash_with_argon2id_and_verify():
    stored = passwords.hash_password("a long enough one")
    assert stored.startswith("$argon2id$") and "a long enough one" not in stored
    assert passwords.is_correct(stored, "a long enough one")
    assert not passwords.is_correct(stored, "a long enough one!")
    assert not passwords.is_correct(None, "a long enough one")  # no such user: the same work, False
    assert not passwords.is_correct(stored, "lone \ud800 surrogate")


@pytest.mark.parametrize("bad", ["short", "x" * 1025, "has\x00nul", "lone \ud800"])
def test_unsettable_passwords(bad):
    with pytest.raises(passwords.PasswordError):
        passwords.hash_password(bad)


def test_the_ownership_rule():
    alice = Principal(name="alice", user_id="a", scopes=frozenset({"read"}))
    admin = Principal(name="root", user_id="r", scopes=frozenset({"read", "admin"}))
    ops = principal.operator()
    mine = Workstream(id="1", name="x", working_dir="/", owner_id="a")
    theirs = Workstream(id="2", name="y", working_dir="/", owner_id="b")
    legacy = Workstream(id="3", name="z", working_dir="/", owner_id=None)
    assert ownership.can_see(alice, mine) and not ownership.can_see(alice, theirs)
    assert not ownership.can_see(alice, legacy)  # the operator's: admins only
    assert all(ownership.can_see(p, w) for p in (admin, ops) for w in (mine, theirs, legacy))
    assert ownership.owner_for_child(theirs) == "b"  # a sub-agent's workstream: the parent's owner
    assert ownership.owner_for_new(alice) == "a" and ownership.owner_for_new(ops) is None
    assert ownership.visible_clause(admin) is None


def test_known_owners_keep_the_most_recently_named():
    known = KnownOwners(kept=2)
    known.add("a", Owner("alice"))
    known.add("b", Owner(None))  # the operator's: known, and nobody's
    assert known.get("a") == Owner("alice")  # named again: now the most recent
    known.add("c", Owner("carol"))
    assert (known.get("a"), known.get("b"), known.get("c")) == (Owner("alice"), None, Owner("carol"))
    assert known.get("b") is None and len(known) == 2
    known.forget(["a", "never-known"])
    assert known.get("a") is None and len(known) == 1
