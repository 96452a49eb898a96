"""The BM25 module: tokens, scores, the non-negative IDF."""

from __future__ import annotations

import math

import pytest

from app.bm25 import BM25Index, tokenize, without_punctuation


def test_tokens_split_on_underscore_dash_dot_slash_and_space_lower_cased():
    assert tokenize("Web_Search read-file a.b/c  D\tE") == [
        "web",
        "search",
        "read",
        "file",
        "a",
        "b",
        "c",
        "d",
        "e",
    ]
    assert tokenize("  __--..//  ") == []


def test_punctuation_goes_before_tokenizing():
    assert tokenize(without_punctuation("release? (deploy), 'now'!")) == ["release", "deploy", "now"]


def test_the_document_with_the_rarer_word_scores_higher():
    index = BM25Index(["deploy the app", "deploy the database", "lunch menu"])
    deploy_app, deploy_db, lunch = index.scores("database deploy")
    assert deploy_db > deploy_app > 0 and lunch == 0


def test_a_word_in_every_document_still_counts_a_little():
    scores = BM25Index(["kestrel one", "kestrel two"]).scores("kestrel")
    assert scores[0] == scores[1] > 0


def test_shorter_documents_win_at_equal_counts():
    long_doc, short_doc = BM25Index(["kite " + "filler " * 20, "kite filler"]).scores("kite")
    assert short_doc > long_doc


def test_the_score_follows_the_formula():
    index = BM25Index(["a b", "b c"], k1=1.5, b=0.75)
    idf = math.log(1 + (2 - 1 + 0.5) / (1 + 0.5))
    assert index.scores("a")[0] == pytest.approx(idf * 2.5 / (1 + 1.5))
    assert index.idf("a") == pytest.approx(idf)
    assert index.idf("never") == pytest.approx(math.log(1 + 2.5 / 0.5))


def test_no_documents_and_empty_queries():
    assert BM25Index([]).scores("x") == []
    assert BM25Index(["", "a"]).scores("") == [0.0, 0.0]
