"""The record of a running `turnstone-jobs run` (where its service is), and what the commands
run beside it read from it: which database the service uses, which Redis it runs on."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy.engine import make_url

SUPERVISOR = Path(__file__).with_name("supervisor.py")  # what a live run's process runs (app/cli.py)


@dataclass(frozen=True)
class RunRecord:
    pid: int
    started_at: float
    folder: str  # where it was started
    database: str  # `database_label` of its DATABASE_URL: no password
    redis_url: str | None  # its private Redis (no password); None when it uses REDIS_URL's
    web_url: str

    def describe(self) -> str:
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.started_at))
        return f"the service started {started} in {self.folder} (pid {self.pid})"


def database_label(url: str, folder: str | None = None) -> str:
    """A database URL as a person compares it: a SQLite file by its absolute path, any other
    with its password hidden."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        name = parsed.database or ""
        if name and name != ":memory:" and not name.startswith("file:"):
            return str(Path(folder or os.getcwd(), name).resolve())
    return parsed.render_as_string(hide_password=True)


def shown_url(url: str) -> str:
    """A URL as it may be printed: a password in it replaced."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (relative paths from the current folder), else None."""
    parsed = make_url(url)
    name = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or not name or name == ":memory:" or name.startswith("file:"):
        return None
    return Path(name).resolve()


def write(folder: Path, record: RunRecord) -> Path:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"{record.pid}.json"
    path.write_text(json.dumps(asdict(record)))
    return path


def live(folder: Path) -> list[RunRecord]:
    """The runs still running, newest first; a record whose run was killed outright is removed."""
    found = []
    for path in folder.glob("*.json") if folder.is_dir() else []:
        try:
            record = RunRecord(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            continue
        if is_running(record.pid):
            found.append(record)
        else:
            path.unlink(missing_ok=True)
    return sorted(found, key=lambda r: r.started_at, reverse=True)


def is_running(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return str(SUPERVISOR).encode() in cmdline.split(b"\0")
