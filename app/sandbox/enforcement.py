"""Whether commands run jailed: bwrap found means always; without it, `mode = "auto"` lets them
run unjailed only while the operator is the service's only user, and `required` refuses them.

`Sandbox` is the runtime's (one a process): `jail()` answers for the command about to start,
`status()` for /health and the start-up warning.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sqlmodel import select

from app.sandbox.egress import EgressProxy
from app.sandbox.jail import Egress, Jail
from app.sandbox.reach import never_reachable
from app.sandbox.relay import DEFAULT_PORT as RELAY_PORT
from app.sandbox.relay import egress_for
from app.settings import Settings
from app.storage.models import User

if TYPE_CHECKING:
    from app.storage.database import Database

log = logging.getLogger(__name__)

PACKAGE = "bubblewrap"
INSTALL_HINT = f"apt-get install {PACKAGE}"
PROBE_SECONDS = 10
PROBE_ARGS = (
    "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
    "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "true",
)  # fmt: skip


SYSTEM_PYTHON = "/usr/bin/python3"


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
        # (tests set one; commands of a `proxy` workstream get a proxy of their own: `jail_for`).
        self.egress: Egress | None = None
        self._probed: dict[str, str | None] = {}  # program -> why it cannot jail here (None: it can)

    def find_bwrap(self) -> str | None:
        return shutil.which(self.settings.sandbox.bwrap)

    @contextmanager
    def jail_for(self, network: str) -> Iterator[Jail | None]:
        """`jail()` for one command of a workstream whose network is `network`: for `proxy`, with
        an egress proxy of its own (the workstream's policy) for as long as the command runs."""
        jail = self.jail()
        if jail is None or network != "proxy" or jail.egress is not None:
            yield jail
            return
        with EgressProxy(self.settings) as proxy:
            relay = egress_for(proxy.socket_path, RELAY_PORT, relay_python())
            yield replace(jail, egress=Egress(proxy.socket_path, relay.env, relay.argv_prefix))

    def jail(self) -> Jail | None:
        """The jail for the next command; None: it runs unjailed (see the module's docstring).
        Raises SandboxUnavailableError when it may run neither way."""
        program = self.find_bwrap()
        if program is not None and self._failure(program) is None:
            return Jail(self.settings.sandbox, program, self.hidden, self.egress)
        status = self._without(program)
        if status.mode == "auto" and not self._has_users():
            return None
        raise SandboxUnavailableError(
            f"Error: commands must run in the sandbox, and it cannot start here ({status.reason}); "
            f"an administrator installs it with `{INSTALL_HINT}` (docs/security.md)"
        )

    def status(self) -> Status:
        program = self.find_bwrap()
        if program is not None and self._failure(program) is None:
            return Status(True, self.settings.sandbox.mode, program, "every command runs in bubblewrap")
        return self._without(program)

    def _without(self, program: str | None) -> Status:
        mode = self.settings.sandbox.mode
        if program is None:
            cause = f"{PACKAGE} is missing ({self.settings.sandbox.bwrap!r} is not on PATH)"
        else:
            cause = f"{program} cannot create its namespaces here: {self._failure(program)}"
        if mode == "required":
            return Status(False, mode, program, f'{cause}; mode is "required": commands are refused')
        if self._has_users():
            return Status(False, mode, program, f"{cause}; the service has users: commands are refused")
        return Status(
            False, mode, program, f"{cause}; commands run UNJAILED while the operator is the only user"
        )

    def _failure(self, program: str) -> str | None:
        """Why `program` cannot jail a command on this host (a container that forbids user
        namespaces, say), or None; asked once a process."""
        if program not in self._probed:
            self._probed[program] = probe(program)
        return self._probed[program]

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


def probe(program: str) -> str | None:
    """Start an empty jail with the namespaces every command gets: None if it ran, else bwrap's
    own words for what failed."""
    argv = [program, *PROBE_ARGS]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_SECONDS, env={})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    if done.returncode == 0:
        return None
    return (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1][:300]


def relay_python() -> str:
    """The interpreter that runs the relay inside the jail: the system's, which the default
    read-only roots expose, else this one's."""
    return SYSTEM_PYTHON if os.path.exists(SYSTEM_PYTHON) else sys.executable
