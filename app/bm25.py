"""Okapi BM25 ranking of short texts (tool descriptions today; skills and memories later).

An `Index` is built once over `(key, text)` documents and queried with free text;
it knows nothing of what the documents are. Scores are Lucene's form of BM25: idf
log(1 + (N - n + 0.5) / (n + 0.5)), positive even for words most documents share,
times tf / (tf + k1 (1 - b + b dl / avgdl)) (no constant k1 + 1 factor: ranks are the same).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

K1 = 1.5  # how fast repeating a word stops adding to a document's score
B = 0.75  # how much a long document is discounted
TOKEN_SEPARATORS = re.compile(r"[\s_\-./]+")

Key = TypeVar("Key", bound=Hashable)


def tokens(text: str) -> list[str]:
    """Lower-cased words, split on whitespace and `_ - . /` (a tool's `repo.list_issues`
    is found by "list issues")."""
    return [t for t in TOKEN_SEPARATORS.split(text.lower()) if t]


class Index(Generic[Key]):
    """Documents indexed for BM25: an inverted list of (document, term count) per word."""

    def __init__(self, documents: Iterable[tuple[Key, str]], k1: float = K1, b: float = B) -> None:
        self.keys: list[Key] = []
        self._postings: dict[str, list[tuple[int, int]]] = {}
        lengths: list[int] = []
        for number, (key, text) in enumerate(documents):
            words = tokens(text)
            self.keys.append(key)
            lengths.append(len(words))
            for word, count in Counter(words).items():
                self._postings.setdefault(word, []).append((number, count))
        average = (sum(lengths) / len(lengths)) if lengths else 0.0
        # The length part of each document's denominator, computed once.
        self._norms = [k1 * (1 - b + b * n / average) if average else k1 for n in lengths]
        total = len(self.keys)
        self._idf = {
            w: math.log(1 + (total - len(p) + 0.5) / (len(p) + 0.5)) for w, p in self._postings.items()
        }

    def __len__(self) -> int:
        return len(self.keys)

    def scores(self, query: str) -> dict[int, float]:
        """Each matching document's score (by position); each distinct query word counts once."""
        out: dict[int, float] = {}
        for word in dict.fromkeys(tokens(query)):
            idf = self._idf.get(word)
            if idf is None:
                continue
            for number, count in self._postings[word]:
                gain = idf * count / (count + self._norms[number])
                out[number] = out.get(number, 0.0) + gain
        return out

    def search(self, query: str, limit: int) -> list[tuple[Key, float]]:
        """The best `limit` documents with a positive score, best first; ties keep document order."""
        ranked = sorted(self.scores(query).items(), key=lambda item: (-item[1], item[0]))
        return [(self.keys[number], score) for number, score in ranked[: max(limit, 0)] if score > 0]
