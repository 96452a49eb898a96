"""Recall queries are words and phrases; every operator of FTS5 and tsquery is only text."""

from __future__ import annotations

import pytest

from app.recall.query import QueryError, parse


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("red kite", ("red", "kite")),
        ('"red kite" field', ("red kite", "field")),
        ('"unclosed kite', ("unclosed", "kite")),
        ("kite* -field NOT x", ("kite", "field", "not", "x")),
        ("NEAR(kite field, 2)", ("near kite", "field", "2")),
        ("body:kite", ("body kite",)),
        ("'; DROP TABLE messages; --", ("drop", "table", "messages")),
        ("web_search foo-bar", ("web search", "foo bar")),
        ("Kite kite KITE", ("kite",)),
        ("a\x00b \ud800c", ("a b", "c")),
    ],
)
def test_terms(text, terms):
    assert parse(text).terms == terms


def test_the_fts5_expression_quotes_every_term():
    assert parse('NEAR "red kite" OR x*').fts5() == '"near" "red kite" "or" "x"'


def test_texts_keep_what_was_written_without_unstorable_characters():
    assert parse("example.com a\x00b").texts == ("example.com", "a b")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "the query has no words to look for"),
        ('"" * - ( )', "the query has no words to look for"),
        ("x" * 1001, "the query is 1001 characters; at most 1000"),
        (" ".join(f"w{n}" for n in range(17)), "the query has 17 words or phrases; at most 16"),
    ],
)
def test_unsearchable_queries(text, error):
    with pytest.raises(QueryError, match=error.replace("(", r"\(")):
        parse(text)
