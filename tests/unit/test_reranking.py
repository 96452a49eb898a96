"""The reranker: its configuration, the client against a fake endpoint over real HTTP,
web_search's reordering and its silent fallback, and the calibration probe and command.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from app import cli
from app.reranking.calibration import PROBES, Calibration, calibrate, write_threshold
from app.reranking.client import Reranker, RerankError, parse_scores, wrap_query
from app.settings import RERANK_DOCUMENT_CHARS, RerankerSettings, Settings, SettingsError, ToolSettings
from app.tools import web_search
from app.tools.core.base import ToolContext
from tests.fakes.reranker import FakeReranker
from tests.fakes.searxng import FakeSearxNG, result

QUERY = "ruddy turnstone migration"
POOL = [
    result("Stones and rocks", "https://a.example/stones", "Igneous rock formation."),
    result("Bird migration", "https://b.example/migration", "Birds migrate in autumn."),
    result("Ruddy turnstone migration", "https://c.example/turnstone", "The ruddy turnstone migrates far."),
]


@pytest.fixture
def rerank() -> Iterator[FakeReranker]:
    server = FakeReranker()
    yield server
    server.close()


@pytest.fixture
def searx() -> Iterator[FakeSearxNG]:
    server = FakeSearxNG()
    yield server
    server.close()


def reranker_config(url: str, **tools: object) -> dict:
    return {
        "models": {
            "chat": {"provider": "openai", "model": "m"},
            "ranker": {
                "provider": "rerank",
                "model": "qwen3-reranker",
                "base_url": url,
                "api_key_env": "RERANK_KEY",
                "capabilities": {"supports_rerank": True},
            },
        },
        "default_model": "chat",
        "roles": {"reranker": "ranker"},
        "tools": tools,
    }


# -- configuration -----------------------------------------------------------------------------


def test_the_reranker_role_names_a_model_that_can_rerank():
    settings = Settings.from_mapping(
        reranker_config("http://rank:8000", rerank_instruction="find answers"), {"RERANK_KEY": "rk-secret-1"}
    )
    assert settings.tools.reranker == RerankerSettings(
        "http://rank:8000/rerank", "qwen3-reranker", "rk-secret-1", "find answers"
    )
    assert "rk-secret-1" not in repr(settings.tools)
    assert not settings.models["ranker"].is_chat_model and settings.models["chat"].is_chat_model


def test_a_base_url_that_is_the_endpoint_is_used_as_it_is():
    settings = Settings.from_mapping(reranker_config("http://rank:8000/v1/rerank/"), {})
    assert settings.tools.reranker is not None and settings.tools.reranker.url == "http://rank:8000/v1/rerank"


def test_no_role_means_no_reranker():
    assert Settings.from_mapping({}, {}).tools.reranker is None


def test_reranked_retrieval_is_off_unless_asked_for_and_a_bool_when_it_is():
    assert Settings.from_mapping(reranker_config("http://rank:8000"), {}).tools.rerank_bm25 is False
    assert Settings.from_mapping({}, {}).tools.rerank_bm25 is False
    config = reranker_config("http://rank:8000", rerank_bm25=True, rerank_bm25_threshold=0.4)
    tools = Settings.from_mapping(config, {}).tools
    assert tools.rerank_bm25 is True and tools.rerank_bm25_threshold == 0.4
    off = Settings.from_mapping({"tools": {"rerank_bm25": False}}, {})  # off needs no reranker
    assert off.tools.rerank_bm25 is False


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["roles"].update(reranker="missing"), "'missing' is not a configured model"),
        (lambda c: c["roles"].update(reranker=3), "3 is not a configured model"),
        (lambda c: c["roles"].update(editor="chat"), "unknown role(s) editor"),
        (lambda c: c.update(roles="ranker"), "[roles] must be a table"),
        (lambda c: c["roles"].update(reranker="chat"), "needs capabilities supports_rerank"),
        (lambda c: c["models"]["ranker"].pop("capabilities"), "provider 'rerank' needs capabilities"),
        (lambda c: c["models"]["ranker"].pop("base_url"), "needs a base_url"),
        (lambda c: c.update(default_model="ranker"), "only reranks; name a chat model"),
        (lambda c: c["tools"].update(rerank_bm25_threshold=1.5), "from 0 to 1, not 1.5"),
        (lambda c: c["tools"].update(rerank_bm25_threshold="high"), "from 0 to 1, not 'high'"),
        (lambda c: c["tools"].update(rerank_web_search="yes"), "rerank_web_search must be true or false"),
        (lambda c: c["tools"].update(rerank_bm25="yes"), "rerank_bm25 must be true or false, not 'yes'"),
        (lambda c: c["tools"].update(rerank_bm25=1), "rerank_bm25 must be true or false, not 1"),
        (lambda c: c["tools"].update(rerank_bm25=[True]), "rerank_bm25 must be true or false, not a list"),
        (
            lambda c: (c.pop("roles"), c["tools"].update(rerank_bm25=True)),
            '[tools] rerank_bm25 = true needs a reranker: set [roles] reranker = "MODEL"',
        ),
        (lambda c: c["tools"].update(rerank_instruction=["x"]), "rerank_instruction must be a string"),
        (lambda c: c["tools"].update(reranker="x"), "unknown key(s) reranker"),
    ],
)
def test_a_bad_reranker_configuration_says_what_is_wrong(change, message):
    config = reranker_config("http://rank:8000")
    change(config)
    with pytest.raises(SettingsError) as caught:
        Settings.from_mapping(config, {})
    assert message in str(caught.value)


def test_the_rerankers_key_never_reaches_a_command(tmp_path):
    from app.tools import bash

    settings = Settings.from_mapping(reranker_config("http://rank:8000"), {"RERANK_KEY": "rk-secret-zz9"})
    # held under a variable whose name does not look secret: removed by value
    ctx = ToolContext("ws", str(tmp_path), settings=settings.tools)
    prep = bash.prepare({"command": "echo key=$HIDDEN_ONE; echo rk-secret-zz9"}, ctx)
    import os

    os.environ["HIDDEN_ONE"] = "rk-secret-zz9"
    try:
        outcome = bash.execute(prep.args, ctx)
    finally:
        del os.environ["HIDDEN_ONE"]
    assert "rk-secret-zz9" not in outcome.output
    assert "key=\n" in outcome.output + "\n"


# -- the client --------------------------------------------------------------------------------


def test_the_client_sends_the_query_documents_and_key_and_reads_the_scores(rerank):
    ranker = Reranker(rerank.url + "/rerank", "qwen3-reranker", "rk-key-123")
    assert ranker.scores("ruddy turnstone", ["a ruddy duck", "the ruddy turnstone", "nothing"]) == [
        0.5,
        1.0,
        0.0,
    ]
    (request,) = rerank.requests
    assert request["path"] == "/rerank" and request["authorization"] == "Bearer rk-key-123"
    assert request["body"] == {
        "model": "qwen3-reranker",
        "query": "ruddy turnstone",
        "documents": ["a ruddy duck", "the ruddy turnstone", "nothing"],
        "top_n": 3,
        "return_documents": False,
    }


def test_an_instruction_wraps_the_query_as_an_instruction_aware_reranker_expects(rerank):
    Reranker(rerank.url + "/rerank", "m", instruction="Find passages that answer it").scores("q", ["d"])
    assert rerank.requests[0]["body"]["query"] == "<Instruct>: Find passages that answer it\n<Query>: q"
    assert wrap_query("q", None) == "q" and wrap_query("q", "") == "q"


def test_order_is_best_first_and_ties_keep_the_given_order(rerank):
    ranker = Reranker(rerank.url + "/rerank", "m")
    assert ranker.order("alpha beta", ["xray", "alpha", "alpha beta", "beta", "yankee"]) == [2, 1, 3, 0, 4]
    assert ranker.scores("alpha", []) == [] and len(rerank.requests) == 1  # nothing to score: no request


def test_a_bare_list_answer_is_read_too():
    assert parse_scores([{"index": 1, "score": 0.2}, {"index": 0, "score": 0.9}], 2) == [0.9, 0.2]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"data": []}, "no list of results"),
        ({"results": ["x"]}, "not an object"),
        ({"results": [{"index": 5, "relevance_score": 1}]}, "index 5"),
        ({"results": [{"index": True, "relevance_score": 1}]}, "index True"),
        ({"results": [{"index": 0, "relevance_score": "high"}]}, "not a number ('high')"),
        ({"results": [{"index": 0, "relevance_score": float("nan")}]}, "not a number (nan)"),
        ({"results": [{"index": 0, "relevance_score": 1}, {"index": 0, "relevance_score": 1}]}, "twice"),
        ({"results": [{"index": 0, "relevance_score": 1}]}, "leaves 1 of 2 document(s) unscored"),
    ],
)
def test_an_answer_that_does_not_score_every_document_once_is_an_error(answer, message):
    with pytest.raises(RerankError) as caught:
        parse_scores(answer, 2)
    assert message in str(caught.value)


def test_a_failing_endpoint_is_an_error_that_says_what_happened(rerank):
    ranker = Reranker(rerank.url + "/rerank", "m", "rk-never-shown", timeout=0.3)
    rerank.fail(500)
    with pytest.raises(RerankError, match="answered 500 Internal Server Error"):
        ranker.scores("q", ["d"])
    rerank.reset()
    rerank.garbage()
    with pytest.raises(RerankError, match="not JSON"):
        ranker.scores("q", ["d"])
    rerank.reset()
    rerank.stall(2)
    with pytest.raises(RerankError, match="did not answer within 0.3 s") as caught:
        ranker.scores("q", ["d"])
    assert "rk-never-shown" not in str(caught.value)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RerankError, match="could not be reached"):
        Reranker(f"http://127.0.0.1:{port}/rerank", "m").scores("q", ["d"])


# -- web_search --------------------------------------------------------------------------------


def search(
    searx: FakeSearxNG, reranker: RerankerSettings | None, max_results: int = 2, **tools: object
) -> str:
    settings = ToolSettings(searxng_url=searx.url, reranker=reranker, **tools)  # type: ignore[arg-type]
    ctx = ToolContext("ws", "/tmp", settings=settings)
    prep = web_search.prepare({"query": QUERY, "max_results": 2}, ctx)
    outcome = web_search.execute(prep.args, ctx)
    assert not outcome.is_error, outcome.output
    return outcome.output


def urls(output: str) -> list[str]:
    return [line.split("](")[1].rstrip(")") for line in output.splitlines() if "](" in line]


def test_web_search_reorders_the_whole_pool_before_cutting_it(searx, rerank):
    searx.answer(POOL)
    found = search(searx, RerankerSettings(rerank.url + "/rerank", "m"))
    # the best match was last in the backend's order, past the cut of two
    assert urls(found) == ["https://c.example/turnstone", "https://b.example/migration"]
    (request,) = rerank.requests
    assert request["body"]["query"] == QUERY and len(request["body"]["documents"]) == 3
    assert request["body"]["documents"][2] == "Ruddy turnstone migration\nThe ruddy turnstone migrates far."


@pytest.mark.parametrize("fault", ["fail", "garbage", "nested", "stall", "closed"])
def test_a_failing_reranker_leaves_the_backends_order(searx, rerank, fault):
    searx.answer(POOL)
    url = rerank.url + "/rerank"
    if fault == "fail":
        rerank.fail(503)
    elif fault == "garbage":
        rerank.garbage()
    elif fault == "nested":  # deeper than Python's parser goes
        rerank.raw(b"[" * 200_000 + b"]" * 200_000)
    elif fault == "stall":
        rerank.stall(2)
    else:
        url = "http://127.0.0.1:9/rerank"
    found = search(searx, RerankerSettings(url, "m", timeout=0.3))
    assert urls(found) == ["https://a.example/stones", "https://b.example/migration"]


def test_a_result_with_text_json_cannot_encode_is_reranked_all_the_same(searx, rerank):
    # A lone surrogate (an engine's broken escape) reaches the reranker as U+FFFD; the search
    # is reranked instead of failing.
    broken = result("Ruddy turnstone \ud800 migration", "https://d.example/broken", "far \udfff")
    searx.answer([*POOL[:2], broken])
    found = search(searx, RerankerSettings(rerank.url + "/rerank", "m"))
    assert urls(found)[0] == "https://d.example/broken"
    assert rerank.requests[0]["body"]["documents"][2] == "Ruddy turnstone \ufffd migration\nfar \ufffd"


def test_a_huge_snippet_reaches_the_reranker_cut_as_retrieval_cuts_its_texts(searx, rerank):
    searx.answer([*POOL[:2], result("Ruddy turnstone migration", "https://e.example/long", "far " * 50_000)])
    found = search(searx, RerankerSettings(rerank.url + "/rerank", "m"))
    assert urls(found)[0] == "https://e.example/long"
    sent = rerank.requests[0]["body"]["documents"]
    assert len(sent[2]) == RERANK_DOCUMENT_CHARS and sent[2].startswith("Ruddy turnstone migration\nfar far")


def test_rerank_web_search_off_keeps_the_backends_order(searx, rerank):
    searx.answer(POOL)
    found = search(searx, RerankerSettings(rerank.url + "/rerank", "m"), rerank_web_search=False)
    assert urls(found) == ["https://a.example/stones", "https://b.example/migration"]
    assert rerank.requests == []


# -- calibration -------------------------------------------------------------------------------


def test_calibration_scores_every_probe_against_every_passage(rerank):
    result = calibrate(Reranker(rerank.url + "/rerank", "m"))
    assert len(rerank.requests) == len(PROBES)
    assert len(result.relevant) == len(PROBES) and len(result.irrelevant) == len(PROBES) * len(PROBES)
    assert result.is_probability and result.separates
    assert result.floor is not None and max(result.irrelevant) < result.floor < min(result.relevant)


def test_a_reranker_that_separates_nothing_gets_no_floor(rerank):
    rerank.flat()
    result = calibrate(Reranker(rerank.url + "/rerank", "m"))
    assert not result.separates and result.floor is None
    assert any(line.startswith("no clean separation") for line in result.report())


def test_scores_outside_0_to_1_separate_but_give_no_probability_floor():
    result = Calibration(relevant=(4.0, 6.0), irrelevant=(-5.0, -1.0))
    assert result.separates and not result.is_probability and result.floor is None
    assert result.report()[0].startswith("score scale: unbounded")


def test_write_threshold_keeps_the_rest_of_the_file(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('# my service\n[tools]\ntimeout = 60  # long builds\n\n[roles]\nreranker = "r"\n')
    write_threshold(path, 0.42)
    text = path.read_text()
    assert text.startswith(
        "# my service\n[tools]\ntimeout = 60  # long builds\nrerank_bm25_threshold = 0.42\n"
    )
    assert 'reranker = "r"' in text
    write_threshold(tmp_path / "new.toml", 0.5)
    assert (tmp_path / "new.toml").read_text().strip() == "[tools]\nrerank_bm25_threshold = 0.5"


# -- the command -------------------------------------------------------------------------------


def write_config(path: Path, url: str) -> None:
    path.write_text(
        '# keep me\ndefault_model = "chat"\n[tools]\ntimeout = 60\n\n'
        '[models.chat]\nprovider = "openai"\nmodel = "m"\n\n'
        f'[models.ranker]\nprovider = "rerank"\nmodel = "qwen3-reranker"\nbase_url = "{url}"\n'
        "[models.ranker.capabilities]\nsupports_rerank = true\n\n"
        '[roles]\nreranker = "ranker"\n'
    )


@pytest.fixture
def config(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "config.toml"
    monkeypatch.setenv("TURNSTONE_CONFIG", str(path))
    monkeypatch.delenv("TURNSTONE_MODEL", raising=False)
    return path


def test_calibrate_reports_and_applies_a_floor_that_settings_then_load(rerank, config, capsys):
    write_config(config, rerank.url)
    assert cli.main(["rerank-calibrate"]) == 0
    out = capsys.readouterr().out
    assert f"reranker: qwen3-reranker at {rerank.url}/rerank" in out
    assert "score scale: probabilities (0 to 1)" in out and "suggested rerank_bm25_threshold = " in out
    assert "rerank_bm25_threshold" not in config.read_text()  # only --apply writes

    assert cli.main(["rerank-calibrate", "--apply"]) == 0
    floor = float(out.split("suggested rerank_bm25_threshold = ")[1].split()[0])
    assert f"wrote [tools] rerank_bm25_threshold = {floor}" in capsys.readouterr().out
    assert config.read_text().startswith("# keep me\n")
    assert Settings.load().tools.rerank_bm25_threshold == floor


def test_calibrate_without_separation_fails_and_writes_nothing(rerank, config, capsys):
    write_config(config, rerank.url)
    rerank.flat()
    before = config.read_text()
    assert cli.main(["rerank-calibrate", "--apply"]) == 1
    assert "no clean separation" in capsys.readouterr().out
    assert config.read_text() == before


def test_calibrate_says_when_the_endpoint_fails_or_none_is_configured(rerank, config, capsys):
    write_config(config, rerank.url)
    rerank.fail(502)
    assert cli.main(["rerank-calibrate"]) == 1
    assert "turnstone-jobs: the reranker answered 502 Bad Gateway" in capsys.readouterr().err
    config.write_text('[models.chat]\nprovider = "openai"\nmodel = "m"\n')
    assert cli.main(["rerank-calibrate"]) == 2
    assert 'no reranker: set [roles] reranker = "MODEL"' in capsys.readouterr().err
    config.write_text("[roles]\nreranker = 'nope'\n")
    assert cli.main(["rerank-calibrate"]) == 2
    assert "'nope' is not a configured model" in capsys.readouterr().err
