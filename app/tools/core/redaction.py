"""Redacting tool output: whole (the file tools' results) or as it arrives in pieces (bash's
streams, where a secret split across two reads is still redacted whole)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from app.tools.commands.environment import redact, secret_values, service_secrets

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
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._hold = len(self._secrets[0]) - 1 if self._secrets else 0
        self._by_line = not any("\n" in s for s in self._secrets)
        self._pending = ""

    def feed(self, text: str) -> str:
        """The redacted text that is now safe to pass on (may be empty)."""
        # The pending part is at most `_hold` characters, so each piece is scanned about once.
        text = redact(self._pending + text, self._secrets)
        cut = len(text) - self._hold
        if self._by_line:
            cut = max(cut, text.rfind("\n") + 1)
        cut = max(cut, 0)
        self._pending = text[cut:]
        return text[:cut]

    def end(self) -> str:
        """The stream is over: what was held back, redacted."""
        text, self._pending = self._pending, ""
        return redact(text, self._secrets)
