"""What a reranker's scores mean: fixed probes of relevant and irrelevant passages, scored by
the endpoint, summarised as the score scale, whether the two groups separate, and a floor.

Each probe's query is scored against every probe's passage: its own passage is the relevant
one, the others (and a passage about nothing in particular) are irrelevant. A served model that
ignores its template, or a weak one, scores the groups into each other: no floor is suggested.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import tomlkit

from app.reranking.client import Reranker

# (query, a passage that answers it); every other passage is off topic for it.
PROBES: tuple[tuple[str, str], ...] = (
    (
        "how do I undo the last git commit but keep my changes",
        "Run `git reset --soft HEAD~1`: the commit is removed and its changes stay staged.",
    ),
    (
        "what temperature does water boil at on a mountain",
        "At altitude the air pressure is lower, so water boils below 100 degrees Celsius; "
        "at 3,000 metres it boils at about 90 degrees.",
    ),
    (
        "python read a csv file into a list of dicts",
        "csv.DictReader reads each row of a CSV file as a dict keyed by the header row: "
        "list(csv.DictReader(open('data.csv'))).",
    ),
    (
        "symptoms of iron deficiency",
        "Iron deficiency commonly causes tiredness, pale skin, shortness of breath and cold hands and feet.",
    ),
    (
        "when did the first person walk on the moon",
        "Neil Armstrong stepped onto the Moon on 20 July 1969 during the Apollo 11 mission.",
    ),
    (
        "postgresql find slow queries",
        "Enable pg_stat_statements and order its view by mean_exec_time to see which queries take longest.",
    ),
)
FILLER = "The committee will meet again next quarter to review the catering arrangements."
PROBABILITY_SCALE = "probabilities (0 to 1)"
OPEN_SCALE = "unbounded (not 0 to 1): not usable as a probability floor"


@dataclass(frozen=True)
class Calibration:
    """The scores of the relevant and of the irrelevant probe pairs."""

    relevant: tuple[float, ...]
    irrelevant: tuple[float, ...]

    @property
    def is_probability(self) -> bool:
        return all(0.0 <= score <= 1.0 for score in (*self.relevant, *self.irrelevant))

    @property
    def separates(self) -> bool:
        """Whether every relevant pair outscores every irrelevant one."""
        return min(self.relevant) > max(self.irrelevant)

    @property
    def floor(self) -> float | None:
        """A threshold between the groups (for a probability scale that separates them)."""
        if not (self.separates and self.is_probability):
            return None
        return round((min(self.relevant) + max(self.irrelevant)) / 2, 3)

    def report(self) -> list[str]:
        lines = [
            f"score scale: {PROBABILITY_SCALE if self.is_probability else OPEN_SCALE}",
            f"relevant pairs ({len(self.relevant)}): {min(self.relevant):.4g} to {max(self.relevant):.4g}",
            f"irrelevant pairs ({len(self.irrelevant)}): "
            f"{min(self.irrelevant):.4g} to {max(self.irrelevant):.4g}",
        ]
        if not self.separates:
            lines.append(
                "no clean separation: an irrelevant passage scored at least as high as a relevant one "
                "(is the model's chat template applied, or rerank_instruction set?)"
            )
        elif self.floor is None:
            lines.append("the groups separate, but the scores are not probabilities: no floor suggested")
        else:
            lines.append(f"the groups separate; suggested rerank_bm25_threshold = {self.floor}")
        return lines


def calibrate(reranker: Reranker) -> Calibration:
    """Probe the endpoint (one request per probe query); `RerankError` when it fails."""
    passages = [passage for _, passage in PROBES] + [FILLER]
    relevant: list[float] = []
    irrelevant: list[float] = []
    for number, (query, _) in enumerate(PROBES):
        scores = reranker.scores(query, passages)
        relevant.append(scores[number])
        irrelevant.extend(score for index, score in enumerate(scores) if index != number)
    return Calibration(tuple(relevant), tuple(irrelevant))


def write_threshold(path: Path, floor: float) -> None:
    """Set `[tools] rerank_bm25_threshold` in the config file, keeping the rest of it (its
    comments and order) as the operator wrote it."""
    document = tomlkit.parse(path.read_text()) if path.is_file() else tomlkit.document()
    tools = document.get("tools")
    if tools is None:
        tools = tomlkit.table()
        document["tools"] = tools
    tools["rerank_bm25_threshold"] = floor
    path.write_text(tomlkit.dumps(document))
