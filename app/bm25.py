"""BM25 relevance over a handful of short texts (memories, skills): k1 = 1.5, b = 0.75.

Tokens are split on `_ - . /` and whitespace and lower-cased, as tool search does. The
IDF is the non-negative form, log(1 + (N - n + 0.5) / (n + 0.5)), so that a word found in
most of a small collection still counts a little instead of counting against it.
"""

from __future__ import annotations

import math
import re
from collections import Counter

K1 = 1.5
B = 0.75

_SPLIT = re.compile(r"[\s_\-./]+")


_PUNCTUATION = re.compile(r"[^\w\s]+")


def tokenize(text: str) -> list[str]:
    return [token for token in _SPLIT.split(text.lower()) if token]


def without_punctuation(text: str) -> str:
    """Prose made into words for `tokenize` ("release?" and "release" are one word)."""
    return _PUNCTUATION.sub(" ", text)


class BM25Index:
    """Scores every document against a query; documents are given once, queried often."""

    def __init__(self, docs: list[str], k1: float = K1, b: float = B) -> None:
        self.k1 = k1
        self.b = b
        self._docs = [Counter(tokenize(doc)) for doc in docs]
        self._lengths = [sum(counts.values()) for counts in self._docs]
        total = sum(self._lengths)
        self._avgdl = total / len(docs) if docs and total else 1.0
        frequency: Counter[str] = Counter()
        for counts in self._docs:
            frequency.update(counts.keys())
        n = len(docs)
        self._idf = {term: math.log(1 + (n - df + 0.5) / (df + 0.5)) for term, df in frequency.items()}
        self._unseen_idf = math.log(1 + (n + 0.5) / 0.5)

    def idf(self, term: str) -> float:
        """How much finding `term` says (a term no document has: the most)."""
        return self._idf.get(term, self._unseen_idf)

    def scores(self, query: str) -> list[float]:
        terms = set(tokenize(query))
        return [
            self._score(terms, counts, length)
            for counts, length in zip(self._docs, self._lengths, strict=True)
        ]

    def _score(self, terms: set[str], counts: Counter[str], length: int) -> float:
        score = 0.0
        norm = self.k1 * (1 - self.b + self.b * length / self._avgdl)
        for term in terms:
            f = counts.get(term, 0)
            if f:
                score += self._idf[term] * f * (self.k1 + 1) / (f + norm)
        return score
