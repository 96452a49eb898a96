"""What no tool may reach, whatever roots the policy opens: the kernel's views of the host, the
host's password and key files, and the service's own files (its database, its config, the folder
that holds every workstream's folder). The jail hides them; the file tools refuse them."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from sqlalchemy.engine import make_url

from app.settings import Settings

KERNEL_VIEWS = ("/proc", "/sys")  # the jail mounts a fresh /proc of its own PID namespace instead
HOST_SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
)
SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal")


def service_paths(settings: Settings) -> tuple[str, ...]:
    """The service's own files: the SQLite database (with its journal files), the config file,
    and the data root (a workstream's own folder inside it is let through by the caller)."""
    paths = [settings.config_file, settings.sandbox.data_root]
    database = database_file(settings.database_url)
    if database is not None:
        paths.extend(database + suffix for suffix in SQLITE_COMPANIONS)
    return tuple(os.path.realpath(p) for p in paths)


def database_file(url: str) -> str | None:
    """The SQLite database's file, or None for a server database (or SQLite in memory)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return os.path.abspath(parsed.database)


def never_reachable(settings: Settings) -> tuple[str, ...]:
    """Every path refused to the tools, whatever the roots (see the module's docstring)."""
    return KERNEL_VIEWS + HOST_SECRETS + service_paths(settings)


def is_within(path: str, root: str) -> bool:
    """Whether `path` is `root` or inside it; both already resolved (realpath)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class Roots:
    """The policy's paths, resolved: what may be read besides the folder, and what never."""

    read_only: tuple[str, ...]
    never: tuple[str, ...]
    data_root: str
    shown_read_only: tuple[str, ...] = ()  # as configured, those that exist: for error texts

    @classmethod
    def from_settings(cls, settings: Settings) -> Roots:
        configured = settings.sandbox.read_only_roots
        return cls(
            read_only=tuple(os.path.realpath(root) for root in configured),
            never=tuple(os.path.realpath(path) for path in never_reachable(settings)),
            data_root=os.path.realpath(settings.sandbox.data_root),
            shown_read_only=tuple(root for root in configured if os.path.exists(root)),
        )


@functools.cache
def process_roots() -> Roots:
    """The roots of this process's own settings (a worker's), for a context that brings none."""
    return Roots.from_settings(Settings.load())
