"""A workstream's owner is read once per process (app/users/known_owners.py): later requests
naming it are checked without a round trip and still refuse whoever may not see it; an id not
found is asked every time, and a workstream deleted here is read afresh."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import event

from app.engine.life import workstreams
from app.errors import NotFoundError
from app.runtime import Runtime
from app.users import ownership
from app.users.principal import Principal
from tests.integration.storage import principal, runtime

pytestmark = pytest.mark.integration

ALICE, BOB = principal("alice"), principal("bob")
ADMIN = Principal(name="root", user_id="root", scopes=frozenset({"admin"}))


@pytest.fixture(params=["sqlite", "postgresql"])
def rt(request, tmp_path, model_server) -> Iterator[Runtime]:
    yield from runtime(request.param, tmp_path, model_server)


# ownership.require_workstream's read (other reads of a workstream select its owner too)
OWNER_READ = ["SELECT", "workstreams.owner_id", "FROM", "workstreams", "WHERE", "workstreams.id"]


@pytest.fixture
def owner_reads(rt: Runtime) -> Iterator[list[str]]:
    """The statements reading a workstream's owner from here on."""
    seen: list[str] = []

    def note(_conn, _cursor, statement, *_args):
        if statement.split()[:6] == OWNER_READ:
            seen.append(statement)

    event.listen(rt.db.engine, "before_cursor_execute", note)
    yield seen
    event.remove(rt.db.engine, "before_cursor_execute", note)


def refused(rt: Runtime, who: Principal, ws_id: str) -> bool:
    try:
        ownership.require_workstream(rt, who, ws_id)
    except NotFoundError as exc:
        assert str(exc) == f"no workstream {ws_id}"  # the same answer, whoever owns it
        return True
    return False


def test_an_owner_is_read_once_and_still_refuses_everyone_else(rt, owner_reads, tmp_path):
    ws_id = workstreams.create(rt, name="alice's", working_dir=str(tmp_path), owner_id="alice").id
    assert not refused(rt, ALICE, ws_id)
    assert owner_reads == [], "the process that made it knows its owner"
    rt.owners.forget([ws_id])  # as another web node, which did not make it
    assert not refused(rt, ALICE, ws_id)
    assert len(owner_reads) == 1
    for _ in range(3):
        assert not refused(rt, ALICE, ws_id) and not refused(rt, ADMIN, ws_id)
        assert refused(rt, BOB, ws_id)
    assert len(owner_reads) == 1, "a known owner is not read again"

    operators = workstreams.create(rt, name="the operator's", working_dir=str(tmp_path)).id
    rt.owners.forget([operators])
    assert refused(rt, ALICE, operators) and refused(rt, ALICE, operators)  # kept as nobody's
    assert not refused(rt, ADMIN, operators)
    assert len(owner_reads) == 2


def test_an_id_not_found_is_asked_every_time_and_a_deleted_one_afresh(rt, owner_reads, tmp_path):
    missing = uuid.uuid4().hex
    assert refused(rt, ALICE, missing) and refused(rt, ADMIN, missing)
    assert len(owner_reads) == 2, "an id not found is never kept"

    ws_id = workstreams.create(rt, name="short-lived", working_dir=str(tmp_path), owner_id="alice").id
    assert not refused(rt, ALICE, ws_id)
    workstreams.delete(rt, ws_id)
    assert refused(rt, ALICE, ws_id)
    assert len(owner_reads) == 3, "the delete forgot it: read afresh, and not found"
