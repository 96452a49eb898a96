"""What a run's caller may ask of it: its policy (what runs without a person), a timeout, its
own metadata; the limits on each."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

MAX_POLICY_TOOLS = 200  # tool names a policy may list
MAX_TIMEOUT_SECONDS = 24 * 3600  # a run ends within a day, whatever it asks
MAX_METADATA_BYTES = 16 * 1024  # the caller's metadata, as compact JSON
POLICY_KEYS = frozenset({"tools", "auto_approve", "deny_unapproved"})


@dataclass(frozen=True)
class Policy:
    """What runs without a person: the calls of `tools` (by name), or every call
    (`auto_approve`); a call that still needs a person fails the run when `deny_unapproved`,
    else it waits for a decision."""

    tools: tuple[str, ...] = ()
    auto_approve: bool = False
    deny_unapproved: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tools": list(self.tools)}

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> Policy:
        return cls(
            tools=tuple(stored.get("tools") or ()),
            auto_approve=bool(stored.get("auto_approve")),
            deny_unapproved=bool(stored.get("deny_unapproved")),
        )

    def approves(self, tool_name: str) -> bool:
        return self.auto_approve or tool_name in self.tools

    @property
    def is_empty(self) -> bool:
        return not (self.tools or self.auto_approve or self.deny_unapproved)


# A run's turn is sent with this key's prefix (status.sent_key): a step knows a run's turn by it.
RUN_KEY_PREFIX = "run:"


def is_runs_key(idempotency_key: str | None) -> bool:
    """Whether a turn sent with `idempotency_key` is a run's (no statement needed to know)."""
    return (idempotency_key or "").startswith(RUN_KEY_PREFIX)
