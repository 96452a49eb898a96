"""Whether commands run jailed: bwrap found means always; without it, `mode = "auto"` lets them
run unjailed only while the operator is the service's only user, and `required` refuses them.

`Sandbox` is the runtime's (one a process): `jail()` answers for the command about to start,
`status()` for /health and the start-up warning.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlmodel import select

from app.sandbox.jail import Egress, Jail
from app.sandbox.reach import never_reachable
from app.settings import Settings
from app.storage.models import User

if TYPE_CHECKING:
    from app.storage.database import Database

log = logging.getLogger(__name__)

PACKAGE = "bubblewrap"
INSTALL_HINT = f"apt-get install {PACKAGE}"


class SandboxUnavailableError(RuntimeError):
    """A command must run jailed and cannot: its message is the tool's result."""


@dataclass(frozen=True)
class Status:
    enforced: bool
    mode: str
    bwrap: str | None  # the program's path, None where it was not found
    reason: str

    def as_json(self) -> dict[str, Any]:
        return {"enforced": self.enforced, "mode": self.mode, "bwrap": self.bwrap, "reason": self.reason}


class Sandbox:
    """The jail policy of one process, with the database it asks whether users exist."""

    def __init__(self, settings: Settings, db: Database | None) -> None:
        self.settings = settings
        self.db = db
        self.hidden = never_reachable(settings)
        # The way out of a `proxy` network, set by whoever runs the egress proxy in this process;
        # until then a `proxy` command has no network at all.
        self.egress: Egress | None = None

    def find_bwrap(self) -> str | None:
        return shutil.which(self.settings.sandbox.bwrap)

    def jail(self) -> Jail | None:
        """The jail for the next command; None: it runs unjailed (see the module's docstring).
        Raises SandboxUnavailableError when it may run neither way."""
        program = self.find_bwrap()
        if program is not None:
            return Jail(self.settings.sandbox, program, self.hidden, self.egress)
        status = self._without(program)
        if not status.enforced and status.mode == "auto" and not self._has_users():
            return None
        raise SandboxUnavailableError(
            f"Error: commands must run in the sandbox, and its program "
            f"{self.settings.sandbox.bwrap!r} is not installed ({status.reason}); "
            f"an administrator installs it with `{INSTALL_HINT}`"
        )

    def status(self) -> Status:
        program = self.find_bwrap()
        if program is not None:
            return Status(True, self.settings.sandbox.mode, program, "every command runs in bubblewrap")
        return self._without(program)

    def _without(self, program: str | None) -> Status:
        mode = self.settings.sandbox.mode
        if mode == "required":
            return Status(
                False, mode, program, f'{PACKAGE} is missing and mode is "required": commands are refused'
            )
        if self._has_users():
            return Status(
                False, mode, program, f"{PACKAGE} is missing and the service has users: commands are refused"
            )
        return Status(
            False,
            mode,
            program,
            f"{PACKAGE} is missing: commands run UNJAILED while the operator is the only user",
        )

    def _has_users(self) -> bool:
        if self.db is None:
            return False
        with self.db.reader() as s:
            return s.exec(select(User.id).limit(1)).first() is not None

    def warn_if_unjailed(self) -> Status:
        """At start: say loudly when commands will not be jailed."""
        status = self.status()
        if not status.enforced:
            log.warning("SANDBOX NOT ENFORCED: %s (install it: %s)", status.reason, INSTALL_HINT)
        return status
