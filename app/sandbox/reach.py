"""What no tool may reach, whatever roots the policy opens: the kernel's views of the host, the
host's password and key files, and the service's own files (its database, its config, the folder
that holds every workstream's folder). The jail hides them; the file tools refuse them."""

from __future__ import annotations

import os

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
