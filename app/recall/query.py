"""A recall query read as data: words, and "quoted phrases", nothing else.

FTS5 and tsquery both have operators (NEAR, OR, NOT, *, -, ^, :, parentheses, column
filters). None of them survives here: a term keeps only its letters and digits, and each
term is handed to the database as a quoted phrase (FTS5) or through phraseto_tsquery
(PostgreSQL), which read it as text. Every term must match (AND).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.settings import RECALL_MAX_QUERY_CHARS
from app.storage.types import UNSTORABLE  # no query text may carry them

RECALL_MAX_TERMS = 16  # words and phrases of one query; more are refused, not silently dropped

_TERM = re.compile(r'"([^"]*)"|([^\s"]+)')
_WORD = re.compile(r"[^\W_]+")  # letters and digits: what both databases' tokenizers keep


class QueryError(ValueError):
    """The query cannot be searched for (empty of words, too long, too many terms)."""


@dataclass(frozen=True)
class Query:
    terms: tuple[str, ...]  # each a word, or words to find next to each other
    texts: tuple[str, ...]  # the same terms as written, for PostgreSQL's own parser

    def fts5(self) -> str:
        """The FTS5 MATCH expression: every term a double-quoted string (a phrase)."""
        return " ".join(f'"{term}"' for term in self.terms)


def parse(text: str) -> Query:
    if len(text) > RECALL_MAX_QUERY_CHARS:
        raise QueryError(f"the query is {len(text)} characters; at most {RECALL_MAX_QUERY_CHARS}")
    terms: list[str] = []
    texts: list[str] = []
    for phrase, word in _TERM.findall(text):
        written = phrase or word
        term = " ".join(_WORD.findall(written)).lower()
        if term and term not in terms:
            terms.append(term)
            texts.append(UNSTORABLE.sub(" ", written))
    if not terms:
        raise QueryError("the query has no words to look for")
    if len(terms) > RECALL_MAX_TERMS:
        raise QueryError(f"the query has {len(terms)} words or phrases; at most {RECALL_MAX_TERMS}")
    return Query(tuple(terms), tuple(texts))
