"""The BM25 index against an independent implementation (bm25s, Lucene's variant) on a fixed corpus."""

from __future__ import annotations

import math

import bm25s
import pytest

from app import bm25
from app.bm25 import Index, tokens

CORPUS = [
    "github_list_issues List the issues of a GitHub repository, open or closed",
    "github_create_issue Open a new issue in a GitHub repository",
    "github_create_pull_request Open a pull request from one branch into another",
    "slack_post_message Post a message to a Slack channel",
    "slack_list_channels List the channels of a Slack workspace",
    "jira.search_issues Search Jira issues with a JQL query",
    "calendar/create-event Add an event to a calendar at a given date and time",
    "weather_forecast The weather forecast for a city: temperature, rain and wind",
    "postgres_query Run a read-only SQL query against a PostgreSQL database",
    "s3_list_objects List the objects in an S3 bucket under a prefix",
    "s3_put_object Upload a file to an S3 bucket",
    "translate_text Translate text from one language into another",
]
QUERIES = [
    "list issues",
    "create a pull request",
    "slack message",
    "weather in a city",
    "sql database query",
    "upload file to bucket",
    "calendar event",
    "issues",
    "translate",
]


def reference() -> bm25s.BM25:
    ranker = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    ranker.index([tokens(text) for text in CORPUS], show_progress=False)
    return ranker


@pytest.mark.parametrize("query", QUERIES)
def test_scores_and_ranking_agree_with_bm25s(query: str) -> None:
    index = Index(enumerate(CORPUS))
    expected = reference().get_scores(tokens(query))
    got = index.scores(query)
    assert [round(got.get(n, 0.0), 6) for n in range(len(CORPUS))] == [round(float(x), 6) for x in expected]
    ranked = [key for key, _score in index.search(query, limit=len(CORPUS))]
    by_reference = sorted((n for n in range(len(CORPUS)) if expected[n] > 0), key=lambda n: (-expected[n], n))
    assert ranked == by_reference


def test_tokens_split_on_separators_and_lower_case() -> None:
    assert tokens("GitHub.list_issues repo/owner-name\tNow") == [
        "github", "list", "issues", "repo", "owner", "name", "now",
    ]  # fmt: skip


def test_the_limit_and_no_match() -> None:
    index = Index(enumerate(CORPUS))
    best_two = [k for k, _ in index.search("list issues", 2)]
    assert len(best_two) == 2 and best_two[0] == 0  # the one document with both words
    assert index.search("kubernetes", 5) == []
    assert index.search("", 5) == [] and index.search("   ", 5) == []
    assert index.search("list", 0) == []


def test_an_empty_index_finds_nothing() -> None:
    index: Index[str] = Index([])
    assert len(index) == 0 and index.search("anything", 5) == []


def test_a_word_every_document_has_still_counts() -> None:
    index = Index([("a", "tool one"), ("b", "tool two"), ("c", "tool tool three")])
    assert [k for k, _ in index.search("tool", 3)] == ["c", "a", "b"]


# -- what memories and skills use: prose without punctuation, the idf a message's words weigh


def test_punctuation_goes_before_tokenizing():
    assert bm25.tokens(bm25.without_punctuation("release? (deploy), 'now'!")) == ["release", "deploy", "now"]


def test_the_document_with_the_rarer_word_scores_higher():
    index = bm25.Index(enumerate(["deploy the app", "deploy the database", "lunch menu"]))
    scores = index.scores("database deploy")
    assert scores[1] > scores[0] > 0 and 2 not in scores


def test_a_word_in_every_document_still_counts_a_little():
    scores = bm25.Index(enumerate(["kestrel one", "kestrel two"])).scores("kestrel")
    assert scores[0] == scores[1] > 0


def test_idf_of_a_word_and_of_one_no_document_has():
    index = bm25.Index(enumerate(["a b", "b c"]))
    assert index.idf("a") == pytest.approx(math.log(1 + (2 - 1 + 0.5) / (1 + 0.5)))
    assert index.idf("never") == pytest.approx(math.log(1 + 2.5 / 0.5))
