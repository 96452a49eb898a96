"""Okapi BM25 ranking of short texts: tool descriptions (tool search), skills, memories.

An `Index` is built once over `(key, text)` documents and queried with free text;
it knows nothing of what the documents are. Scores are Lucene's form of BM25: idf
log(1 + (N - n + 0.5) / (n + 0.5)), positive even for words most documents share,
times tf / (tf + k1 (1 - b + b dl / avgdl)) (no constant k1 + 1 factor: ranks are the same).
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

K1 = 1.5  # how fast repeating a word stops adding to a document's score
B = 0.75  # how much a long document is discounted
# `_ - . /` become spaces, then the text splits on whitespace (as str.split sees it).
TOKEN_SEPARATORS = str.maketrans("_-./", "    ")

Key = TypeVar("Key", bound=Hashable)
_PUNCTUATION = re.compile(r"[^\w\s]+")


def tokens(text: str) -> list[str]:
    """Lower-cased words, split on whitespace and `_ - . /` (a tool's `repo.list_issues`
    is found by "list issues")."""
    return text.lower().translate(TOKEN_SEPARATORS).split()


def without_punctuation(text: str) -> str:
    """Prose made into words for `tokens` ("release?" and "release" are one word)."""
    return _PUNCTUATION.sub(" ", text)


class Index(Generic[Key]):
    """Documents indexed for BM25: per word, each document that has it and its weight there."""

    def __init__(self, documents: Iterable[tuple[Key, str]], k1: float = K1, b: float = B) -> None:
        self.keys: list[Key] = []
        counted: list[dict[str, int]] = []
        lengths: list[int] = []
        for key, text in documents:
            words = tokens(text)
            counts: dict[str, int] = {}
            for word in words:
                counts[word] = counts.get(word, 0) + 1
            self.keys.append(key)
            counted.append(counts)
            lengths.append(len(words))
        self._postings, self._idf = _weighted_postings(counted, lengths, k1, b)
        self._unseen_idf = math.log(1 + (len(self.keys) + 0.5) / 0.5)

    def __len__(self) -> int:
        return len(self.keys)

    def idf(self, word: str) -> float:
        """How much finding `word` says (a word no document has: the most)."""
        return self._idf.get(word, self._unseen_idf)

    def scores(self, query: str) -> dict[int, float]:
        """Each matching document's score (by position); each distinct query word counts once."""
        out: dict[int, float] = {}
        for word in dict.fromkeys(tokens(query)):
            for number, weight in self._postings.get(word, ()):
                out[number] = out.get(number, 0.0) + weight
        return out

    def search(self, query: str, limit: int) -> list[tuple[Key, float]]:
        """The best `limit` documents with a positive score, best first; ties keep document order."""
        if limit <= 0:
            return []
        best = heapq.nsmallest(limit, self.scores(query).items(), key=lambda item: (-item[1], item[0]))
        return [(self.keys[number], score) for number, score in best if score > 0]


def _weighted_postings(
    counted: list[dict[str, int]], lengths: list[int], k1: float, b: float
) -> tuple[dict[str, list[tuple[int, float]]], dict[str, float]]:
    """Per word, (document, idf * tf / (tf + k1 (1 - b + b dl / avgdl))): a query only adds them up."""
    total = len(lengths)
    average = (sum(lengths) / total) if total else 0.0
    norms = [k1 * (1 - b + b * n / average) if average else k1 for n in lengths]
    frequency: dict[str, int] = {}
    for counts in counted:
        for word in counts:
            frequency[word] = frequency.get(word, 0) + 1
    idf = {w: math.log(1 + (total - n + 0.5) / (n + 0.5)) for w, n in frequency.items()}
    postings: dict[str, list[tuple[int, float]]] = {w: [] for w in frequency}
    for number, counts in enumerate(counted):
        norm = norms[number]
        for word, tf in counts.items():
            postings[word].append((number, idf[word] * tf / (tf + norm)))
    return postings, idf
