"""How the terminal client shows events: answers as Markdown, block by block as they stream;
tool calls with their live output; everything from the model or a tool as text, never markup."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.text import Text

from turnstone_jobs.results import ApprovalItem, Event

RESULT_LINES = 20  # a result shown without live output first: at most this many lines


class Renderer:
    def __init__(self, console: Console) -> None:
        self.console = console
        self._pending: dict[tuple[str | None, int], str] = {}  # answer text not shown yet, per step
        self._streamed: set[str] = set()  # calls whose output was shown live
        self._at_line_start = True

    def line(self, text: str, style: str = "") -> None:
        self._end_line()
        self.console.print(Text(text, style=style), soft_wrap=True)

    def show(self, event: Event) -> None:
        handler = getattr(self, f"_on_{event.type}", None)
        if handler is not None:
            handler(event)

    def item(self, item: ApprovalItem, prefix: str = "") -> None:
        self.line(f"{prefix}▶ {item.func_name}: {item.header or item.call_id}", "bold cyan")
        if item.preview and item.preview.strip() != item.header.removeprefix("$ ").strip():
            self.line(_indent(item.preview), "cyan")
        if item.error:
            self.line(f"  refused: {item.error}", "red")
        if item.rule:
            self.line(f"  {rule_text(item.rule)}", "yellow")
        if item.verdict:
            self.verdict(item.verdict)

    def verdict(self, verdict: dict[str, Any], prefix: str = "  ") -> None:
        risk = str(verdict.get("risk"))
        style = {"low": "green", "medium": "yellow", "high": "bold red"}.get(risk, "")
        self.line(f"{prefix}{verdict_text(verdict)}", style)

    def flush(self) -> None:
        for key in list(self._pending):
            self._markdown(self._pending.pop(key))

    # -- events --------------------------------------------------------------------

    def _on_content(self, e: Event) -> None:
        key = (e.turn_id, int(e.get("step") or 0))
        text = self._pending.get(key, "") + str(e.get("text") or "")
        done, rest = _complete_blocks(text)
        if done:
            self._markdown(done)
        self._pending[key] = rest

    def _on_stream_end(self, e: Event) -> None:
        key = (e.turn_id, int(e.get("step") or 0))
        if e.get("discard"):
            self._pending.pop(key, None)
            self.line("(the answer is being generated again)", "dim")
            return
        self._markdown(self._pending.pop(key, ""))

    def _on_tool_info(self, e: Event) -> None:
        for raw in e.get("items") or []:
            self.item(ApprovalItem.from_json(raw))

    def _on_approve_request(self, e: Event) -> None:
        self._on_tool_info(e)

    def _on_tool_output_chunk(self, e: Event) -> None:
        self._streamed.add(str(e.get("call_id")))
        text = str(e.get("text") or "")
        self.console.print(Text(text, style="dim"), end="", soft_wrap=True, highlight=False)
        if text:
            self._at_line_start = text.endswith("\n")

    def _on_tool_result(self, e: Event) -> None:
        name, output = str(e.get("name") or "tool"), str(e.get("output") or "")
        if e.get("is_error"):
            self.line(f"✗ {name}: {_clip(output)}", "red")
        elif str(e.get("call_id")) in self._streamed or not output:
            self.line(f"✓ {name}", "green")
        else:
            self.line(f"✓ {name}", "green")
            self.line(_clip(output), "dim")

    def _on_verdict(self, e: Event) -> None:
        self.verdict(e.get("verdict") or {}, prefix=f"  {e.get('call_id')}: judge says ")

    def _on_output_warning(self, e: Event) -> None:
        redacted = ", ".join(f"{n} × {kind}" for kind, n in (e.get("redacted") or {}).items())
        signs = "; ".join(e.get("signs") or [])
        said = [
            f"redacted {redacted}" if redacted else "",
            f"injection signs ({signs}): the model was told" if signs else "",
        ]
        self.line(f"output guard ({e.get('name')}): {'; '.join(s for s in said if s)}", "yellow")

    def _on_approval_resolved(self, e: Event) -> None:
        verdict = "approved" if e.get("approved") else "denied"
        if e.get("always"):
            verdict = "always approved"
        who = f" by {e.get('by')}" if e.get("by") else ""
        via = f" via {e.get('via')}" if e.get("via") else ""
        feedback = f" — {e.get('feedback')}" if e.get("feedback") else ""
        self.line(f"{verdict}{who}{via}{feedback}", "dim")

    def _on_message(self, e: Event) -> None:
        if e.get("origin"):  # a person's own message is on their screen already
            self.line(f"[{e.get('origin')}] {e.get('content')}", "magenta")

    def _on_compaction_started(self, e: Event) -> None:
        self.flush()
        self.line(f"(compacting: summarising {e.get('messages')} earlier message(s))", "dim")

    def _on_compaction_done(self, e: Event) -> None:
        if e.get("error"):
            self.line(f"(compaction failed: {e.get('error')})", "yellow")
            return
        self.line(f"({e.get('count')} earlier messages summarised: /summary shows the summary)", "dim")

    def _on_turn_queued(self, e: Event) -> None:
        self.line("(queued: it starts when the running turn ends)", "dim")

    def _on_error(self, e: Event) -> None:
        self.line(f"error: {e.get('message')}", "bold red")

    def _on_cancelled(self, e: Event) -> None:
        self.flush()
        self.line("turn cancelled", "yellow")

    def _on_watch(self, e: Event) -> None:
        watch = e.get("watch") or {}
        self.line(f"watch {watch.get('name')}: {watch.get('status')}", "magenta")

    def _on_preview(self, e: Event) -> None:
        self.line(f"preview: {e.get('title')} (GET /v1/api/previews/{e.get('preview_id')})", "dim")

    def _on_replay_truncated(self, e: Event) -> None:
        self.line("(some events are no longer in the log: /history shows the stored conversation)", "yellow")

    def _on_workstream_deleted(self, e: Event) -> None:
        self.line("this workstream was deleted", "bold red")

    def _on_subagent(self, e: Event) -> None:
        inner = Event.from_json(e.get("event") or {})
        prefix = f"[sub-agent {str(e.get('child_ws_id'))[:8]}] "
        if inner.type in ("tool_info", "approve_request"):
            for raw in inner.get("items") or []:
                self.item(ApprovalItem.from_json(raw), prefix)
        elif inner.type == "tool_result":
            mark = "✗" if inner.get("is_error") else "✓"
            self.line(f"{prefix}{mark} {inner.get('name')}", "dim")

    # -- output --------------------------------------------------------------------

    def _markdown(self, text: str) -> None:
        if text.strip():
            self._end_line()
            self.console.print(Markdown(text))

    def _end_line(self) -> None:
        if not self._at_line_start:
            self.console.print()
            self._at_line_start = True


def _complete_blocks(text: str) -> tuple[str, str]:
    """Split streamed text after its last paragraph break outside a code fence: (ready, rest)."""
    cut, fenced, pos = -1, False, 0
    for line in text.splitlines(keepends=True):
        pos += len(line)
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and not line.strip() and line.endswith("\n") and pos < len(text) + 1:
            cut = pos
    if cut <= 0:
        return "", text
    return text[:cut], text[cut:]


def _clip(text: str) -> str:
    lines = text.splitlines()
    shown = "\n".join(lines[:RESULT_LINES])
    return shown + (f"\n… {len(lines) - RESULT_LINES} more lines" if len(lines) > RESULT_LINES else "")


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in _clip(text).splitlines())


def rule_text(rule: dict[str, Any]) -> str:
    """An admin's policy rule as one line: `policy: asks a person for bash `git push*` — reason`."""
    what = f"{rule.get('tool')} `{rule['command']}`" if rule.get("command") else str(rule.get("tool"))
    effect = {"ask": "asks a person", "deny": "denies", "allow": "allows"}.get(str(rule.get("effect")), "")
    reason = f" — {rule['reason']}" if rule.get("reason") else ""
    return f"policy: {effect} for {what}{reason}"


def verdict_text(verdict: dict[str, Any]) -> str:
    """The intent judge's verdict as one line: `risk high: runs a script ... (heuristic, 90% sure)`."""
    confidence = verdict.get("confidence")
    sure = f", {round(float(confidence) * 100)}% sure" if isinstance(confidence, int | float) else ""
    return f"risk {verdict.get('risk')}: {verdict.get('reason')} ({verdict.get('by')}{sure})"
