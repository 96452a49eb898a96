"""Reranked memory injection through the engine run in-process (real database, SQLite and
PostgreSQL, real Redis, the fake model and the fake reranker over HTTP): what the model's
system message holds at each step of a turn, and what the reranker was asked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.engine.life import turns, workstreams
from app.engine.running import model_step, tool_batch
from app.memory import store
from app.reranking import retrieval
from app.runtime import Runtime
from app.settings import RerankerSettings, ToolSettings
from app.storage.models import Turn, TurnStatus
from tests.fakes.model_server import Reply, ToolCall
from tests.fakes.reranker import FakeReranker
from tests.integration.storage import runtime

pytestmark = pytest.mark.integration

MESSAGE = "owl nest map kestrel"  # the fake reranker reads words of four letters or more: nest, kestrel
# (name, content, description), saved oldest first. BM25 ranks owl_map first; the reranker
# scores kestrel_nest 1.0, owl_map 0.5, owl_only 0.0; lunch matches nothing.
NOTES = [
    ("lunch", "friday lunch is falafel", ""),
    ("owl_only", "an owl hooted", ""),
    ("kestrel_nest", "the kestrel nest is on the church tower", "where the birds are"),
    ("owl_map", "owl map owl map nest", ""),
]


@pytest.fixture(params=["sqlite", "postgresql"])
def rt(request, tmp_path, model_server, reranker: FakeReranker) -> Iterator[Runtime]:
    retrieval.forget()  # scores are remembered per process: this one runs every test's steps
    tools = ToolSettings(rerank_bm25=True, reranker=RerankerSettings(reranker.url + "/rerank", "fake-ranker"))
    yield from runtime(request.param, tmp_path, model_server, tools=tools)
    retrieval.forget()


def save(rt: Runtime, name: str, content: str, description: str = "") -> None:
    store.save(
        rt.db, store.View(None, may_change_global=True), name, content, description, "project", "global"
    )


def memories_shown(system: str) -> list[str]:
    """The names of the injected memories, in the block's order."""
    block = system.split("<memories>", 1)[1].split("</memories>", 1)[0] if "<memories>" in system else ""
    return [line[3:].split(" (")[0] for line in block.splitlines() if line.startswith("## ")]


def system_of(model_server, step: int) -> str:
    """The memories the step was sent: after the conversation, never in the system prompt."""
    first, last = (model_server.history[step].body["messages"][i] for i in (0, -1))
    assert first["role"] == "system" and "<memories>" not in str(first["content"])
    return str(last["content"]) if last["role"] == "user" else ""


def test_each_step_shows_the_rerankers_order_asked_once_until_a_memory_changes(rt, model_server, reranker):
    for note in NOTES:
        save(rt, *note)
    ws = workstreams.create(rt, name="birds", auto_approve=True)
    turn_id = turns.send(rt, ws.id, MESSAGE).id
    model_server.enqueue(Reply(tool_calls=[ToolCall("memory", {"action": "list"})]))
    model_server.enqueue(
        Reply(
            tool_calls=[
                ToolCall("memory", {"action": "save", "name": "owl_map", "content": "kestrel nest map"})
            ]
        )
    )
    model_server.enqueue(Reply(text="On the church tower."))

    model_step.run(rt, turn_id, 0)
    assert memories_shown(system_of(model_server, 0)) == ["kestrel_nest", "owl_map", "owl_only"]
    (request,) = reranker.requests
    assert request["authorization"] is None and request["body"]["query"] == MESSAGE
    assert (
        "kestrel_nest\nwhere the birds are\nthe kestrel nest is on the church tower"
        in (request["body"]["documents"])
    )

    tool_batch.run(rt, turn_id, 0)
    model_step.run(rt, turn_id, 1)  # the same message, the same memories: the same block, no request
    assert memories_shown(system_of(model_server, 1)) == ["kestrel_nest", "owl_map", "owl_only"]
    assert len(reranker.requests) == 1

    tool_batch.run(rt, turn_id, 1)  # the model rewrote owl_map: asked again
    model_step.run(rt, turn_id, 2)
    assert len(reranker.requests) == 2
    assert memories_shown(system_of(model_server, 2))[0] == "owl_map"  # scored 1.0, first by BM25
    with rt.db.session() as s:
        turn = s.get(Turn, turn_id)
        assert turn is not None and turn.status == TurnStatus.DONE


def test_a_reranker_that_is_down_leaves_bm25s_block(rt, model_server, reranker):
    for note in NOTES:
        save(rt, *note)
    reranker.fail(503)
    ws = workstreams.create(rt, name="birds")
    model_server.enqueue(Reply(text="ok"))
    model_step.run(rt, turns.send(rt, ws.id, MESSAGE).id, 0)
    assert memories_shown(system_of(model_server, 0)) == ["owl_map", "kestrel_nest", "owl_only"]
    assert len(reranker.requests) == 1


def test_hostile_memories_reach_the_reranker_and_the_step_goes_on(rt, model_server, reranker):
    save(rt, "nul_note", "kestrel\x00nest")
    save(rt, "surrogate_note", "kestrel \ud800 nest", "bad \udfff escape")
    save(rt, "huge_note", "kestrel " + "x" * 200_000)
    ws = workstreams.create(rt, name="birds")
    turn_id = turns.send(rt, ws.id, MESSAGE).id
    model_server.enqueue(Reply(text="ok"))
    model_step.run(rt, turn_id, 0)
    assert sorted(memories_shown(system_of(model_server, 0))) == ["huge_note", "nul_note", "surrogate_note"]
    documents = reranker.requests[0]["body"]["documents"]
    assert "surrogate_note\nbad \ufffd escape\nkestrel \ufffd nest" in documents
    assert max(len(d) for d in documents) < 3000
    with rt.db.session() as s:
        turn = s.get(Turn, turn_id)
        assert turn is not None and turn.status == TurnStatus.DONE
