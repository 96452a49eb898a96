"""Redacting tool output: whole (the file tools' results) or as it arrives in pieces (bash's
streams, where a secret split across two reads is still redacted whole)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from app.tools.commands.environment import redact, secret_values, service_secrets
from app.tools.core import guard

if TYPE_CHECKING:
    from app.tools.core.base import ToolContext


def redact_output(text: str, ctx: ToolContext) -> str:
    """`text` with every secret bash's output loses lost here too: the secret variables of the
    service's environment, the passwords in its URLs, and the keys it holds (service_secrets)."""
    return redact(text, secret_values(os.environ, service_secrets(ctx)))


class StreamRedactor:
    """Redacts one stream piece by piece, holding back only what a secret could still begin in.

    Released text can no longer change: a secret that starts in it would have to end in it, so it
    was redacted already. That is true up to the last newline when no secret holds a newline (an
    occurrence cannot cross one), and up to the last `len(longest secret) - 1` characters always;
    so a line goes out as soon as it ends, and a long unfinished line goes out all but its tail.

    With `shapes`, credentials of well-known shapes go too (app/tools/core/guard.py), so that the
    live stream shows what the model will read: a long unfinished line is then never cut inside a
    run of key characters, and a private key block is held from its first line to its last (up to
    guard.MAX_KEY_BLOCK characters), to be redacted whole.
    """

    def __init__(
        self, secrets: Iterable[str], *, shapes: bool = False, counts: Counter[str] | None = None
    ) -> None:
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._hold = len(self._secrets[0]) - 1 if self._secrets else 0
        self._by_line = not any("\n" in s for s in self._secrets)
        self._shapes = shapes
        self._counts = counts if counts is not None else Counter()  # what shapes redacted, by kind
        if shapes:
            self._hold = max(self._hold, SHAPE_HOLD)
        self._pending = ""

    def feed(self, text: str) -> str:
        """The redacted text that is now safe to pass on (may be empty)."""
        # The pending part is at most `_hold` characters, so each piece is scanned about once.
        text = redact(self._pending + text, self._secrets)
        cut = len(text) - self._hold
        if self._by_line:
            cut = max(cut, text.rfind("\n") + 1)
        cut = max(cut, 0)
        if self._shapes:
            cut = _shape_cut(text, cut)
        self._pending = text[cut:]
        return self._shaped(text[:cut])

    def end(self) -> str:
        """The stream is over: what was held back, redacted."""
        text, self._pending = self._pending, ""
        return self._shaped(redact(text, self._secrets))

    def _shaped(self, text: str) -> str:
        if not self._shapes or not text:
            return text
        text, counts = guard.redact_shapes(text)
        self._counts.update(counts)
        return text


# What a stream redactor with shapes holds of a long unfinished line: enough for any one key.
SHAPE_HOLD = 1024
_KEY_CHAR = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _shape_cut(text: str, cut: int) -> int:
    """`cut` moved back so that released text ends neither inside a run of key characters (a key
    the stream has not finished) nor inside a private key block whose end it would not hold."""
    floor = max(cut - SHAPE_HOLD, 0)
    while cut > floor and cut < len(text) and text[cut - 1] in _KEY_CHAR and text[cut] in _KEY_CHAR:
        cut -= 1
    for start in guard.KEY_BLOCK_START.finditer(text, 0, cut):
        ended = guard.KEY_BLOCK_END.search(text, start.end(), cut) is not None
        if not ended and len(text) - start.start() < guard.MAX_KEY_BLOCK:
            return start.start()
    return cut
