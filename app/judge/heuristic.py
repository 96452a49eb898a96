"""The intent judge's first tier: a verdict on a call from what it asks, with no model.

A call that waits for a person carries a verdict (risk low / medium / high, a one-line reason, a
confidence) to help that person decide, and with `smart_approve` a low-risk call needs no person
at all (docs/policies.md#the-intent-judge). This tier is rules over the call's tool and
arguments, instant and always there; a `[roles] judge` model may give a second opinion later
(app/judge/model.py), never holding the turn back.

The rules lean to caution: `low` only where the call can only read (every simple command of a
bash script is a known reader, with no redirection into a file), `high` where it is known to
destroy, escalate, publish or run what it downloads; everything else is `medium`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from app.policies.patterns import simple_commands

LOW, MEDIUM, HIGH = "low", "medium", "high"
RISKS = (LOW, MEDIUM, HIGH)
HEURISTIC = "heuristic"


@dataclass(frozen=True)
class Verdict:
    risk: str
    reason: str
    confidence: float
    by: str = HEURISTIC

    def record(self) -> dict[str, Any]:
        """As a call stores it (ToolCall.verdict) and events and the API show it."""
        return {"risk": self.risk, "reason": self.reason, "confidence": self.confidence, "by": self.by}


# Programs that only read, and never change anything, whatever their arguments (except those
# listed in _WRITING_FLAGS).
_READERS = frozenset(
    [
        "ls",
        "cat",
        "head",
        "tail",
        "wc",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "ag",
        "find",
        "pwd",
        "echo",
        "printf",
        "which",
        "whereis",
        "type",
        "file",
        "stat",
        "du",
        "df",
        "tree",
        "sort",
        "uniq",
        "cut",
        "tr",
        "nl",
        "column",
        "diff",
        "cmp",
        "comm",
        "jq",
        "yq",
        "date",
        "uname",
        "whoami",
        "id",
        "hostname",
        "basename",
        "dirname",
        "realpath",
        "readlink",
        "md5sum",
        "sha1sum",
        "sha256sum",
        "sha512sum",
        "less",
        "more",
        "true",
        "false",
        "test",
        "[",
        "seq",
        "env",
        "printenv",
        "locale",
        "uptime",
        "free",
        "ps",
        "pgrep",
        "lsof",
        "hexdump",
        "xxd",
        "od",
        "strings",
        "awk",
        "sed",
    ]
)
# What makes a reader write or run something after all.
_WRITING_FLAGS = {
    "find": re.compile(r"\s-(?:delete|exec|execdir|ok|okdir|fprint\w*)\b"),
    "sed": re.compile(r"\s-(?:[a-zA-Z]*i|-in-place)"),
    "awk": re.compile(r"system\s*\(|print\s*>|\|\s*\""),
    "sort": re.compile(r"\s-(?:o|-output)\b"),
}
_GIT_READING = frozenset(
    [
        "status",
        "log",
        "diff",
        "show",
        "branch",
        "remote",
        "describe",
        "rev-parse",
        "ls-files",
        "blame",
        "shortlog",
        "tag",
    ]
)

# Known destruction, escalation, publication, or running what was fetched: (pattern, reason).
_DANGER = [
    (re.compile(r"\bsudo\b|\bsu\s+-|\bdoas\b"), "asks for root (sudo)"),
    (
        re.compile(r"\b(?:curl|wget)\b[^|;&]*\|\s*(?:sudo\s+)?(?:ba|z|k|da)?sh\b"),
        "runs a script straight from the network",
    ),
    (re.compile(r"\bgit\s+push\b.*(?:\s-f\b|--force)"), "force-pushes, rewriting a shared branch"),
    (
        re.compile(r"\bgit\s+(?:reset\s+--hard|clean\s+-\S*f)"),
        "throws away uncommitted work (git reset --hard / clean -f)",
    ),
    (re.compile(r"\bmkfs\b|\bdd\b[^|;&]*\bof=/dev/|>\s*/dev/(?:sd|nvme|hd)"), "writes to a disk device"),
    (
        re.compile(r"\bchmod\s+(?:-\S+\s+)*(?:-R\s+)?0?777\b|\bchown\s+-R\b"),
        "opens up or re-owns files wholesale",
    ),
    (
        re.compile(r"\b(?:shutdown|reboot|halt|poweroff)\b|\bkill\s+-9\s+-1\b|:\(\)\s*\{"),
        "stops the machine or every process",
    ),
    (
        re.compile(r"\b(?:DROP\s+(?:TABLE|DATABASE|SCHEMA)|TRUNCATE\s+TABLE)\b", re.IGNORECASE),
        "drops or empties database tables",
    ),
    (
        re.compile(
            r"\b(?:npm|yarn|pnpm)\s+publish\b|\btwine\s+upload\b|\bcargo\s+publish\b|\bgh\s+release\s+create\b"
        ),
        "publishes a package or release",
    ),
    (
        re.compile(r"\b(?:kubectl|helm)\s+(?:delete|uninstall)\b|\bterraform\s+(?:destroy|apply)\b"),
        "changes live infrastructure",
    ),
    (
        re.compile(r"(?:^|\s)(?:/etc/|~/\.ssh/|\$HOME/\.ssh/|/root/)\S*\s*$|>\s*(?:/etc/|~/\.ssh/)"),
        "reaches SSH keys or system configuration",
    ),
]
_SENSITIVE_PATH = re.compile(
    r"(?:^|/)(?:\.git/|\.ssh/|\.env(?:\.|$)|\.aws/|\.netrc$|id_[a-z0-9]+$)|^/etc/|^/root/"
)
_MCP_DESTRUCTIVE = re.compile(
    r"(?:^|_)(?:delete|remove|drop|destroy|purge|push|deploy|publish|send|transfer|pay)", re.IGNORECASE
)
_MCP_READING = re.compile(
    r"(?:^|_)(?:get|list|read|search|find|fetch|query|describe|show|view)(?:_|$)", re.IGNORECASE
)


def judge(func_name: str, args: Any) -> Verdict:
    """The heuristic verdict on a call of `func_name` with `args` (as the model sent them)."""
    args = args if isinstance(args, dict) else {}
    if func_name in ("bash", "watch"):
        command = args.get("command")
        return _bash(command) if isinstance(command, str) else Verdict(MEDIUM, "no command to judge", 0.3)
    if func_name in ("write_file", "edit_file"):
        path = args.get("path")
        if isinstance(path, str) and _SENSITIVE_PATH.search(path):
            return Verdict(HIGH, f"writes {_short(path)}: a credential, repository or system file", 0.8)
        return Verdict(MEDIUM, f"changes {_short(path) if isinstance(path, str) else 'a file'}", 0.7)
    if func_name.startswith("mcp__"):
        tool = func_name.rsplit("__", 1)[-1]
        if _MCP_DESTRUCTIVE.search(tool):
            return Verdict(HIGH, f"an MCP tool named to delete, publish or send ({tool})", 0.6)
        if _MCP_READING.search(tool):
            return Verdict(LOW, f"an MCP tool named to read ({tool})", 0.5)
        return Verdict(MEDIUM, f"an MCP tool ({tool}) whose effect its name does not say", 0.4)
    if func_name in ("task_agent", "spawn_agent"):
        return Verdict(MEDIUM, "starts a sub-agent, whose own calls are judged as they come", 0.6)
    return Verdict(MEDIUM, f"{func_name}: no rule for this tool", 0.3)


def _bash(command: str) -> Verdict:
    for pattern, reason in _DANGER:
        if pattern.search(command):
            return Verdict(HIGH, reason, 0.9)
    parts = simple_commands(command)
    if any(_removes_a_tree(part) for part in parts):
        return Verdict(HIGH, "deletes a whole tree (rm -r on /, ~, * or .)", 0.9)
    if not parts:
        return Verdict(LOW, "sets variables or runs a wrapper (env, time) alone", 0.8)
    if _writes_a_file(command):
        return Verdict(MEDIUM, "writes a file (output redirected with >)", 0.7)
    not_reading = [part for part in parts if not _reads_only(part)]
    if not not_reading:
        programs = ", ".join(dict.fromkeys(part.split()[0] for part in parts))
        return Verdict(LOW, f"only reads ({_short(programs, 60)})", 0.8)
    return Verdict(MEDIUM, f"runs {_short(not_reading[0].split()[0], 40)}, which may change files", 0.6)


# What `rm -r` must not be pointed at: the root, a home, everything here or above.
_WHOLE_TREES = frozenset({".", "./", "..", "../", "*", "./*", "~", "~/", "~/*", "$HOME", "$HOME/", "$HOME/*"})


def _removes_a_tree(part: str) -> bool:
    """`rm` with a recursive flag on an absolute path, a home, `*`, `.` or `..`. Words, not a
    pattern: a pattern over flags and targets backtracks for minutes on `rm -rrrr...`."""
    words = part.split()
    if not words or words[0].rsplit("/", 1)[-1] != "rm":
        return False
    flags = [w for w in words[1:] if w.startswith("-") and w != "--"]
    recursive = any(w == "--recursive" or (not w.startswith("--") and ("r" in w or "R" in w)) for w in flags)
    targets = [w.strip("'\"") for w in words[1:] if not w.startswith("-")]
    return recursive and any(t.startswith("/") or t in _WHOLE_TREES for t in targets)


def _reads_only(part: str) -> bool:
    words = part.split()
    program = words[0].rsplit("/", 1)[-1]
    if program == "git":
        return (
            len(words) > 1 and words[1] in _GIT_READING and not re.search(r"\s-(?:d|D|m|M)\b|--delete", part)
        )
    if program not in _READERS:
        return False
    writing = _WRITING_FLAGS.get(program)
    return writing is None or not writing.search(part)


def _writes_a_file(command: str) -> bool:
    """An output redirection into a file (not `2>&1`, `>/dev/null` or a here-document's `<<`)."""
    for match in re.finditer(r"(?<![<>&0-9])(?:[0-9]?>>?|&>>?)\s*(\S+)", command):
        target = match.group(1)
        if not (target.startswith("&") or target in ("/dev/null", "/dev/stdout", "/dev/stderr")):
            return True
    return False


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
