"""memory and recall through the running service (web, Celery worker, database, fake model):
what the model is sent and what the REST API shows."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration


@pytest.fixture
def clean_memories(api) -> Iterator[None]:
    """Memories outlive a test (the service is shared by the session): remove them after."""
    yield
    for memory in api.http.get("/v1/api/memories").json()["memories"]:
        api.http.delete(f"/v1/api/memories/{memory['id']}")


def system_message(request) -> str:
    """What the step was told besides the conversation: its system prompt, which never holds the
    memories (they change from turn to turn, and would spoil the prompt cache), and the message
    after the conversation, which does (docs/memory.md)."""
    first, last = request.body["messages"][0], request.body["messages"][-1]
    assert first["role"] == "system" and "<memories>" not in str(first["content"])
    return str(last["content"]) if last["role"] == "user" else ""


def save_memory(api, model, open_socket, ws_id: str, **args) -> None:
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("memory", {"action": "save", **args})]))
    model.enqueue(Reply(text="Noted."))
    turn_id = api.send(ws_id, "please remember this")
    result = sock.wait_type("tool_result", timeout=60)
    assert not result["is_error"], result
    sock.wait_turn_end(turn_id)


def test_a_relevant_memory_reaches_the_model_and_an_irrelevant_one_does_not(
    api, model, open_socket, clean_memories
):
    ws_id = api.create_workstream()
    staging = "The staging database is postgres on host db-staging-7, port 6543."
    save_memory(
        api, model, open_socket, ws_id, name="staging_database", description="staging", content=staging
    )
    save_memory(
        api, model, open_socket, ws_id, name="lunch_order", content="Friday lunch is falafel from Nura."
    )

    other = api.create_workstream()  # global memories reach every workstream
    sock = open_socket(other)
    model.enqueue(Reply(text="On db-staging-7."))
    turn_id = api.send(other, "Which host runs the staging database?")
    sock.wait_turn_end(turn_id)
    system = system_message(model.history[-1])
    assert "<memories>" in system and "</memories>" in system
    assert "db-staging-7, port 6543" in system and "staging_database" in system
    assert "falafel" not in system

    model.enqueue(Reply(text="Nothing relevant."))
    turn_id = api.send(other, "Tell me a joke about compilers")
    sock.wait_turn_end(turn_id)
    assert "<memories>" not in system_message(model.history[-1])


def test_at_most_inject_max_memories_newest_first(api, model, open_socket, clean_memories):
    ws_id = api.create_workstream()
    for n in range(7):
        save_memory(api, model, open_socket, ws_id, name=f"kestrel_note_{n}", content=f"kestrel sighting {n}")
    sock = open_socket(ws_id)
    model.enqueue(Reply(text="ok"))
    sock.wait_turn_end(api.send(ws_id, "kestrel"))
    system = system_message(model.history[-1])
    shown = [n for n in range(7) if f"kestrel_note_{n} " in system]
    assert shown == [2, 3, 4, 5, 6]  # five, the newest (all score the same)
    assert system.index("kestrel_note_6") < system.index("kestrel_note_2")


def test_the_memories_api_lists_filters_changes_and_deletes(api, model, open_socket, clean_memories):
    ws_id = api.create_workstream()
    save_memory(api, model, open_socket, ws_id, name="tabs_or_spaces", content="four spaces", type="feedback")
    save_memory(api, model, open_socket, ws_id, name="ws_goal", content="port the parser", scope="workstream")
    listed = api.http.get("/v1/api/memories").json()["memories"]
    assert {m["name"] for m in listed} == {"tabs_or_spaces", "ws_goal"}
    by_type = api.http.get("/v1/api/memories", params={"type": "feedback"}).json()["memories"]
    assert [m["name"] for m in by_type] == ["tabs_or_spaces"]
    by_ws = api.http.get("/v1/api/memories", params={"workstream": ws_id}).json()["memories"]
    assert [(m["name"], m["scope"], m["ws_id"]) for m in by_ws] == [("ws_goal", "workstream", ws_id)]
    by_q = api.http.get("/v1/api/memories", params={"q": "parser"}).json()["memories"]
    assert [m["name"] for m in by_q] == ["ws_goal"]

    memory_id = by_type[0]["id"]
    changed = api.http.put(f"/v1/api/memories/{memory_id}", json={"content": "two spaces", "type": "user"})
    assert changed.status_code == 200 and changed.json()["content"] == "two spaces"
    assert api.http.get(f"/v1/api/memories/{memory_id}").json()["type"] == "user"
    assert api.http.delete(f"/v1/api/memories/{memory_id}").json() == {"deleted": memory_id}
    assert api.http.get(f"/v1/api/memories/{memory_id}").status_code == 404
    assert api.http.delete(f"/v1/api/memories/{memory_id}").status_code == 404


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status"),
    [
        ("get", "/v1/api/memories", {"params": {"type": "secret"}}, 400),
        ("get", "/v1/api/memories", {"params": {"scope": "team"}}, 400),
        ("get", "/v1/api/memories", {"params": {"q": "a\x00b"}}, 400),
        ("get", "/v1/api/memories", {"params": {"limit": "0"}}, 400),
        ("get", "/v1/api/memories", {"params": {"limit": "1e9"}}, 400),
        ("get", "/v1/api/memories", {"params": {"workstream": "x" * 40}}, 400),
        ("get", "/v1/api/memories/%00", {}, 404),
        ("get", "/v1/api/memories/" + "x" * 500, {}, 404),
        ("put", "/v1/api/memories/nope", {"json": {"content": "x"}}, 404),
        ("put", "/v1/api/memories/nope", {"json": {"content": 5}}, 400),
        ("put", "/v1/api/memories/nope", {"content": b'{"content": "\\ud800"}'}, 400),
        ("put", "/v1/api/memories/nope", {"json": {"name": "renamed"}}, 400),
        ("put", "/v1/api/memories/nope", {"content": b"[" * 100_000}, 400),
        ("put", "/v1/api/memories/nope", {"json": {"content": "x" * 20_001}}, 400),
        ("delete", "/v1/api/memories/%00", {}, 404),
    ],
)
def test_hostile_requests_to_the_memories_api_are_4xx_with_a_json_error(api, method, path, kwargs, status):
    r = api.http.request(method.upper(), path, **kwargs)
    assert r.status_code == status, r.text
    assert isinstance(r.json()["error"], str)


def test_the_memories_api_needs_a_token(services):
    import httpx

    assert httpx.get(services.base_url + "/v1/api/memories").status_code == 401


def test_recall_through_the_service_finds_another_workstreams_message(api, model, open_socket):
    first = api.create_workstream(name="ornithology notes")
    sock = open_socket(first)
    model.enqueue(Reply(text="The wandering albatross has the largest wingspan."))
    sock.wait_turn_end(api.send(first, "Which bird has the largest wingspan, albatross or condor?"))

    second = api.create_workstream()
    sock = open_socket(second)
    model.enqueue(Reply(tool_calls=[ToolCall("recall", {"query": "wingspan albatross"})]))
    model.enqueue(Reply(text="Found it."))
    turn_id = api.send(second, "what did we say about wingspans?")
    result = sock.wait_type("tool_result", timeout=60)
    sock.wait_turn_end(turn_id)
    assert not result["is_error"]
    entries = result["output"].split("\n\n")
    assert len(entries) == 2  # the question and the answer; not this turn's own message
    assert entries[0].split("\n")[0].endswith(f"] ornithology notes ({first}), assistant:")
    assert "«albatross» has the largest «wingspan»" in entries[0]
    assert entries[1].split("\n")[0].endswith(f"] ornithology notes ({first}), user:")
