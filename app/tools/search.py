"""The search tool: lines matching an extended regular expression, by ripgrep or grep.

ripgrep is used when it is installed (on PATH or beside this Python), otherwise
`grep -rnIE`; both are told to skip the same folders and to stop at the same
per-file cap, and their output is parsed into one format, `path:line: text`.
Neither follows a link met on the way; a match in a file the file tools may not
read (app.tools.files.reach) is left out, and what is shown is redacted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.tools.core.redaction import redact_output
from app.tools.files import reach
from app.tools.files.paths import FileToolError, path_argument

TOOL = "search"
SKIPPED_DIRS = (
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    ".venv",
    "venv",
    "build",
    "dist",
    "__pycache__",
    "target",
)
MAX_MATCHES_PER_FILE = 100
MAX_MATCHES = 1000  # in all; the search is stopped there
MAX_LINE_CHARS = 300  # a matching line is cut past this many characters
POLL_SECONDS = 0.05
NO_MATCHES = "(no matches)"


def locate_ripgrep() -> str | None:
    """The `rg` to use, or None: ripgrep on PATH, or the one pip put beside this interpreter."""
    found = shutil.which("rg")
    if found:
        return found
    beside = os.path.join(os.path.dirname(sys.executable), "rg")
    return beside if os.access(beside, os.X_OK) else None


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    try:
        query = args.get("query")
        if not isinstance(query, str) or not query:
            raise FileToolError("Error: search needs a non-empty 'query' (a regular expression)")
        if "\n" in query or "\r" in query:
            # grep would take each line as a separate pattern, ripgrep refuses it: neither is asked for.
            raise FileToolError(
                "Error: search matches one line at a time, so 'query' cannot contain a line break; "
                "search for one of its lines, or use a|b to find either"
            )
        path = path_argument(args, "path", TOOL, required=False)
        reach.check(path or ".", ctx, reach.READ)
    except FileToolError as exc:
        return Preparation(dict(args), TOOL, needs_approval=False, error=str(exc))
    clean = {"query": query, "path": path or "."}
    return Preparation(clean, f"{TOOL} /{query}/ in {clean['path']}", needs_approval=False)


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    return run(args, ctx, locate_ripgrep())


def run(args: dict[str, Any], ctx: ToolContext, ripgrep: str | None) -> ToolOutcome:
    """The search with ripgrep at `ripgrep`, or with grep when it is None."""
    shown = args.get("path") or "."
    try:
        target = reach.check(shown, ctx, reach.READ)  # again: a link may have moved since prepare
    except FileToolError as exc:
        return ToolOutcome(str(exc), is_error=True)
    if not os.path.exists(target):
        return ToolOutcome(f"Error: no such file or folder: {shown}", is_error=True)
    if os.path.isdir(target):
        cwd, operand = target, "."
    elif not os.path.isfile(target):
        # Named on the command line, a FIFO is read (and waited on) by both programs.
        return ToolOutcome(f"Error: {shown} is not a regular file or a folder", is_error=True)
    else:
        cwd, operand = os.path.dirname(target), os.path.basename(target)
    argv = _ripgrep_argv(ripgrep, args["query"], operand) if ripgrep else _grep_argv(args["query"], operand)
    found = _collect(argv, cwd, ctx)
    _drop_unreachable(found, cwd, ctx)
    outcome = _outcome(found, cwd, os.path.realpath(ctx.working_dir), "rg" if ripgrep else "grep")
    return ToolOutcome(redact_output(outcome.output, ctx), outcome.is_error)


def _drop_unreachable(found: _Found, cwd: str, ctx: ToolContext) -> None:
    """Leave out matches in files the file tools may not read: reached through a folder swapped
    for a link since the check, one of the never-opened files under a read-only root, a file not
    everyone may read there, a file with other hard links in the workstream's folder."""
    verdicts: dict[str, bool] = {}
    kept = []
    for match in found.matches:
        name = match[0]
        if name not in verdicts:
            verdicts[name] = _is_readable(os.path.join(cwd, name), ctx)
        if verdicts[name]:
            kept.append(match)
    found.dropped = len(found.matches) - len(kept)
    found.matches = kept


def _is_readable(path: str, ctx: ToolContext) -> bool:
    resolved = os.path.realpath(path)
    if reach.refusal(resolved, ctx, reach.READ) is not None:
        return False
    try:
        info = os.stat(resolved)
    except OSError:
        return False
    return reach.file_refusal(info, resolved, path, ctx, reach.READ) is None


def _grep_argv(query: str, operand: str) -> list[str]:
    excludes = [f"--exclude-dir={name}" for name in SKIPPED_DIRS]
    return [
        "grep",
        "-rnHIE",
        "--null",
        f"--max-count={MAX_MATCHES_PER_FILE}",
        *excludes,
        "-e",
        query,
        "--",
        operand,
    ]


def _ripgrep_argv(ripgrep: str, query: str, operand: str) -> list[str]:
    # --hidden and --no-ignore: search what grep would (ignore files are not ours to honour).
    # --no-config: a RIPGREP_CONFIG_PATH in the service's environment must not change the
    # matching (--ignore-case) or the output format this module parses.
    globs = [arg for name in SKIPPED_DIRS for arg in ("--glob", f"!{name}/")]
    return [
        ripgrep,
        "--no-config",
        "--line-number",
        "--with-filename",
        "--no-heading",
        "--null",
        "--color=never",
        "--hidden",
        "--no-ignore",
        f"--max-count={MAX_MATCHES_PER_FILE}",
        *globs,
        "-e",
        query,
        "--",
        operand,
    ]


@dataclass
class _Found:
    matches: list[tuple[str, int, str]] = field(default_factory=list)
    capped: bool = False
    stopped: str | None = None  # "timed out" or "cancelled"
    returncode: int = 0
    stderr: str = ""
    dropped: int = 0  # matches left out: in files the file tools may not read


def _collect(argv: list[str], cwd: str, ctx: ToolContext) -> _Found:
    found = _Found()
    done = threading.Event()
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(
            argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors
        )
        watcher = threading.Thread(target=_watch, args=(proc, ctx, found, done), daemon=True)
        watcher.start()
        try:
            _read(proc.stdout, found)  # type: ignore[arg-type]
            if found.capped:
                proc.kill()
        finally:
            # Only this thread waits on the process: a second waiter could reap it
            # first, and a kill sent then would falsify its exit status.
            found.returncode = proc.wait()
            done.set()
            watcher.join()
        found.stderr = _text_of(errors)
    return found


def _read(stdout: IO[bytes], found: _Found) -> None:
    for raw in stdout:
        name, _nul, rest = raw.rstrip(b"\n").partition(b"\0")
        number, _colon, text = rest.partition(b":")
        if not _nul or not number.isdigit():
            continue  # not a match line (ripgrep's note on a binary file, say)
        line = text.decode("utf-8", "replace").removesuffix("\r")
        found.matches.append((os.fsdecode(name), int(number), line))
        if len(found.matches) >= MAX_MATCHES:
            found.capped = True
            return


def _watch(proc: subprocess.Popen, ctx: ToolContext, found: _Found, done: threading.Event) -> None:
    deadline = time.monotonic() + ctx.settings.timeout
    while not done.wait(POLL_SECONDS):
        if ctx.is_cancelled() or time.monotonic() >= deadline:
            found.stopped = "cancelled" if ctx.is_cancelled() else f"timed out after {ctx.settings.timeout} s"
            proc.kill()
            return


def _text_of(errors: IO[bytes]) -> str:
    errors.seek(0)
    return errors.read(4096).decode("utf-8", "replace").strip()


def _outcome(found: _Found, cwd: str, working_dir: str, program: str) -> ToolOutcome:
    if not found.matches and found.stopped:
        return ToolOutcome(f"Error: search {found.stopped} before finding anything", is_error=True)
    if not found.matches and found.returncode >= 2 and not found.capped:
        detail = " ".join(found.stderr.split()[:40]) or f"{program} exited with {found.returncode}"
        return ToolOutcome(
            f"Error: search failed; is the query a valid extended regular expression? ({detail})",
            is_error=True,
        )
    if not found.matches:
        return ToolOutcome(NO_MATCHES + "".join(f"\n{note}" for note in _notes(found)))
    lines = [_line(cwd, working_dir, *match) for match in sorted(found.matches)]
    return ToolOutcome("\n".join(lines + _notes(found)), is_error=found.stopped is not None)


def _line(cwd: str, working_dir: str, name: str, number: int, text: str) -> str:
    if len(text) > MAX_LINE_CHARS:
        text = text[:MAX_LINE_CHARS] + f" [... {len(text) - MAX_LINE_CHARS:,} more characters]"
    return f"{_display(cwd, working_dir, name)}:{number}: {text}"


def _display(cwd: str, working_dir: str, name: str) -> str:
    """Relative to the working directory when under it (what read_file takes), else absolute."""
    full = os.path.normpath(os.path.join(cwd, name))
    if full == working_dir or full.startswith(working_dir.rstrip(os.sep) + os.sep):
        return os.path.relpath(full, working_dir)
    return full


def _notes(found: _Found) -> list[str]:
    notes = []
    per_file: dict[str, int] = {}
    for name, _number, _text in found.matches:
        per_file[name] = per_file.get(name, 0) + 1
    full = sum(1 for count in per_file.values() if count >= MAX_MATCHES_PER_FILE)
    if full:
        notes.append(
            f"[{full} file{'s' * (full != 1)} reached the cap of {MAX_MATCHES_PER_FILE} matches per file; "
            "only the first of each are shown; narrow the query to see the rest]"
        )
    if found.capped:
        notes.append(f"[stopped after {MAX_MATCHES:,} matches; narrow the query or the path]")
    if found.stopped:
        notes.append(f"[search {found.stopped}; the results are incomplete]")
    if found.dropped:
        notes.append(
            f"[{found.dropped:,} match{'es' * (found.dropped != 1)} left out: in files the file tools "
            "may not read (never-opened or private files, files with other hard links, or reached "
            "through a link)]"
        )
    if found.returncode >= 2 and found.stderr and not found.capped:
        notes.append(f"[some files could not be searched: {found.stderr.splitlines()[0]}]")
    return notes
