"""Background shells (bash `run_in_background`): a command started in the workstream's sandbox
that outlives its call and its turn, its output stored as it comes.

The worker that starts a shell runs it on a thread of its own: the process in its own group (in
the jail, as bash's, with the watchdog that stops it should the worker die), its output (stdout
and stderr together) read, redacted and appended to `shell_chunks` every FLUSH_SECONDS, the row's
heartbeat renewed, and a stop asked in the database obeyed: `kill_shell` (from any worker), the
workstream's close or delete, or `tools.shell_idle_seconds` without a `bash_output`. A shell whose
heartbeat stops (its worker died: bwrap's --die-with-parent and the watchdog stop it too) is
reported `lost`, with its output so far (`reconcile`).
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import os
import selectors
import signal
import subprocess
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, update
from sqlmodel import col, select

from app.errors import BadRequestError, check_text
from app.sandbox.enforcement import SandboxUnavailableError
from app.settings import MAX_ID_CHARS
from app.storage.database import Database
from app.storage.models import BackgroundShell, ShellChunk, ShellStatus, utcnow
from app.tools.commands import scripts
from app.tools.commands.environment import redact, secret_values, service_secrets
from app.tools.commands.process_guard import GroupGuard
from app.tools.core.base import ToolContext

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.5  # output stored, heartbeat renewed and a stop looked for this often
LOST_AFTER_SECONDS = 15  # a running shell whose heartbeat is older: its worker is gone
STORED_CHARS = 4 * 1024 * 1024  # output kept per shell; past it, counted and dropped
START_SECONDS = 30  # the most a start may take (a jail, its proxy)
TERM_GRACE_SECONDS = 0.5
READ_CHUNK = 64 * 1024
LOST_NOTE = "its worker stopped, and the shell was stopped with it; the output it printed until then is kept"


class ShellError(Exception):
    """A shell that cannot be started, or is not this workstream's; the text is the result."""


def start(ctx: ToolContext, command: str) -> str:
    """Start `command` in the background for ctx's workstream; its shell id. ShellError when the
    workstream already runs `tools.background_shells` of them, or it could not start."""
    db = _db(ctx)
    reconcile(db, ctx.ws_id)
    limit = ctx.settings.background_shells
    with db.session() as s:
        running = s.exec(
            select(func.count())
            .select_from(BackgroundShell)
            .where(BackgroundShell.ws_id == ctx.ws_id, BackgroundShell.status == ShellStatus.RUNNING)
        ).one()
        if running >= limit:
            raise ShellError(
                f"Error: {running} background shells already run here (at most {limit}): kill_shell one"
            )
        shell_id = uuid.uuid4().hex[:16]
        s.add(BackgroundShell(id=shell_id, ws_id=ctx.ws_id, command=command))
    started = threading.Event()
    failure: list[str] = []
    runner = threading.Thread(
        target=_run,
        args=(ctx, db, shell_id, command, started, failure),
        name=f"shell-{shell_id}",
        daemon=True,
    )
    runner.start()
    if not started.wait(START_SECONDS) or failure:
        why = failure[0] if failure else "it did not start in time"
        _end(db, shell_id, ShellStatus.KILLED, None, why)
        raise ShellError(f"Error: the background shell could not start: {why}")
    return shell_id


def _db(ctx: ToolContext) -> Database:
    if ctx.db is None:
        raise ShellError("Error: background shells need the service's database (none here)")
    return ctx.db


def _run(
    ctx: ToolContext, db: Database, shell_id: str, command: str, started: threading.Event, failure: list[str]
) -> None:
    from app.tools.bash import command_argv

    try:
        jailing = ctx.sandbox.jail_for(ctx.network) if ctx.sandbox is not None else contextlib.nullcontext()
        with jailing as jail, GroupGuard(TERM_GRACE_SECONDS, leftovers=scripts.folder()) as guard:
            script = scripts.write((jail.limits() if jail else "") + "set -o pipefail\n" + command + "\n")
            environ = dict(os.environ)
            known = service_secrets(ctx)
            argv, env, cap = command_argv(script, ctx, jail, environ, known)
            try:
                proc = subprocess.Popen(
                    argv,
                    cwd=ctx.working_dir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
                guard.watch(proc.pid)
                started.set()
                status, note = _follow(
                    db, shell_id, proc, secret_values(environ, known), ctx.settings.shell_idle_seconds
                )
                guard.release()
                _end(db, shell_id, status, proc.wait(), note)
            finally:
                os.unlink(script)
                if cap is not None:
                    cap.remove()
    except (OSError, SandboxUnavailableError) as exc:
        failure.append(str(exc))
        started.set()
    except Exception:  # the thread's boundary: the row says it ended, the worker goes on
        log.exception("background shell %s failed", shell_id)
        _end(db, shell_id, ShellStatus.KILLED, None, "the service failed while running it")
        started.set()


def _follow(
    db: Database, shell_id: str, proc: subprocess.Popen, secrets: list[str], idle_seconds: int
) -> tuple[ShellStatus, str | None]:
    """Store its output until it ends, or stop it when asked; how it ended and why."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending: list[str] = []
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        next_flush = time.monotonic() + FLUSH_SECONDS
        open_pipe = True
        while open_pipe:
            for _key, _events in selector.select(FLUSH_SECONDS):
                data = b""
                with contextlib.suppress(BlockingIOError):
                    data = os.read(fd, READ_CHUNK)
                if not data:
                    open_pipe = False
                    break
                pending.append(decoder.decode(data))
            if time.monotonic() >= next_flush or not open_pipe:
                next_flush = time.monotonic() + FLUSH_SECONDS
                why = _flush(db, shell_id, redact("".join(pending), secrets), idle_seconds)
                pending.clear()
                if why is not None:
                    _stop(proc)
                    _flush(db, shell_id, redact(decoder.decode(b"", final=True), secrets), 0)
                    return ShellStatus.KILLED, why
    _flush(db, shell_id, redact(decoder.decode(b"", final=True), secrets), 0)
    return ShellStatus.EXITED, None


def _flush(db: Database, shell_id: str, text: str, idle_seconds: int) -> str | None:
    """Store `text`, renew the heartbeat; why the shell must stop now, or None."""
    with db.session() as s:
        row = s.get(BackgroundShell, shell_id, with_for_update=True)
        if row is None:
            return "its workstream was deleted"
        if text:
            room = max(0, STORED_CHARS - row.stored_chars)
            kept = text[:room]
            if kept:
                s.add(ShellChunk(shell_id=shell_id, text=kept))
            row.stored_chars += len(kept)
            row.dropped_chars += len(text) - len(kept)
        row.heartbeat_at = utcnow()
        s.add(row)
        if row.kill_requested:
            return row.note or "stopped by kill_shell"
        idle = utcnow() - _aware(row.last_read_at)
        if idle_seconds > 0 and idle > timedelta(seconds=idle_seconds):
            return f"stopped after {idle_seconds} s without bash_output"
    return None


def _stop(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, TERM_GRACE_SECONDS), (signal.SIGKILL, 0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait or 5)
            return


def _end(db: Database, shell_id: str, status: ShellStatus, exit_code: int | None, note: str | None) -> None:
    with db.session() as s:
        s.exec(
            update(BackgroundShell)
            .where(col(BackgroundShell.id) == shell_id, col(BackgroundShell.status) == ShellStatus.RUNNING)
            .values(status=status, exit_code=exit_code, note=note, ended_at=utcnow())
        )


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# -- what any worker (or the web) may do --------------------------------------------------------


def reconcile(db: Database, ws_id: str | None = None) -> int:
    """Mark `lost` the running shells (of a workstream, or all) whose heartbeat stopped."""
    stale = utcnow() - timedelta(seconds=LOST_AFTER_SECONDS)
    query = update(BackgroundShell).where(
        col(BackgroundShell.status) == ShellStatus.RUNNING, col(BackgroundShell.heartbeat_at) < stale
    )
    if ws_id is not None:
        query = query.where(col(BackgroundShell.ws_id) == ws_id)
    with db.session() as s:
        done = s.exec(query.values(status=ShellStatus.LOST, note=LOST_NOTE, ended_at=utcnow()))
    return int(done.rowcount or 0)


def request_stop(
    db: Database, ws_id: str, shell_id: str | None = None, why: str = "stopped by kill_shell"
) -> list[str]:
    """Ask the running shells of the workstream (or one) to stop; the ids asked. The worker
    running each stops it within FLUSH_SECONDS."""
    query = select(BackgroundShell.id).where(
        BackgroundShell.ws_id == ws_id, BackgroundShell.status == ShellStatus.RUNNING
    )
    if shell_id is not None:
        query = query.where(BackgroundShell.id == shell_id)
    with db.session() as s:
        ids = list(s.exec(query).all())
        if ids:
            s.exec(
                update(BackgroundShell)
                .where(col(BackgroundShell.id).in_(ids))
                .values(kill_requested=True, note=why)
            )
    return ids


def shell_id_of(args: dict) -> str | None:
    """The `shell_id` argument of bash_output and kill_shell, when it can be one."""
    value = args.get("shell_id")
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        check_text("shell_id", value, MAX_ID_CHARS)
    except BadRequestError:
        return None
    return value


def shell(db: Database, ws_id: str, shell_id: str) -> BackgroundShell:
    reconcile(db, ws_id)
    with db.reader() as s:
        row = s.get(BackgroundShell, shell_id)
    if row is None or row.ws_id != ws_id:
        raise ShellError(f"Error: no background shell {shell_id} here")
    return row


def read_new(db: Database, ws_id: str, shell_id: str) -> tuple[BackgroundShell, str]:
    """What the shell printed since the last read (marked read now), and the shell."""
    row = shell(db, ws_id, shell_id)
    with db.session() as s:
        chunks = s.exec(
            select(ShellChunk)
            .where(ShellChunk.shell_id == shell_id, col(ShellChunk.id) > row.read_through)
            .order_by(col(ShellChunk.id))
        ).all()
        through = chunks[-1].id if chunks else row.read_through
        s.exec(
            update(BackgroundShell)
            .where(col(BackgroundShell.id) == shell_id)
            .values(read_through=through, last_read_at=utcnow())
        )
    return row, "".join(c.text for c in chunks)


def listing(db: Database, ws_id: str, tail_chars: int = 2000) -> list[dict]:
    """The workstream's shells, newest first, each with the tail of its output (the web client)."""
    reconcile(db, ws_id)
    with db.reader() as s:
        rows = s.exec(
            select(BackgroundShell)
            .where(BackgroundShell.ws_id == ws_id)
            .order_by(col(BackgroundShell.started_at).desc())
        ).all()
        out = []
        for row in rows:
            tail = s.exec(
                select(ShellChunk.text)
                .where(ShellChunk.shell_id == row.id)
                .order_by(col(ShellChunk.id).desc())
                .limit(20)
            ).all()
            out.append({**describe(row), "tail": "".join(reversed(tail))[-tail_chars:]})
    return out


def describe(row: BackgroundShell) -> dict:
    return {
        "shell_id": row.id,
        "command": row.command,
        "status": row.status,
        "exit_code": row.exit_code,
        "note": row.note,
        "started_at": _aware(row.started_at).isoformat(),
        "ended_at": _aware(row.ended_at).isoformat() if row.ended_at else None,
        "dropped_chars": row.dropped_chars,
    }
