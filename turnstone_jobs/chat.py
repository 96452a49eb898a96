"""`turnstone-jobs chat`: a REPL on one workstream. Answers stream, calls that wait for a
decision ask y/n/a, Ctrl-C cancels the running turn (twice: leaves), a dropped socket resumes."""

from __future__ import annotations

import contextlib
import json
import mimetypes
import os
import queue
import re
import shlex
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rich.console import Console

from turnstone_jobs.client import Client, EventStream
from turnstone_jobs.errors import ApiError, ClientError, ConflictError
from turnstone_jobs.render import Renderer
from turnstone_jobs.results import ApprovalItem, Attachment, Event

HISTORY_FILE = Path("~/.turnstone_jobs_history")
HISTORY_LINES = 1000
POLL_SECONDS = 0.2  # how often a followed turn checks for Ctrl-C between events
CHECK_AFTER_POLLS = 25  # a followed turn quiet this many polls (5 s): ask the service if it ended
# An approval answer: the word, then feedback after a space or a comma (`y, use full path`).
ANSWER = re.compile(r"(yes|no|always|edit|y|n|a|e)(?:\s*,\s*|\s+|$)(.*)", re.IGNORECASE | re.DOTALL)

MAX_ATTACHMENT_BYTES = 32 * 1024 * 1024  # the service's limit for one file

HELP = """\
commands:
  /approve [CALL_ID|all] [FEEDBACK]  approve a waiting call (all of them by default)
  /deny [CALL_ID|all] [FEEDBACK]     deny a waiting call (all of them by default)
  /cancel                            cancel the running turn (Ctrl-C does too)
  /attach [FILE]                     send FILE with your next message (none: what is attached)
  /history [N]                       the last N messages (10)
  /compact                           summarise the older messages now (they stay stored)
  /summary                           the newest summary and the messages it stands for
  /rewind [N]                        take the last N turns (1) out of the conversation, kept
  /retry                             send the last message again (its answer kept)
  /edit TEXT                         send TEXT in place of the last message (the old one kept)
  /branches                          what rewinds, edits and retries kept
  /restore BRANCH_ID                 put a kept branch back
  /fork [NAME]                       a copy of this workstream, followed from now on
  /workstreams                       your workstreams
  /switch WS_ID                      follow another workstream
  /mcp                               MCP servers, their state and their tools
  /mcp refresh [SERVER]              the workers list a server's tools again (admin)
  /mcp reconnect [SERVER]            the workers connect a server anew (admin)
  /watches                           this workstream's watches
  /skill [NAME]                      list skills; with NAME, a new workstream with that skill
  /help                              this text
  /quit                              leave (Ctrl-D, or Ctrl-C twice)
at an approval: y (yes), n (no), a (always this tool), e (edit the command or the arguments
in $EDITOR, then approve the call as edited); text after the letter (a comma between them is
fine: y, use full path) is feedback"""


def parse_answer(answer: str) -> tuple[str, str] | None:
    """The first letter of an approval answer (`y`, `n`, `a` or `e`) and its feedback ("" for
    none), or None when the answer is none of those."""
    found = ANSWER.fullmatch(answer.strip())
    if found is None:
        return None
    return found.group(1)[0].lower(), found.group(2).strip()


def _edited_in_editor(text: str, suffix: str) -> str:
    """`text` after the person's editor ($VISUAL, $EDITOR, else vi) has had it in a file."""
    editor = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")
    with tempfile.NamedTemporaryFile("w", suffix=suffix, encoding="utf-8", delete=False) as f:
        f.write(text + "\n")
    try:
        subprocess.run([*editor, f.name], check=True)  # noqa: S603 - the person's own editor
        return Path(f.name).read_text(encoding="utf-8")
    finally:
        os.unlink(f.name)


class Leave(Exception):
    """The session ends: the person asked to (status 0), or the event stream is gone (1)."""

    def __init__(self, status: int = 0) -> None:
        super().__init__(status)
        self.status = status


class Chat:
    def __init__(self, client: Client, ws_id: str, console: Console, new_options: dict[str, Any]) -> None:
        self.client = client
        self.console = console
        self.render = Renderer(console)
        self.new_options = new_options  # what /skill's new workstream is made with
        self.ws_id = ws_id
        self.name = ws_id
        self.stream: EventStream | None = None
        self.events: queue.Queue[Event | BaseException | str] = queue.Queue()
        self.outgoing: list[Attachment] = []  # /attach: files that go with the next message

    # -- the loop ------------------------------------------------------------------

    def run(self) -> int:
        _load_history()
        # Ctrl-C is how a person cancels a turn and leaves: Python turns SIGINT into
        # KeyboardInterrupt only when the process started with it at its default, and a shell
        # without job control starts a background command with SIGINT ignored (POSIX).
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            self.attach(self.ws_id)
            interrupted = False
            while True:
                self.drain()
                try:
                    line = input(f"{self.name}> ")
                except KeyboardInterrupt:
                    if interrupted:
                        raise Leave from None
                    interrupted = True
                    self.render.line("(Ctrl-C again, /quit or Ctrl-D to leave)", "dim")
                    continue
                except UnicodeDecodeError:
                    self.render.line("that line is not valid UTF-8: not sent", "red")
                    continue
                except EOFError:
                    raise Leave from None
                interrupted = False
                self.handle(line)
        except Leave as leave:
            self.render.line("bye")
            return leave.status
        finally:
            _save_history()
            if self.stream is not None:
                self.stream.close()

    def handle(self, line: str) -> None:
        text = line.strip()
        if not text:
            return
        try:
            if text.startswith("/"):
                self.command(text)
            else:
                ids = [a.attachment_id for a in self.outgoing]
                sent = self.client.send(self.ws_id, line, attachments=ids or None)
                self.outgoing = []
                self.follow(sent.turn_id)
        except ClientError as exc:
            self.render.line(f"error: {exc}", "red")

    def attach(self, ws_id: str) -> None:
        """Follow `ws_id` from now on: its state, and the turn it runs, if any."""
        ws = self.client.workstream(ws_id)
        history = self.client.history(ws_id)
        if self.stream is not None:
            self.stream.close()
        self.ws_id, self.name = ws.ws_id, ws.name
        self.outgoing = []  # attached to the workstream left, not to this one
        self.events = queue.Queue()
        self.stream = self.client.events(ws_id, after=history.last_event_id)
        self.stream.on_reconnect = lambda last: self.events.put(f"(reconnected; resuming after event {last})")
        threading.Thread(target=_pump, args=(self.stream, self.events), daemon=True).start()
        extra = f", skill {ws.skill}" if ws.skill else ""
        self.render.line(
            f"workstream {ws.name} ({ws.ws_id}), model {ws.model or 'default'}{extra}: {ws.state}"
        )
        self.render.line("type a message, or /help", "dim")
        if ws.active_turn_id:
            self.render.line("a turn is running: following it (Ctrl-C cancels it)", "dim")
            for item in ws.pending_approvals:
                self.render.item(item)
            self.ask_all([i for i in ws.pending_approvals if i.needs_approval])
            self.follow(ws.active_turn_id)

    def drain(self) -> None:
        """Show what arrived while the prompt waited (another client's turn, a watch)."""
        while True:
            try:
                item = self.events.get_nowait()
            except queue.Empty:
                return
            self.show(item)

    def show(self, item: Event | BaseException | str) -> Event | None:
        if isinstance(item, BaseException):
            self.render.line(f"event stream stopped: {item}", "bold red")
            raise Leave(1)
        if isinstance(item, str):
            self.render.line(item, "dim")
            return None
        self.render.show(item)
        return item

    def follow(self, turn_id: str) -> None:
        """Show `turn_id`'s events until it ends, asking for the decisions it waits for once
        caught up with the events (a call decided meanwhile is not asked). Ctrl-C cancels the
        turn; a second Ctrl-C leaves."""
        cancelling = False
        asked: set[tuple[str | None, str]] = set()
        waiting: dict[tuple[str | None, str], ApprovalItem] = {}
        quiet = 0
        while True:
            try:
                if waiting and self.events.empty() and not cancelling:
                    items = list(waiting.values())
                    waiting.clear()
                    self.ask_all(items)
                    continue
                try:
                    event = self.show(self.events.get(timeout=POLL_SECONDS))
                    quiet = 0
                except queue.Empty:
                    quiet += 1
                    if quiet % CHECK_AFTER_POLLS == 0 and self._has_ended(turn_id):
                        self.render.flush()
                        return
                    continue
                if event is None or event.turn_id != turn_id:
                    continue
                if event.type == "state_change" and event.get("state") in ("idle", "error"):
                    self.render.flush()
                    return
                for item in _waiting(event):
                    key = (item.child_ws_id, item.call_id)
                    if key not in asked:
                        asked.add(key)
                        waiting[key] = item
                for key in _resolved(event):
                    waiting.pop(key, None)
            except KeyboardInterrupt:
                if cancelling:
                    raise Leave from None
                cancelling = True
                self.render.line("cancelling the turn… (Ctrl-C again to leave)", "yellow")
                with contextlib.suppress(ClientError):
                    self.client.cancel(self.ws_id, turn_id)

    def _has_ended(self, turn_id: str) -> bool:
        """After a quiet while, the service's word on whether the turn is over (a queued turn
        that was cancelled before it started sends no end of its own)."""
        try:
            ws = self.client.workstream(self.ws_id)
        except ClientError:
            return False
        return ws.active_turn_id != turn_id and not ws.queued_messages

    def ask_all(self, items: list[ApprovalItem]) -> None:
        """Ask for each item the service still has pending (another client may have decided)."""
        pending = {i.call_id for i in self.client.workstream(self.ws_id).pending_approvals}
        for item in items:
            if item.call_id in pending:
                self.ask(item)

    def ask(self, item: ApprovalItem) -> None:
        """y / n / a / e, with optional feedback after the letter; anything else asks again."""
        edited: dict[str, Any] | None = None
        while True:
            try:
                with _kept_out_of_history():  # an answer is not a line to recall (Up) at the prompt
                    answer = input(
                        f"allow {item.func_name} {item.header}? [y/n/a/e, feedback after] "
                    ).strip()
            except (UnicodeDecodeError, EOFError):
                continue
            parsed = parse_answer(answer)
            if parsed is not None and parsed[0] == "e":
                edited = self.edit(item)
                if edited is None:
                    continue
            if parsed is not None:
                letter, feedback = parsed
                break
            self.render.line(
                "answer y (yes), n (no), a (always) or e (edit), optionally followed by feedback", "dim"
            )
        approved = letter[0] != "n"
        try:
            if approved:
                self.client.approve(
                    self.ws_id, item.call_id, feedback=feedback or None, always=letter[0] == "a",
                    child_ws_id=item.child_ws_id, arguments=edited,
                )  # fmt: skip
            else:
                self.client.deny(
                    self.ws_id, item.call_id, feedback=feedback or None, child_ws_id=item.child_ws_id
                )
        except ConflictError:
            self.render.line(f"{item.call_id} was decided already", "dim")
        except ApiError as exc:  # an edit the tool would refuse: say why, and ask again
            if edited is None:
                raise
            self.render.line(f"not decided: {exc.message}", "red")
            self.ask(item)

    def edit(self, item: ApprovalItem) -> dict[str, Any] | None:
        """The call's arguments as the person leaves them in $VISUAL / $EDITOR (bash: its
        command as text; else JSON), or None (said why) to ask again."""
        args = item.args
        if args is None:
            self.render.line("this call's arguments cannot be edited here", "dim")
            return None
        command = item.func_name == "bash" and isinstance(args.get("command"), str)
        before = args["command"] if command else json.dumps(args, indent=2, ensure_ascii=False)
        try:
            after = _edited_in_editor(before, ".sh" if command else ".json")
        except (OSError, subprocess.SubprocessError) as exc:
            self.render.line(f"the editor did not run: {exc}", "red")
            return None
        if after.strip() == before.strip():
            self.render.line("unchanged: answer y to run it as it is", "dim")
            return None
        if command:
            return {**args, "command": after.rstrip("\n")}
        try:
            value = json.loads(after)
        except json.JSONDecodeError as exc:
            self.render.line(f"not JSON ({exc}): nothing decided", "red")
            return None
        if not isinstance(value, dict):
            self.render.line("the arguments must be a JSON object: nothing decided", "red")
            return None
        return value

    # -- slash commands --------------------------------------------------------------

    def command(self, text: str) -> None:
        name, _, rest = text[1:].partition(" ")
        handler: Callable[[str], None] | None = getattr(self, f"cmd_{name.lower()}", None)
        if handler is None:
            self.render.line(f"unknown command /{name[:40]}: /help lists them", "red")
            return
        handler(rest.strip())

    def cmd_help(self, _rest: str) -> None:
        self.render.line(HELP)

    def cmd_quit(self, _rest: str) -> None:
        raise Leave

    cmd_exit = cmd_quit

    def cmd_attach(self, rest: str) -> None:
        if not rest:
            names = ", ".join(a.filename for a in self.outgoing) or "nothing"
            self.render.line(f"attached to your next message: {names}", "dim")
            return
        path = Path(rest).expanduser()
        try:
            if path.stat().st_size > MAX_ATTACHMENT_BYTES:
                self.render.line(
                    f"{rest}: over the attachment limit of {MAX_ATTACHMENT_BYTES:,} bytes", "red"
                )
                return
            content = path.read_bytes()
        except OSError as exc:
            self.render.line(f"{rest}: {exc.strerror or exc}", "red")
            return
        media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        attached = self.client.attach(self.ws_id, content, path.name, media_type)
        self.outgoing.append(attached)
        read = f" (its text will not reach the model: {attached.text_note})" if attached.text_note else ""
        self.render.line(f"attached {attached.filename}: it goes with your next message{read}", "dim")

    def cmd_approve(self, rest: str) -> None:
        self._decide(True, rest)

    def cmd_deny(self, rest: str) -> None:
        self._decide(False, rest)

    def _decide(self, approved: bool, rest: str) -> None:
        ws = self.client.workstream(self.ws_id)
        if not ws.pending_approvals:
            self.render.line("no call is waiting for a decision", "dim")
            return
        target, _, feedback = rest.partition(" ")
        ids = {i.call_id: i for i in ws.pending_approvals}
        if target and target != "all" and target not in ids:
            feedback, target = rest, ""  # no call id: it was all feedback
        chosen = [ids[target]] if target in ids else list(ws.pending_approvals)
        for item in chosen:
            try:
                if approved:
                    self.client.approve(
                        self.ws_id, item.call_id, feedback=feedback or None, child_ws_id=item.child_ws_id
                    )
                else:
                    self.client.deny(
                        self.ws_id, item.call_id, feedback=feedback or None, child_ws_id=item.child_ws_id
                    )
            except ConflictError:
                self.render.line(f"{item.call_id} was decided already", "dim")
        if ws.active_turn_id:
            self.follow(ws.active_turn_id)

    def cmd_cancel(self, _rest: str) -> None:
        turn_id = self.client.cancel(self.ws_id)
        self.render.line(f"cancelling turn {turn_id}", "yellow")
        self.follow(turn_id)

    def cmd_history(self, rest: str) -> None:
        count = int(rest) if rest.isdigit() else 10
        for m in self.client.history(self.ws_id).messages[-count:] if count else []:
            if m.role == "summary":
                covered = m.raw.get("covers_count")
                self.render.line(f"({covered} earlier messages summarised: /summary)", "dim")
                continue
            content = m.content if isinstance(m.content, str) else str(m.content)
            who = f"{m.role} {m.name}" if m.name else m.role
            self.render.line(f"{who}: {content}", "bold" if m.role == "user" else "")

    # -- compaction (docs/compaction.md) ----------------------------------------------

    def cmd_compact(self, _rest: str) -> None:
        sent = self.client.compact(self.ws_id)
        self.render.line(f"compacting: {sent['messages']} earlier message(s) to be summarised", "yellow")

    def cmd_summary(self, _rest: str) -> None:
        messages = self.client.history(self.ws_id).messages
        summaries = [m for m in messages if m.role == "summary"]
        if not summaries:
            self.render.line("nothing summarised yet (/compact)", "dim")
            return
        newest = max(summaries, key=lambda m: (m.raw.get("covers_to") or 0, m.raw["id"]))
        first, last = newest.raw.get("covers_from") or 0, newest.raw.get("covers_to") or 0
        self.render.line(f"summary of {newest.raw.get('covers_count')} earlier messages:", "bold")
        self.render.line(str(newest.content))
        covered = [m for m in messages if m.role != "summary" and first <= m.raw["id"] <= last]
        self.render.line(f"the messages it stands for (ids {first}-{last}):", "bold")
        for m in covered:
            self.render.line(f"{m.role}: {m.content if isinstance(m.content, str) else m.content}", "dim")

    # -- branching (docs/branching.md) ------------------------------------------------

    def cmd_rewind(self, rest: str) -> None:
        turns = int(rest) if rest.isdecimal() and int(rest) > 0 else 1 if not rest else 0
        if not turns:
            self.render.line("usage: /rewind [N], N turns to take out (1)", "dim")
            return
        messages = self.client.history(self.ws_id).messages
        starts = [n for n, m in enumerate(messages) if m.role == "user"]
        if not starts:
            self.render.line("nothing to rewind", "dim")
            return
        first = starts[-min(turns, len(starts))]
        done = self.client.rewind(self.ws_id, int(messages[first - 1].raw["id"]) if first else 0)
        kept = f"{done['archived']} message(s) kept in branch {done['branch']} (/branches)"
        self.render.line(kept, "yellow")

    def cmd_retry(self, _rest: str) -> None:
        self.follow(self.client.retry(self.ws_id).turn_id)

    def cmd_edit(self, rest: str) -> None:
        if not rest:
            self.render.line("usage: /edit TEXT, sent in place of your last message", "dim")
            return
        last = [m for m in self.client.history(self.ws_id).messages if m.role == "user"]
        if not last:
            self.render.line("no message to edit", "dim")
            return
        self.follow(self.client.edit(self.ws_id, int(last[-1].raw["id"]), rest).turn_id)

    def cmd_branches(self, _rest: str) -> None:
        kept = self.client.branches(self.ws_id)
        if not kept:
            self.render.line("no branches: /rewind, /edit and /retry keep what they take out", "dim")
        for b in kept:
            self.render.line(
                f"{b['id']}  {b['reason']:<7}  {b['message_count']} message(s)  {b['preview'][:60]}"
            )

    def cmd_restore(self, rest: str) -> None:
        if not rest:
            self.render.line("usage: /restore BRANCH_ID (/branches lists them)", "dim")
            return
        done = self.client.restore(self.ws_id, rest)
        replaced = f"; what it replaced is branch {done['branch']}" if done["branch"] else ""
        self.render.line(f"branch {done['restored']} restored{replaced}", "yellow")

    def cmd_fork(self, rest: str) -> None:
        fork = self.client.fork(self.ws_id, name=rest or None)
        self.attach(fork.ws_id)

    def cmd_workstreams(self, _rest: str) -> None:
        for ws in self.client.workstreams():
            mark = "*" if ws.ws_id == self.ws_id else " "
            self.render.line(f"{mark} {ws.ws_id}  {ws.state:<9}  {ws.name}")

    def cmd_switch(self, rest: str) -> None:
        if not rest:
            self.render.line("usage: /switch WS_ID (/workstreams lists them)", "dim")
            return
        self.attach(rest)

    def cmd_mcp(self, rest: str) -> None:
        words = rest.split()
        if words and words[0] in ("refresh", "reconnect"):
            reconnect = words[0] == "reconnect"
            answer = self.client.mcp_refresh(words[1] if len(words) > 1 else None, reconnect=reconnect)
            doing = "reconnecting" if reconnect else "refreshing"
            # The workers do it in their own time: /mcp shows what they report once they have.
            told = f"{answer.get('workers')} worker(s) told"
            self.render.line(f"{doing} {answer.get('refreshing')}: {told}; /mcp shows the result")
            return
        overview = self.client.mcp()
        servers = overview.get("servers") or []
        if not servers:
            self.render.line("no MCP servers are configured", "dim")
        for s in servers:
            counts = s.get("counts") or {}
            error = f" — {s.get('last_error')}" if s.get("last_error") else ""
            self.render.line(f"{s.get('name')}: {s.get('state')}, {counts.get('tools', 0)} tools{error}")
            for tool in s.get("tools") or []:
                self.render.line(f"  {tool}  [MCP: {s.get('name')}]")

    def cmd_watches(self, _rest: str) -> None:
        watches = self.client.watches(self.ws_id)
        if not watches:
            self.render.line("no watches", "dim")
        for w in watches:
            self.render.line(
                f"{w.get('watch_id')}  {w.get('status'):<10} {w.get('name')}  polls {w.get('polls')}"
            )

    def cmd_skill(self, rest: str) -> None:
        if not rest:
            skills = self.client.skills()
            for s in skills:
                self.render.line(f"{s.get('name')}: {s.get('description') or ''}")
            if not skills:
                self.render.line("no skills: `turnstone-jobs skills import DIR` adds some", "dim")
            return
        # A skill is chosen when a workstream is made (the API has no way to change it after).
        ws = self.client.create_workstream(f"{rest[:150]} chat", skill=rest, **self.new_options)
        self.attach(ws.ws_id)


def _waiting(event: Event) -> list[ApprovalItem]:
    if event.type == "approve_request":
        return [ApprovalItem.from_json(i) for i in event.get("items") or [] if _needs(i)]
    inner = event.get("event")
    if event.type == "subagent" and isinstance(inner, dict) and inner.get("type") == "approve_request":
        child = str(event.get("child_ws_id") or "") or None
        return [ApprovalItem.from_json(i, child) for i in inner.get("items") or [] if _needs(i)]
    return []


def _resolved(event: Event) -> list[tuple[str | None, str]]:
    """The calls an approval_resolved event (the turn's own, or a sub-agent's) decided."""
    inner = event.get("event")
    if event.type == "approval_resolved":
        return [(None, str(c)) for c in event.get("call_ids") or []]
    if event.type == "subagent" and isinstance(inner, dict) and inner.get("type") == "approval_resolved":
        child = str(event.get("child_ws_id") or "") or None
        return [(child, str(c)) for c in inner.get("call_ids") or []]
    return []


def _needs(raw: Any) -> bool:
    return isinstance(raw, dict) and bool(raw.get("needs_approval")) and not raw.get("error")


def _pump(stream: EventStream, out: queue.Queue[Event | BaseException | str]) -> None:
    """The socket's reader: every event into the queue; a refusal, a lost server or any other
    failure, too (a reader that died quietly would leave the prompt following nothing)."""
    try:
        for event in stream:
            out.put(event)
    except Exception as exc:
        if not stream.closed:
            out.put(exc)


def _history_path() -> Path:
    return HISTORY_FILE.expanduser()


def _load_history() -> None:
    try:
        import readline
    except ImportError:  # no line editing on this platform: input() still works
        return
    readline.set_history_length(HISTORY_LINES)
    with contextlib.suppress(OSError):
        readline.read_history_file(_history_path())


@contextlib.contextmanager
def _kept_out_of_history() -> Iterator[None]:
    """Within: lines read are not added to the line history."""
    try:
        import readline
    except ImportError:
        yield
        return
    readline.set_auto_history(False)
    try:
        yield
    finally:
        readline.set_auto_history(True)


def _save_history() -> None:
    try:
        import readline
    except ImportError:
        return
    with contextlib.suppress(OSError):
        readline.write_history_file(_history_path())
        os.chmod(_history_path(), 0o600)  # what a person typed may be private
