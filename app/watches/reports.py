"""What a poll decided, and the message a watch ends with (what the model reads)."""

from __future__ import annotations

from dataclasses import dataclass

from app.storage.models import Watch
from app.watches.conditions import PollResult
from app.watches.intervals import describe


@dataclass(frozen=True)
class Verdict:
    fired: bool
    exhausted: bool  # max_polls reached without firing
    polls: int  # counting this one
    error: str | None = None  # stop_on could not be evaluated on this poll, or why it was lost
    lost: bool = False  # this poll never finished; the result is the last one a poll stored


def report(watch: Watch, result: PollResult, verdict: Verdict) -> str:
    """The user message that carries the result, marked as the watch's in its first line."""
    if verdict.fired and watch.stop_on:
        why = f"fired: its condition `{watch.stop_on}` is true"
    elif verdict.fired:
        why = "fired: the command's output changed"
    else:
        why = f"ended without firing: it reached its limit of {watch.max_polls} polls"
    lines = [
        f"[watch {watch.name!r} {why} (poll {verdict.polls}, every {describe(watch.poll_every)})]",
        f"$ {watch.command}",
    ]
    if verdict.lost:
        lines.append(f"({verdict.error}; the exit code and output below are an earlier poll's)")
    lines.append(f"exit code: {result.exit_code}")
    if verdict.error and not verdict.lost:
        lines.append(f"(stop_on could not be evaluated on the last poll: {verdict.error})")
    lines.append("output:")
    lines.append(result.output or "(no output)")
    return "\n".join(lines)
