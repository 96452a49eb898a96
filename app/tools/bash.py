"""The bash tool: run a script in its own process group, streaming its stdout.

Where the service has a sandbox (`ctx.sandbox`), the script runs in its bubblewrap jail
(app/sandbox/jail.py); the process group is then bwrap's, and killing it ends the jail.

The blocklist refuses a few well-known destructive commands before anyone is
asked to approve them. It is a guard rail against accidents, not a sandbox: a
determined command gets past any pattern list. Approval is the real control.
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import os
import re
import selectors
import shlex
import signal
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from app.sandbox import pids
from app.sandbox.enforcement import SandboxUnavailableError
from app.sandbox.jail import Jail
from app.settings import MAX_TOOL_TIMEOUT, MIN_TOOL_TIMEOUT
from app.tools.commands import scripts
from app.tools.commands.environment import redact, scrubbed_environment, secret_values, service_secrets
from app.tools.commands.process_guard import GroupGuard
from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.tools.core.redaction import StreamRedactor
from app.tools.core.truncation import Piece, truncate_pieces

log = logging.getLogger(__name__)

POLL_SECONDS = 0.05  # how often cancel and the deadline are checked
TERM_GRACE_SECONDS = 0.5  # between SIGTERM and SIGKILL of the process group
DRAIN_SECONDS = 1.0  # how long to wait for pipes once the group has been killed
READ_CHUNK = 64 * 1024  # the most one read of a pipe takes
PUMP_BATCH = 64  # queued pieces taken together at most (64 x READ_CHUNK: 4 MiB)
BUFFER_FACTOR = 4  # keep at most this many times tools.truncation per stream
HEADER_LIMIT = 200
UNKNOWN_OUTCOME = "its outcome is unknown (it may have partly run)"
STDERR_PREFIX = "[stderr] "

# -- the blocklist ------------------------------------------------------------

_POWER = ("shutdown", "reboot", "halt", "poweroff")
_LAUNCHERS = frozenset({"sudo", "doas", "exec", "command", "builtin", "nohup", "env", "time"})
# Whole disks and what stands for one: software RAID (md), device-mapper volumes (dm-N,
# /dev/mapper/: LVM, LUKS), loop devices, and the udev links under /dev/disk/.
_DISK = r"/dev/(?:sd[a-z]|nvme\d|hd[a-z]|vd[a-z]|xvd[a-z]|mmcblk\d|md(?:\d|/)|dm-\d|loop\d|mapper/|disk/)"
_PATTERNS = (
    ("mkfs", re.compile(r"(?<![\w.-])mkfs(?:\.\w+)?(?![\w-])")),
    *((word, re.compile(rf"(?:^|[\s;&|(`]){word}(?=$|[\s;&|)`])")) for word in _POWER),
    ("of=/dev/<disk>", re.compile(rf"\bof=[\"']?{_DISK}")),
    ("> /dev/<disk>", re.compile(rf">\|?\s*[\"']?{_DISK}")),
    # The name starts where a word can (not in the middle of a run of name characters: tried
    # from every position of one, a long word cost time in its square).
    (":(){ :|:& };:", re.compile(r"(?<![^\s(){}|&;])([^\s(){}|&;]+)\s*\(\s*\)\s*\{\s*\1\s*\|\s*\1\s*&\s*\}")),
    ("/proc/*/environ", re.compile(r"/proc/\S*environ")),
)
_SEGMENT_SPLIT = re.compile(r"\$\(|[;&|\n(){}`]")
_ROOT = re.compile(r"/+(?:\.|\*)?/*")
_DISK_PATH = re.compile(rf"{_DISK}.*", re.DOTALL)  # a word naming one (udev names can hold spaces)


def blocked_pattern(command: str) -> str | None:
    """The dangerous pattern `command` matches, or None."""
    command = sanitized(command)
    for label, pattern in _PATTERNS:
        if pattern.search(command):
            return label
    for segment in _SEGMENT_SPLIT.split(command.replace("\\\n", " ")):
        found = _blocked_segment(_words(segment))
        if found:
            return found
    return None


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment)
    except ValueError:  # an unbalanced quote: fall back to plain words
        return segment.split()


def _blocked_segment(words: list[str]) -> str | None:
    """The pattern a segment's words match: any word may be the program (`xargs rm -rf /`),
    with the words after it as its flags and targets. Read from the end, what follows each
    word is known from what followed the next one, so a segment of any length costs one pass
    (taking each word's rest anew cost seconds for a few thousand words)."""
    program = _program(words)
    if program in _POWER:  # `/sbin/reboot`; the bare words are caught by _PATTERNS
        return program
    found = None
    after = _Rest()  # what follows the word being looked at
    for word in reversed(words):
        hit = after.blocked(os.path.basename(word))
        found = hit or found  # the first word's, as read left to right
        after = after.preceded_by(word)
    return found


@dataclass(frozen=True)
class _Targets:
    """What some words hold, taken as a command's targets (its non-flag arguments)."""

    first: str | None = None
    last: str | None = None
    count: int = 0
    root: bool = False  # `/`, `/*`, `//`: the whole file system
    star: bool = False  # one ends in `*` (`rm -rf /*` rather than `rm -rf /`)
    disk: bool = False  # one names a raw disk

    def preceded_by(self, word: str) -> _Targets:
        return _Targets(
            first=word,
            last=self.last if self.count else word,
            count=self.count + 1,
            root=self.root or _ROOT.fullmatch(word) is not None,
            star=self.star or word.rstrip("/").endswith("*"),
            disk=self.disk or _DISK_PATH.fullmatch(word) is not None,
        )


@dataclass(frozen=True)
class _Rest:
    """The words after a command word, as that command would take them: flags up to a `--`,
    targets (every word after the `--` among them)."""

    targets: _Targets = _Targets()
    every: _Targets = _Targets()  # all the words, as targets: what follows a `--` put before them
    recursive: bool = False  # -r, -R or --recursive among the flags
    recursive_upper: bool = False  # -R or --recursive (chmod and chown have no -r)

    def preceded_by(self, word: str) -> _Rest:
        every = self.every.preceded_by(word)
        if word == "--":
            return _Rest(targets=self.every, every=every)
        if word.startswith("-") and len(word) > 1:
            return _Rest(
                self.targets,
                every,
                self.recursive or _has_flag([word], "rR", "recursive"),
                self.recursive_upper or _has_flag([word], "R", "recursive"),
            )
        return _Rest(self.targets.preceded_by(word), every, self.recursive, self.recursive_upper)

    def blocked(self, program: str) -> str | None:
        """The pattern `program` followed by these words matches, or None."""
        targets = self.targets
        if program == "rm" and targets.root and self.recursive:
            return "rm -rf /*" if targets.star else "rm -rf /"
        if program in ("chmod", "chown") and targets.root and self.recursive_upper:
            return "chmod -R 777 /" if program == "chmod" else "chown -R /"
        if program == "mv" and targets.first is not None and _ROOT.fullmatch(targets.first):
            return "mv /"
        if program == "tee" and targets.disk:
            return "tee /dev/<disk>"
        last = targets.last
        if program == "cp" and targets.count > 1 and last is not None and _DISK_PATH.fullmatch(last):
            return "cp /dev/<disk>"
        return None


def _program(words: list[str]) -> str | None:
    """The command a segment runs, past launchers (sudo, env, ...) and assignments."""
    for word in words:
        name = os.path.basename(word)
        if name in _LAUNCHERS or word.startswith("-") or re.fullmatch(r"\w+=.*", word):
            continue
        return name
    return None


def _has_flag(flags: list[str], letters: str, long_name: str) -> bool:
    """Whether any flag is `--long_name` or a short-flag cluster holding one of `letters`."""
    return any(f == f"--{long_name}" or (not f.startswith("--") and set(letters) & set(f[1:])) for f in flags)


# -- prepare ------------------------------------------------------------------


def sanitized(command: str) -> str:
    """The command as bash will read it: NUL bytes dropped (bash skips them, so
    `r\0m -rf /` runs `rm -rf /` and must be checked as that) and Windows line
    endings made Unix ones (a stray CR would end up inside the last word)."""
    return command.replace("\x00", "").replace("\r\n", "\n")


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    command = args.get("command")
    if isinstance(command, str):
        command = sanitized(command)
    if not isinstance(command, str) or not command.strip():
        return _refusal(args, "Error: bash needs a non-empty 'command' string")
    clean: dict[str, Any] = {"command": command}
    timeout = args.get("timeout")
    if timeout is not None:
        if isinstance(timeout, bool) or not (
            isinstance(timeout, int) or (isinstance(timeout, float) and timeout.is_integer())
        ):
            return _refusal(args, "Error: 'timeout' must be a whole number of seconds")
        clean["timeout"] = min(max(int(timeout), MIN_TOOL_TIMEOUT), MAX_TOOL_TIMEOUT)
    stop_on_error = args.get("stop_on_error", False)
    if stop_on_error is None:
        stop_on_error = False
    if not isinstance(stop_on_error, bool):
        return _refusal(args, "Error: 'stop_on_error' must be true or false")
    clean["stop_on_error"] = stop_on_error
    background = args.get("run_in_background", False)
    if background is not None and not isinstance(background, bool):
        return _refusal(args, "Error: 'run_in_background' must be true or false")
    if background:
        clean["run_in_background"] = True
    header = _header(command) + (" &" if background else "")
    pattern = blocked_pattern(command)
    if pattern:
        message = f"Blocked: command matches dangerous pattern '{pattern}'"
        return Preparation(clean, header, command, needs_approval=False, error=message)
    return Preparation(clean, header, _preview(clean), needs_approval=True)


def _refusal(args: dict[str, Any], message: str) -> Preparation:
    return Preparation(dict(args), "bash", needs_approval=False, error=message)


def _header(command: str) -> str:
    lines = command.strip().splitlines()
    first = lines[0]
    if len(first) > HEADER_LIMIT:
        first = first[:HEADER_LIMIT] + "..."
    elif len(lines) > 1:
        first += " ..."
    return f"$ {first}"


def _preview(args: dict[str, Any]) -> str:
    notes = []
    if "timeout" in args:
        notes.append(f"timeout: {args['timeout']} s")
    if args["stop_on_error"]:
        notes.append("stop on error")
    if args.get("run_in_background"):
        notes.append("in the background: it keeps running after this call; read it with bash_output")
    suffix = f"\n({', '.join(notes)})" if notes else ""
    return args["command"] + suffix


# -- execute ------------------------------------------------------------------


@dataclass
class _Capture:
    """Text kept from one stream: all of it, or its head and tail past `cap`."""

    cap: int
    head: list[str] = field(default_factory=list)
    head_size: int = 0
    tail: deque[str] = field(default_factory=deque)
    tail_size: int = 0
    dropped: int = 0
    dropped_lines: int = 0  # the line breaks among the dropped characters

    def add(self, text: str) -> None:
        room = self.cap // 2 - self.head_size
        if room > 0:
            self.head.append(text[:room])
            self.head_size += min(room, len(text))
            text = text[room:]
        if not text:
            return
        self.tail.append(text)
        self.tail_size += len(text)
        while self.tail_size - len(self.tail[0]) >= self.cap // 2:
            self.tail_size -= len(self.tail[0])
            self._drop(self.tail.popleft())
        excess = self.tail_size - self.cap // 2
        if excess > 0:  # a piece is many lines read at once: cut its front, at a line's start if one is
            # near (within a quarter of the cap, so the tail keeps at least that: a long last line
            # must not take the whole tail with it)
            first = self.tail[0]
            newline = first.find("\n", excess - 1, excess + self.cap // 4)
            cut = newline + 1 if newline >= 0 else excess
            self.tail[0] = first[cut:]
            self.tail_size -= cut
            self._drop(first[:cut])

    def _drop(self, text: str) -> None:
        self.dropped += len(text)
        self.dropped_lines += text.count("\n")

    def pieces(self, prefix: str = "") -> list[Piece]:
        """The stream as the result shows it, trailing line breaks removed: its text, or its head,
        the count of characters dropped and its tail; each line starting with `prefix`, which the
        count includes for the lines that started among the dropped characters."""
        head, tail = "".join(self.head), "".join(self.tail).rstrip("\n")
        if not self.dropped:
            text = (head + tail).rstrip("\n")
            return [_prefixed(text, prefix, first=True)] if text else []
        missing = self.dropped + len(prefix) * self.dropped_lines
        return [_prefixed(head, prefix, first=True), missing, _prefixed(tail, prefix, first=False)]


def _prefixed(text: str, prefix: str, first: bool) -> str:
    """`text` with `prefix` at the start of each line; at its own start only if that starts a line."""
    if not prefix:
        return text
    return (prefix if first else "") + text.replace("\n", "\n" + prefix)


def _discard_until_closed(fds: list[int]) -> None:
    """Read pipes that outlived their call (a child that escaped the group holds them) until
    it closes them, dropping what it writes: it never blocks on a full pipe, and the reading
    ends are closed once it is done."""
    try:
        with selectors.DefaultSelector() as selector:
            for fd in fds:
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map():
                for key, _ in selector.select():
                    if not os.read(key.fd, READ_CHUNK):
                        selector.unregister(key.fd)
    finally:
        for fd in fds:
            os.close(fd)


@dataclass
class _Run:
    proc: subprocess.Popen
    stdout: _Capture
    stderr: _Capture
    secrets: list[str]
    ctx: ToolContext
    streaming_failed: bool = False
    redactors: dict[str, StreamRedactor] = field(default_factory=dict)
    # The pipes still open, read by this thread as they become readable (no reader threads:
    # starting two a call cost more than the rest of an `echo`'s start).
    pipes: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)

    def __post_init__(self) -> None:
        shapes = self.ctx.settings.redact_key_shapes
        self.redactors = {
            name: StreamRedactor(self.secrets, shapes=shapes, counts=self.ctx.redacted)
            for name in ("stdout", "stderr")
        }
        for name, stream in (("stdout", self.proc.stdout), ("stderr", self.proc.stderr)):
            assert stream is not None
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            self.pipes.register(stream.fileno(), selectors.EVENT_READ, (name, decoder))

    @property
    def open_streams(self) -> int:
        return len(self.pipes.get_map())

    def pump(self, wait: float) -> None:
        """Read what the pipes hold, waiting up to `wait` for the first of it, up to READ_CHUNK
        a read (a fast command's lines arrive many to a read, a slow one's as soon as written);
        what is readable meanwhile, up to PUMP_BATCH reads, is taken together (one redaction,
        one capture, one emit)."""
        items: list[tuple[str, str | None]] = []
        timeout: float = wait
        while self.open_streams and len(items) < PUMP_BATCH:
            ready = self.pipes.select(timeout)
            if not ready:
                break
            for key, _ in ready:
                items.extend(self._read(key))
            timeout = 0
        for name, text in _joined(items):
            self._take(name, text)

    def _read(self, key: selectors.SelectorKey) -> list[tuple[str, str | None]]:
        name, decoder = key.data
        chunk = os.read(key.fd, READ_CHUNK)
        if chunk:
            return [(name, decoder.decode(chunk))]
        self.pipes.unregister(key.fd)
        return [(name, decoder.decode(b"", final=True)), (name, None)]

    def let_go(self) -> None:
        """The call is over: pipes an escaped child still holds are drained (and dropped) by a
        thread of their own until it closes them; the rest are closed now."""
        held = [key.fd for key in self.pipes.get_map().values()]
        self.pipes.close()
        if held:  # copies of their descriptors, the thread's to close
            fds = [os.dup(fd) for fd in held]
            threading.Thread(target=_discard_until_closed, args=(fds,), daemon=True).start()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def _take(self, name: str, text: str | None) -> None:
        # Redacted before it is kept: a cut made later could split a secret
        # so that the whole-output redaction no longer recognises it.
        redactor = self.redactors[name]
        if text is None:
            self._keep(name, redactor.end())
        else:
            self._keep(name, redactor.feed(text))

    def release_held(self) -> None:
        """What a redactor still holds of a stream that never ended (a child that escaped the
        group keeps its pipe open): kept and streamed, redacted, rather than lost."""
        for name, redactor in self.redactors.items():
            self._keep(name, redactor.end())

    def _keep(self, name: str, text: str) -> None:
        if not text:
            return
        if name == "stderr":
            self.stderr.add(text)
        else:
            self.stdout.add(text)
            self._stream(text)

    def _stream(self, text: str) -> None:
        """Live output is best-effort: the result keeps every line whether or not it streamed."""
        try:
            self.ctx.emit_output(text)
        # The sink is the engine's (a Redis publish, say), so any error can come
        # out of it; none of them may stop the command or lose its output. Only
        # the error's type is logged: its text is the sink's, and could hold anything.
        except Exception as exc:
            if not self.streaming_failed:
                log.warning(
                    "bash output could not be streamed (%s); the command carries on", type(exc).__name__
                )
            self.streaming_failed = True

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while self.open_streams and time.monotonic() < deadline:
            self.pump(POLL_SECONDS)
        self.pump(0)


def _joined(items: list[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    """Consecutive pieces of one stream as one; an end-of-stream mark stays on its own."""
    out: list[tuple[str, list[str] | None]] = []
    for name, text in items:
        if text is None:
            out.append((name, None))
        elif out and out[-1][0] == name and (parts := out[-1][1]) is not None:
            parts.append(text)
        else:
            out.append((name, [text]))
    return [(name, None if parts is None else "".join(parts)) for name, parts in out]


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    if not os.path.isdir(ctx.working_dir):
        return ToolOutcome(f"Error: working directory {ctx.working_dir} does not exist", True)
    if args.get("run_in_background"):
        return _in_background(args["command"], ctx)
    timeout = args.get("timeout") or ctx.settings.timeout
    stop_on_error = bool(args.get("stop_on_error"))
    try:
        done = run(args["command"], timeout, ctx, stop_on_error)
    except SandboxUnavailableError as exc:
        return ToolOutcome(str(exc), True)
    return _outcome(done, timeout, stop_on_error, ctx.settings.truncation)


def _in_background(command: str, ctx: ToolContext) -> ToolOutcome:
    from app.tools.commands import background

    try:
        shell_id = background.start(ctx, command)
    except background.ShellError as exc:
        return ToolOutcome(str(exc), True)
    return ToolOutcome(
        f"Started in the background as shell {shell_id}. Read what it prints with "
        f"bash_output(shell_id={shell_id!r}); stop it with kill_shell."
    )


@dataclass(frozen=True)
class Completed:
    """A finished (or stopped) script: its output as the result shows it, before any note."""

    # Stdout, then stderr lines marked `[stderr] `; redacted; none when it printed nothing. Text,
    # or the counts of characters not kept where a stream outgrew BUFFER_FACTOR x truncation.
    pieces: tuple[Piece, ...]
    returncode: int
    stopped: str | None  # "timeout" or "cancelled" when it had to be stopped

    @property
    def text(self) -> str:
        """The output whole, each gap marked with how many characters it lost."""
        return "".join(
            p if isinstance(p, str) else f"\n[... {p:,} characters not kept ...]\n" for p in self.pieces
        )


def run(command: str, timeout: int, ctx: ToolContext, stop_on_error: bool = False) -> Completed:
    """Run `command` under bash's rules (its own process group, a scrubbed environment, the
    working directory, `timeout`, cancel, the sandbox's jail); the caller checks that the
    directory exists. Raises SandboxUnavailableError when it must be jailed and cannot be."""
    if ctx.sandbox is None:
        return _run(command, timeout, ctx, stop_on_error, None)
    with ctx.sandbox.jail_for(ctx.network) as jail:
        return _run(command, timeout, ctx, stop_on_error, jail)


def _run(command: str, timeout: int, ctx: ToolContext, stop_on_error: bool, jail: Jail | None) -> Completed:
    # The guard starts first: a guard that cannot start leaves nothing running, and a worker
    # killed from here on leaves no script behind (its watchdog removes the folder). It kills
    # the command's group if this worker dies before the call ends.
    with GroupGuard(TERM_GRACE_SECONDS, leftovers=scripts.folder()) as guard:
        script = scripts.write((jail.limits() if jail else "") + _script(command, stop_on_error))
        try:
            return _execute(script, timeout, ctx, jail, guard)
        finally:
            os.unlink(script)


def _script(command: str, stop_on_error: bool) -> str:
    return "set -o pipefail\n" + ("set -e\n" if stop_on_error else "") + command + "\n"


def _execute(script: str, timeout: int, ctx: ToolContext, jail: Jail | None, guard: GroupGuard) -> Completed:
    environ = dict(os.environ)
    known = service_secrets(ctx)
    argv, env, cap = command_argv(script, ctx, jail, environ, known)
    try:
        return _started(argv, env, ctx, timeout, known, environ, guard)
    finally:
        if cap is not None:
            cap.remove()


def command_argv(
    script: str, ctx: ToolContext, jail: Jail | None, environ: dict[str, str], known: list[str]
) -> tuple[list[str], dict[str, str], Any]:
    """How `script` is run (in the jail, when there is one) and with what environment, and the
    process cap the caller removes once it has ended (None without one). Background shells too."""
    env = scrubbed_environment(environ, known)
    argv = ["bash", script]
    cap = None
    if jail is not None:
        argv = jail.argv(ctx.working_dir, ctx.network, script, env)
        env = {"PATH": env.get("PATH", os.defpath)}  # bwrap's own; the command's is in argv
        cap = pids.cap(jail.sandbox.processes)
        if cap is not None:
            argv = cap.prefix() + argv
    return argv, env, cap


def _started(
    argv: list[str],
    env: dict[str, str],
    ctx: ToolContext,
    timeout: int,
    known: list[str],
    environ: dict[str, str],
    guard: GroupGuard,
) -> Completed:
    proc = subprocess.Popen(
        argv,
        cwd=ctx.working_dir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, killed as one
    )
    cap = BUFFER_FACTOR * ctx.settings.truncation
    run = _Run(proc, _Capture(cap), _Capture(cap), secret_values(environ, known), ctx)
    try:
        stopped = _run_to_end(run, timeout, guard)
    finally:
        run.let_go()
        # Released before bash is reaped: an unreaped bash keeps its pid (the group id)
        # from reuse, so the watchdog can never signal someone else's group.
        guard.release()
    run.release_held()
    returncode = proc.wait()
    return Completed(tuple(_pieces(run)), returncode, stopped)


def _run_to_end(run: _Run, timeout: int, guard: GroupGuard) -> str | None:
    """Stream the command's output until it ends or is stopped; its group is killed either way."""
    try:
        guard.watch(run.proc.pid)
        _note_started(run)
        return _supervise(run, time.monotonic() + timeout)
    finally:
        _kill_group(run)


def _note_started(run: _Run) -> None:
    """Tell the service the command has started. Its output waits in the pipe meanwhile; a
    store that fails leaves the call saying "most likely never ran" should its worker die."""
    try:
        run.ctx.note_process(run.proc.pid)
    except Exception as exc:  # noqa: BLE001 - a record, never a reason to stop the command
        log.warning("could not record that a command started (%s)", type(exc).__name__)


def _supervise(run: _Run, deadline: float) -> str | None:
    """Stream output until bash exits; "timeout" or "cancelled" if it had to be stopped."""
    while True:
        run.pump(POLL_SECONDS)
        if run.ctx.is_cancelled():
            return "cancelled"
        if time.monotonic() >= deadline:
            return "timeout"
        if _has_exited(run.proc.pid):
            return None


def _has_exited(pid: int) -> bool:
    # WNOWAIT leaves bash unreaped, so its pid (the group id) cannot be reused
    # before the group is killed.
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _kill_group(run: _Run) -> None:
    """Stop everything the script started: SIGTERM, a short grace, then SIGKILL.

    Pipes held open by a process that escaped the group (setsid) are not waited
    on past `DRAIN_SECONDS`.
    """
    _signal_group(run.proc.pid, signal.SIGTERM)
    run.drain(TERM_GRACE_SECONDS)
    _signal_group(run.proc.pid, signal.SIGKILL)
    run.drain(DRAIN_SECONDS)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
        os.killpg(pgid, sig)


def _pieces(run: _Run) -> list[Piece]:
    """Stdout, then stderr lines prefixed `[stderr] `, as pieces (see truncation); redacted."""
    out, err = run.stdout.pieces(), run.stderr.pieces(STDERR_PREFIX)
    pieces = [*out, "\n", *err] if out and err else out + err
    return [redact(p, run.secrets) if isinstance(p, str) else p for p in pieces]


def _outcome(done: Completed, timeout: int, stop_on_error: bool, limit: int) -> ToolOutcome:
    """The result, cut to `limit` here: only here is it known how much was never kept."""
    pieces: list[Piece] = list(done.pieces) or ["(no output)"]
    returncode, stopped = done.returncode, done.stopped
    if stopped == "timeout":
        note = f"[timed out after {timeout} s and was stopped; {UNKNOWN_OUTCOME}]"
    elif stopped == "cancelled":
        note = f"[cancelled and stopped; {UNKNOWN_OUTCOME}]"
    elif returncode < 0:
        note = f"[killed by signal {_signal_name(-returncode)}]"
    elif returncode:
        note = f"[exit code: {returncode}]"
    else:
        note = ""
    if note:
        pieces.append(f"\n{note}")
    failed = stopped is not None or returncode < 0 or returncode >= 2
    return ToolOutcome(truncate_pieces(pieces, limit), failed or (stop_on_error and returncode != 0))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
