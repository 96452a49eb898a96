"""Reranked retrieval (`[tools] rerank_bm25`) against the fake reranker over real HTTP: which
memories reach the system prompt and in what order, the floor, the fallback to BM25, the
cache, and the order memory, tool and skill searches answer in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app import cli
from app.memory import store
from app.memory.relevance import chosen, relevant
from app.reranking import retrieval
from app.reranking.retrieval import RERANK_QUERY_CHARS
from app.settings import (
    RERANK_BM25_POOL,
    RERANK_DOCUMENT_CHARS,
    MemorySettings,
    RerankerSettings,
    Settings,
    ToolSettings,
)
from app.storage.database import Database
from app.storage.migrate import upgrade
from app.storage.models import PromptTemplate, Workstream
from app.tools import skill
from app.tools import tool_search as ts
from app.tools.core.base import ToolContext
from app.tools.core.pipeline import execute_call, prepare_call
from app.tools.core.registry import build_registry
from tests.fakes.reranker import FakeReranker
from tests.unit.test_memory_relevance import memory
from tests.unit.test_reranking import write_config
from tests.unit.test_tool_search import Source

MESSAGE = "owl nest map kestrel"  # the fake reranker reads words of four letters or more: nest, kestrel
MEMORY = MemorySettings()  # inject at most 5, BM25's share gate 0.2


# newest first, as storage hands them out. BM25 ranks owl_map first (three of the message's
# words); the reranker scores kestrel_nest 1.0, owl_map 0.5, owl_only 0.0.
NOTES = [
    memory("owl_map", "owl map owl map nest", 0),
    memory("kestrel_nest", "the kestrel nest is on the church tower", 1, "where the birds are"),
    memory("owl_only", "an owl hooted", 2),
    memory("lunch", "friday lunch is falafel", 3),
]


@pytest.fixture(autouse=True)
def no_remembered_scores() -> Iterator[None]:
    retrieval.forget()
    yield
    retrieval.forget()


@pytest.fixture(scope="module")
def rerank_server() -> Iterator[FakeReranker]:
    server = FakeReranker()
    yield server
    server.close()


@pytest.fixture
def rerank(rerank_server: FakeReranker) -> FakeReranker:
    rerank_server.reset()
    return rerank_server


def on(url: str, threshold: float = 0.0, **reranker: object) -> ToolSettings:
    return ToolSettings(
        rerank_bm25=True,
        rerank_bm25_threshold=threshold,
        reranker=RerankerSettings(url, "fake-ranker", **reranker),  # type: ignore[arg-type]
    )


def names(found: list) -> list[str]:
    return [found_one.name for found_one in found]


# -- memories in the system prompt ---------------------------------------------------------------


def test_the_reranker_decides_the_order_of_the_memories_bm25_found(rerank):
    assert names(relevant(NOTES, MESSAGE, 0.2, 5)) == ["owl_map", "kestrel_nest", "owl_only"]  # BM25
    picked = chosen(NOTES, MESSAGE, MEMORY, on(rerank.url + "/rerank"))
    assert names(picked) == ["kestrel_nest", "owl_map", "owl_only"]  # threshold 0: none left out
    (request,) = rerank.requests
    body = request["body"]
    assert body["query"] == MESSAGE and body["model"] == "fake-ranker"
    # BM25's matches only (lunch matched nothing), best first by BM25; name, description, content
    assert body["documents"] == [
        "owl_map\nowl map owl map nest",
        "kestrel_nest\nwhere the birds are\nthe kestrel nest is on the church tower",
        "owl_only\nan owl hooted",
    ]


def test_at_most_inject_max_go_in_best_by_the_rerankers_score(rerank):
    picked = chosen(NOTES, MESSAGE, MemorySettings(inject_max=1), on(rerank.url + "/rerank"))
    assert names(picked) == ["kestrel_nest"]
    assert chosen(NOTES, MESSAGE, MemorySettings(inject_max=0), on(rerank.url + "/rerank")) == []
    assert len(rerank.requests) == 1  # injection off: nothing to ask


@pytest.mark.parametrize(
    ("threshold", "expected"),
    [
        (0.0, ["kestrel_nest", "owl_map", "owl_only"]),
        (0.5, ["kestrel_nest", "owl_map"]),  # a score equal to the floor reaches it
        (0.6, ["kestrel_nest"]),
        (1.0, ["kestrel_nest"]),
    ],
)
def test_the_floor_keeps_the_memories_that_reach_it(rerank, threshold, expected):
    assert names(chosen(NOTES, MESSAGE, MEMORY, on(rerank.url + "/rerank", threshold))) == expected


def test_a_calibrated_floor_now_decides_which_memories_go_in(rerank, tmp_path, monkeypatch, capsys):
    path = tmp_path / "config.toml"
    monkeypatch.setenv("TURNSTONE_CONFIG", str(path))
    monkeypatch.delenv("TURNSTONE_MODEL", raising=False)
    write_config(path, rerank.url)
    path.write_text(path.read_text().replace("timeout = 60\n", "timeout = 60\nrerank_bm25 = true\n"))
    before = Settings.load()
    assert names(chosen(NOTES, MESSAGE, before.memory, before.tools)) == [
        "kestrel_nest",
        "owl_map",
        "owl_only",
    ]
    assert cli.main(["rerank-calibrate", "--apply"]) == 0
    after = Settings.load()
    assert 0 < after.tools.rerank_bm25_threshold <= 0.5 and after.tools.rerank_bm25
    # owl_only (scored 0) passed BM25's gate and threshold 0; the calibrated floor leaves it out
    assert names(chosen(NOTES, MESSAGE, after.memory, after.tools)) == ["kestrel_nest", "owl_map"]


def test_a_floor_above_every_score_injects_nothing_rather_than_falling_back(rerank):
    rerank.flat()  # every document 0.5
    assert chosen(NOTES, MESSAGE, MEMORY, on(rerank.url + "/rerank", 0.9)) == []


def test_a_message_bm25_matches_nothing_in_asks_the_reranker_nothing(rerank):
    assert chosen(NOTES, "Tell me a joke about compilers", MEMORY, on(rerank.url + "/rerank", 0.1)) == []
    assert chosen(NOTES, "what is it?", MEMORY, on(rerank.url + "/rerank")) == []  # common words only
    assert rerank.requests == []


@pytest.mark.parametrize("fault", ["500", "garbage", "nested", "closed", "stall"])
def test_a_failing_reranker_leaves_bm25s_injection_exactly(rerank, fault):
    url = rerank.url + "/rerank"
    if fault == "500":
        rerank.fail(500)
    elif fault == "garbage":
        rerank.garbage()
    elif fault == "nested":
        rerank.raw(b"[" * 200_000 + b"]" * 200_000)
    elif fault == "stall":
        rerank.stall(2)
    else:
        url = "http://127.0.0.1:9/rerank"
    today = chosen(NOTES, MESSAGE, MEMORY, ToolSettings())
    assert names(today) == ["owl_map", "kestrel_nest", "owl_only"]
    # the floor is not applied to BM25's choice: its own share gate is
    assert chosen(NOTES, MESSAGE, MEMORY, on(url, 0.9, timeout=0.3)) == today


def test_reranking_off_sends_nothing(rerank):
    selected = RerankerSettings(rerank.url + "/rerank", "fake-ranker")
    for tools in (ToolSettings(reranker=selected), ToolSettings(rerank_bm25=True), ToolSettings()):
        assert names(chosen(NOTES, MESSAGE, MEMORY, tools)) == ["owl_map", "kestrel_nest", "owl_only"]
    assert rerank.requests == []


def test_the_same_message_and_memories_are_scored_once_and_an_edit_is_scored_again(rerank):
    tools = on(rerank.url + "/rerank")
    first = chosen(NOTES, MESSAGE, MEMORY, tools)
    assert chosen(NOTES, MESSAGE, MEMORY, tools) == first  # the turn's next model step
    assert len(rerank.requests) == 1
    edited = [memory("owl_map", "owl map owl map nest kestrel", 0), *NOTES[1:]]
    assert names(chosen(edited, MESSAGE, MEMORY, tools))[0] == "owl_map"  # now scored 1.0, first by BM25
    assert len(rerank.requests) == 2
    chosen(NOTES, "kestrel nest tower", MEMORY, tools)  # another message
    chosen(NOTES, MESSAGE, MEMORY, on(rerank.url + "/rerank", instruction="find notes"))  # another query
    assert len(rerank.requests) == 4


def test_a_failure_is_remembered_briefly_so_each_step_does_not_wait_for_it(rerank):
    rerank.fail(503)
    tools = on(rerank.url + "/rerank")
    chosen(NOTES, MESSAGE, MEMORY, tools)
    chosen(NOTES, MESSAGE, MEMORY, tools)
    assert len(rerank.requests) == 1
    rerank.reset()
    retrieval.forget()  # as RERANK_FAILURE_CACHE_SECONDS passing would
    assert names(chosen(NOTES, MESSAGE, MEMORY, tools))[0] == "kestrel_nest"


def test_only_bm25s_best_pool_is_sent_and_the_rest_follow_in_bm25s_order(rerank):
    # every note matches "kestrel"; the newest come first among BM25's equals
    many = [memory(f"note_{n}", f"kestrel {'nest' if n == 29 else 'seen'}", n) for n in range(30)]
    picked = retrieval.reranked(on(rerank.url + "/rerank"), "kestrel nest", many, store.document)
    assert picked is not None and len(rerank.requests[0]["body"]["documents"]) == RERANK_BM25_POOL
    # note_29 matched best but lay past the pool: never scored, kept in BM25's place
    assert names(picked)[-5:] == [f"note_{n}" for n in range(25, 30)]
    floored = retrieval.reranked(on(rerank.url + "/rerank"), "kestrel nest", many, store.document, 0.1)
    assert floored is not None and len(floored) == RERANK_BM25_POOL  # scored ones only


def test_hostile_memory_text_reaches_the_reranker_safely(rerank):
    hostile = [
        memory("nul_note", "kestrel\x00nest", 0),
        memory("surrogate_note", "kestrel \ud800 nest \udfff", 1, "bad \udc00 escape"),
        memory("huge_note", "kestrel " + "x" * 1_000_000, 2),
    ]
    tools = on(rerank.url + "/rerank")
    message = "kestrel nest \ud83d" + "?" * 10_000
    picked = chosen(hostile, message, MEMORY, tools)
    assert sorted(names(picked)) == ["huge_note", "nul_note", "surrogate_note"]
    assert chosen(hostile, message, MEMORY, tools) == picked and len(rerank.requests) == 1  # cached
    body = rerank.requests[0]["body"]
    assert body["query"] == ("kestrel nest \ufffd" + "?" * 10_000)[:RERANK_QUERY_CHARS]
    documents = body["documents"]
    assert "nul_note\nkestrel\x00nest" in documents
    assert "surrogate_note\nbad \ufffd escape\nkestrel \ufffd nest \ufffd" in documents
    assert max(len(d) for d in documents) == RERANK_DOCUMENT_CHARS


# -- the searches -------------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    upgrade(url)
    database = Database(url)
    with database.session() as s:
        s.add(Workstream(id="ws1", name="ws1", working_dir="/tmp"))
    yield database
    database.dispose()


def memory_search(db: Database, tools: ToolSettings, query: str = MESSAGE, **args: object) -> str:
    registry = build_registry()
    ctx = ToolContext("ws1", "/tmp", settings=tools, db=db)
    call = json.dumps({"action": "search", "query": query, **args})
    outcome = execute_call(registry, prepare_call(registry, "c1", "memory", call, ctx), ctx)
    assert not outcome.is_error, outcome.output
    return outcome.output


def listed(output: str) -> list[str]:
    return [line[2:].split(" [")[0] for line in output.splitlines() if line.startswith("- ")]


def test_memory_search_answers_in_the_rerankers_order(db, rerank):
    view = store.view_of_workstream(db, "ws1")
    for note in reversed(NOTES):  # saved oldest first
        store.save(db, view, note.name, note.content, note.description, "project", "global")
    assert listed(memory_search(db, ToolSettings())) == ["owl_map", "kestrel_nest", "owl_only"]
    assert rerank.requests == []
    tools = on(rerank.url + "/rerank", threshold=0.9)  # the floor is the injection's, not a search's
    assert listed(memory_search(db, tools)) == ["kestrel_nest", "owl_map", "owl_only"]
    assert listed(memory_search(db, tools, limit=1)) == ["kestrel_nest"]  # cut after reordering
    (request,) = rerank.requests
    assert request["body"]["documents"][1] == (
        "kestrel_nest\nwhere the birds are\nthe kestrel nest is on the church tower"
    )
    rerank.fail(500)
    bm25 = listed(memory_search(db, ToolSettings(), query="kestrel owl"))
    assert listed(memory_search(db, tools, query="kestrel owl")) == bm25 and len(bm25) == 3


TOOLS = {
    "cal_add": "Add to a cal. Add cal entry.",
    "schedule_meeting": "Schedule a meeting event with people.",
    "weather_forecast": "The weather forecast for a city.",
    "slack_post_message": "Post a message to a Slack channel.",
}


def tool_search(tools: ToolSettings, limit: int = 5) -> list[str]:
    handler = ts.tool(lambda ctx: (Source(TOOLS).tools, limit)).handler
    outcome = handler.execute({"query": "add cal meeting event"}, ToolContext("ws1", "/tmp", settings=tools))
    return [line[2:].split(":")[0] for line in outcome.output.splitlines() if line.startswith("- ")]


def test_tool_search_answers_in_the_rerankers_order_and_sends_name_and_description(rerank):
    assert tool_search(ToolSettings()) == ["cal_add", "schedule_meeting"]  # BM25
    assert rerank.requests == []
    assert tool_search(on(rerank.url + "/rerank")) == ["schedule_meeting", "cal_add"]
    assert tool_search(on(rerank.url + "/rerank"), limit=1) == ["schedule_meeting"]
    (request,) = rerank.requests
    assert request["body"]["query"] == "add cal meeting event"
    assert request["body"]["documents"] == [
        "cal_add\nAdd to a cal. Add cal entry.",
        "schedule_meeting\nSchedule a meeting event with people.",
    ]
    rerank.fail(500)
    retrieval.forget()
    assert tool_search(on(rerank.url + "/rerank")) == ["cal_add", "schedule_meeting"]


def skill_search(db: Database, tools: ToolSettings) -> list[str]:
    outcome = skill.execute(
        {"action": "search", "query": "add cal meeting event"},
        ToolContext("ws1", "/tmp", settings=tools, db=db),
    )
    return [line[2:].split(" [")[0] for line in outcome.output.splitlines() if line.startswith("- ")]


def test_skill_search_answers_in_the_rerankers_order_and_sends_what_bm25_matched(db, rerank):
    with db.session() as s:
        s.add(PromptTemplate(name="cal-add", description="Add cal add cal", content="secret body"))
        s.add(
            PromptTemplate(
                name="team-sync",
                description="Run a meeting event",
                content="never sent",
                tags=["meeting", "team"],
                category="planning",
            )
        )
        s.add(PromptTemplate(name="off-topic", description="Write a poem"))
    assert skill_search(db, ToolSettings()) == ["cal-add", "team-sync"]
    assert skill_search(db, on(rerank.url + "/rerank")) == ["team-sync", "cal-add"]
    (request,) = rerank.requests
    assert request["body"]["documents"] == [
        "cal-add\nAdd cal add cal",
        "team-sync\nRun a meeting event\ntags: meeting, team\ncategory: planning",
    ]
