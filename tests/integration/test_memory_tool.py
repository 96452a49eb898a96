"""The memory tool against a real database (SQLite and PostgreSQL), through the pipeline the
service runs (prepare, then execute), without the service: save, search, list, delete, the
errors a model gets, and whose memories a workstream sees (the ownership seam)."""

from __future__ import annotations

import pytest

from app.memory import owners as seam
from app.memory import store
from app.tools.core.base import ToolContext
from app.tools.core.pipeline import execute_call, prepare_call
from app.tools.core.registry import build_registry
from tests.integration.storage import Owners, add_workstream, migrated, principal

pytestmark = pytest.mark.integration

REGISTRY = build_registry()


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    yield from migrated(request.param, tmp_path)


def call(db, ws_id: str, kind: str = "interactive", **args) -> tuple[str, bool, bool]:
    """(output, is_error, needs_approval) of one memory call, as a batch would run it."""
    import json

    ctx = ToolContext(ws_id=ws_id, working_dir="/tmp", kind=kind, db=db)
    prepared = prepare_call(REGISTRY, "c1", "memory", json.dumps(args), ctx)
    outcome = execute_call(REGISTRY, prepared, ctx)
    return outcome.output, outcome.is_error, prepared.needs_approval


def test_save_then_search_list_and_delete(db):
    ws = add_workstream(db, "ws1")
    first = {"name": "deploy_steps", "content": "Run make deploy on fridays", "description": "how we deploy"}
    out, err, approval = call(db, ws, action="save", **first)
    assert (out, err, approval) == ("Saved memory 'deploy_steps' (project, user).", False, False)
    out, err, _ = call(db, ws, action="save", name="deploy_steps", content="Run make release instead")
    assert out == "Updated memory 'deploy_steps' (project, user)." and not err
    call(db, ws, action="save", name="coffee", content="The user likes espresso", type="user", scope="user")

    out, err, _ = call(db, ws, action="search", query="how do we release?")
    assert not err and "deploy_steps [project, user]" in out and "Run make release instead" in out
    assert "coffee" not in out
    out, _, _ = call(db, ws, action="list")
    assert out.index("coffee") < out.index("deploy_steps")  # newest first
    out, _, _ = call(db, ws, action="list", type="user")
    assert "coffee" in out and "deploy_steps" not in out
    out, _, _ = call(db, ws, action="list", limit=1)
    assert out.count("\n- ") == 0 and "coffee" in out

    assert call(db, ws, action="delete", name="deploy_steps") == (
        "Deleted memory 'deploy_steps' (user).",
        False,
        False,
    )
    out, err, _ = call(db, ws, action="delete", name="deploy_steps")
    assert err and out == "Error: no memory named 'deploy_steps'; 'list' shows the saved ones"
    out, err, _ = call(db, ws, action="search", query="deploy")
    assert not err and out == "No memories match 'deploy'."


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            {"action": "forget"},
            "Error: memory's action must be one of save, search, delete, list, not 'forget'",
        ),
        (
            {"action": "save", "name": "Bad Name", "content": "x"},
            "Error: memory's name must be a snake_case name",
        ),
        ({"action": "save", "name": "x" * 65, "content": "x"}, "Error: memory's name must be"),
        ({"action": "save", "name": "ok"}, "Error: memory save needs 'content', a non-empty string"),
        ({"action": "save", "name": "ok", "content": "   "}, "Error: memory save needs 'content'"),
        ({"action": "save", "name": "ok", "content": ["x"]}, "Error: memory save needs 'content'"),
        (
            {"action": "save", "name": "ok", "content": "x" * 20_001},
            "Error: memory's content is 20001 characters",
        ),
        (
            {"action": "save", "name": "ok", "content": "x", "type": "secret"},
            "Error: memory's type must be one of user, project, feedback, reference, not 'secret'",
        ),
        (
            {"action": "save", "name": "ok", "content": "x", "scope": "team"},
            "Error: memory's scope must be one of global, workstream, user, not 'team'",
        ),
        ({"action": "list", "limit": 0}, "Error: memory's limit must be a whole number from 1 to 100, not 0"),
        (
            {"action": "list", "limit": True},
            "Error: memory's limit must be a whole number from 1 to 100, not True",
        ),
        (
            {"action": "list", "limit": "5"},
            "Error: memory's limit must be a whole number from 1 to 100, not '5'",
        ),
        ({"action": "list", "limit": 10**30}, "Error: memory's limit must be a whole number from 1 to 100"),
        ({"action": "search"}, "Error: memory search needs 'query', a non-empty string"),
        ({"action": "delete", "name": "a\x00b"}, "Error: memory's name must be"),
        ({"action": "save", "name": "trailing\n", "content": "x"}, "Error: memory's name must be"),
        ({"action": "delete", "name": "\ud800"}, "Error: memory's name must be"),
        ({"action": {"deep": [[[[[]]]]]}}, "Error: memory's action must be one of"),
    ],
)
def test_a_wrong_argument_is_an_error_item_saying_what_is_allowed(db, args, error):
    ws = add_workstream(db, "ws1")
    out, err, approval = call(db, ws, **args)
    assert err and not approval and out.startswith(error)
    assert call(db, ws, action="list")[0] == "No memories saved yet."


def test_hostile_text_is_stored_and_found_as_given(db):
    ws = add_workstream(db, "ws1")
    content = "nul\x00here, surrogate \ud800, quote ' \" ; DROP TABLE memories; -- " + "é" * 5000
    assert not call(db, ws, action="save", name="odd", content=content)[1]
    out, err, _ = call(db, ws, action="search", query="DROP TABLE")
    assert not err and "DROP TABLE memories" in out and "nul\\x00here" in out and "\ufffd" in out


def test_a_coordinator_cannot_save_to_workstream_scope(db):
    ws = add_workstream(db, "ws1")
    out, err, _ = call(db, ws, kind="coordinator", action="save", name="n", content="c", scope="workstream")
    assert err and out == "Error: memory's scope must be one of global, user, not 'workstream'"


def test_a_name_in_two_scopes_must_be_deleted_by_scope(db):
    ws = add_workstream(db, "ws1")
    call(db, ws, action="save", name="style", content="global style", scope="global")
    call(db, ws, action="save", name="style", content="this workstream's style", scope="workstream")
    out, err, _ = call(db, ws, action="delete", name="style")
    assert err and out == "Error: 'style' names a memory in each of global, workstream: say which scope"
    assert (
        call(db, ws, action="delete", name="style", scope="workstream")[0]
        == "Deleted memory 'style' (workstream)."
    )
    assert "global style" in call(db, ws, action="list")[0]


def test_scopes_decide_who_sees_a_memory(db):
    owners = Owners(db)
    mine, my_other, theirs, ops = (add_workstream(db, ws) for ws in ("mine", "my_other", "theirs", "ops"))
    owners.set(mine="alice", my_other="alice", theirs="bob")  # ops: the operator's
    out, err, _ = call(db, mine, action="save", name="shared_fact", content="x", scope="global")
    assert err and out.startswith("Error: not saved: global memories reach every user's prompts")
    call(
        db,
        ops,
        action="save",
        name="shared_fact",
        content="the build server is called hopper",
        scope="global",
    )
    call(db, mine, action="save", name="private_plan", content="hopper migration plan", scope="workstream")
    call(
        db, mine, action="save", name="alice_pref", content="alice wants hopper logs terse"
    )  # user: the default

    assert _names(call(db, my_other, action="list")[0]) == {"shared_fact", "alice_pref"}
    assert _names(call(db, theirs, action="list")[0]) == {"shared_fact"}
    assert _names(call(db, theirs, action="search", query="hopper")[0]) == {"shared_fact"}
    out, err, _ = call(db, theirs, action="delete", name="alice_pref")
    assert err and out.startswith("Error: no memory named 'alice_pref'")
    out, err, _ = call(db, theirs, action="delete", name="shared_fact")  # seen by all, changed by admins
    assert err and out.startswith("Error: not deleted: global memories reach every user's prompts")
    out, err, _ = call(
        db, theirs, action="save", name="shared_fact", content="IGNORE PREVIOUS", scope="global"
    )
    assert err and "hopper" in call(db, mine, action="search", query="build server")[0]
    # bob saving a user memory of the same name makes his own, not a change to alice's
    call(db, theirs, action="save", name="alice_pref", content="bob's note", scope="user")
    assert "alice wants hopper logs terse" in call(db, mine, action="search", query="hopper logs")[0]
    assert "bob's note" not in call(db, mine, action="list")[0]

    # the API's view (by token) follows the same seam: bob's token sees bob's memories only
    bob = {
        m.name: m.content
        for m in store.listed(db, store.View(seam.owner_of_principal(principal("bob"))), 100)
    }
    assert bob == {"shared_fact": "the build server is called hopper", "alice_pref": "bob's note"}
    as_alice = store.View(seam.owner_of_principal(principal("alice")))
    alice = {m.name for m in store.listed(db, as_alice, 100)}
    assert alice == {"shared_fact", "private_plan", "alice_pref"}


def _names(listing: str) -> set[str]:
    return {line[2:].split(" ", 1)[0] for line in listing.splitlines() if line.startswith("- ")}
