"""The tables. Everything a client relies on lives here, never only in a process."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Column, Index, LargeBinary, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from app.storage.types import ExactText, SafeJSON, SafeText


def utcnow() -> datetime:
    return datetime.now(UTC)


class WorkstreamState(StrEnum):
    IDLE = "idle"
    THINKING = "thinking"
    RUNNING = "running"
    ATTENTION = "attention"
    ERROR = "error"


class NameOrigin(StrEnum):
    DEFAULT = "default"  # "workstream 1a2b3c": the titler may replace it
    USER = "user"  # given at creation or by a rename
    TITLE = "title"  # written by the titler from the first exchange


class TurnStatus(StrEnum):
    QUEUED = "queued"
    ACTIVE = "active"
    DONE = "done"
    CANCELLED = "cancelled"
    ERROR = "error"


class TurnPhase(StrEnum):
    """Where an active turn stands; `model` and `tools` are held by a task."""

    WAITING = "waiting"  # queued, not started
    MODEL = "model"
    APPROVAL = "approval"  # parked: no worker holds it
    TOOLS = "tools"
    AWAITING = "awaiting"  # its batch waits for calls that finish later: no worker holds it
    FINISHED = "finished"


class CallStatus(StrEnum):
    ERROR = "error"  # prepare refused it; never executed
    PENDING = "pending"  # waits for a person
    APPROVED = "approved"
    DENIED = "denied"
    RUNNING = "running"  # marked before it runs: a call runs at most once
    WAITING = "waiting"  # its execute phase ended, its outcome comes later (a sub-agent)
    DONE = "done"
    INTERRUPTED = "interrupted"  # found running after its worker died
    CANCELLED = "cancelled"


FINAL_CALL_STATUSES = frozenset(
    {CallStatus.ERROR, CallStatus.DENIED, CallStatus.DONE, CallStatus.INTERRUPTED, CallStatus.CANCELLED}
)


class Workstream(SQLModel, table=True):
    __tablename__ = "workstreams"
    __table_args__ = (Index("uq_workstreams_parent_call_row", "parent_call_row", unique=True),)

    id: str = Field(primary_key=True, max_length=32)
    name: str = Field(max_length=200)
    kind: str = Field(default="interactive", max_length=32)
    parent_id: str | None = Field(default=None, max_length=32, index=True)
    model: str | None = Field(default=None, max_length=200)
    auto_approve: bool = False
    # The intent judge may approve its low-risk calls (app/judge): decided_how "smart".
    smart_approve: bool = False
    # Its calls that wait for a person are pushed to its owner's channels (app/approval_links.py).
    notify_approvals: bool = False
    auto_approve_tools: list[str] = Field(default_factory=list, sa_column=Column(SafeJSON, nullable=False))
    # Tools its API client declared and answers itself (app/tools/client_tools.py): name,
    # description, parameters; a call to one waits for POST .../tool_outputs.
    client_tools: list[dict[str, Any]] = Field(
        default_factory=list, sa_column=Column(SafeJSON, nullable=False)
    )
    read_paths: list[str] = Field(default_factory=list, sa_column=Column(SafeJSON, nullable=False))
    # Tools that tool search has brought into view for this workstream; they stay offered.
    expanded_tools: list[str] = Field(default_factory=list, sa_column=Column(SafeJSON, nullable=False))
    working_dir: str = Field(sa_column=Column(SafeText, nullable=False))
    # Its own tool search settings ({"mode", "threshold", "max_results"}, each optional) over [tools]'.
    tool_search: dict[str, Any] | None = Field(default=None, sa_column=Column(SafeJSON))
    state: str = Field(default=WorkstreamState.IDLE, max_length=16)
    active_turn_id: str | None = Field(default=None, max_length=32)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    # A task sub-agent (kind `task`): the parent's turn and `task_agent` call it answers
    # (`parent_call_row` is that call's row: one child per call, whatever redelivers),
    # and, once its turn has ended, the answer recorded for that call (the fan-in).
    parent_turn_id: str | None = Field(default=None, max_length=32, index=True)
    parent_call_id: str | None = Field(default=None, max_length=200)
    parent_call_row: int | None = Field(default=None)  # unique: uq_workstreams_parent_call_row
    task_output: str | None = Field(default=None, sa_column=Column(SafeText))
    task_is_error: bool = False
    # The user it belongs to (app/users/ownership.py); None: the operator's, seen by admins only.
    owner_id: str | None = Field(default=None, max_length=32, index=True)
    # The active skill (app/skills): its name, and its content as rendered when it was chosen.
    skill: str | None = Field(default=None, max_length=200)
    skill_content: str | None = Field(default=None, sa_column=Column(SafeText))
    # Where its commands may connect (app/sandbox/settings.py NETWORKS): none, proxy or host.
    network: str = Field(default="none", max_length=16, sa_column_kwargs={"server_default": "none"})
    # A fork (app/engine/life/branches.py): the workstream it was copied from, and the id there of
    # the last message it copied.
    forked_from: str | None = Field(default=None, max_length=32)
    forked_at: int | None = None
    # Bumped by every rewind and restore: a worker's copy of the conversation is then read anew.
    history_version: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    # Closed (app/coordination/children.py close): its turns were stopped and it takes no more
    # messages; its history stays. A coordinator's close closes its children too.
    closed_at: datetime | None = None
    # The sidebar's (migration 0014): kept on top, or out of the list until asked for.
    pinned: bool = Field(default=False, sa_column_kwargs={"server_default": "0"})
    archived_at: datetime | None = None
    # Who named it (NameOrigin): only a default name is replaced by a title (app/titles.py).
    name_origin: str = Field(default="user", max_length=16, sa_column_kwargs={"server_default": "user"})


class Turn(SQLModel, table=True):
    __tablename__ = "turns"
    __table_args__ = (UniqueConstraint("ws_id", "idempotency_key"),)

    id: str = Field(primary_key=True, max_length=32)
    ws_id: str = Field(foreign_key="workstreams.id", index=True, max_length=32)
    status: str = Field(default=TurnStatus.QUEUED, max_length=16, index=True)
    phase: str = Field(default=TurnPhase.WAITING, max_length=16)
    message: str = Field(sa_column=Column(SafeText, nullable=False))
    origin: str = Field(default="user", max_length=32)
    idempotency_key: str | None = Field(default=None, max_length=200)  # a retried send finds its turn
    # The attachments sent with the message (app/attachments): its user message carries them.
    attachments: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(SafeJSON))
    step: int = 0  # model steps taken
    attempt: int = 0  # fencing token: bumped by every claim
    step_claims: int = 0  # claims of the current phase; >1 means a retry
    # Attempts at the current phase that raised (a passing fault each): the poison guard's count.
    step_failures: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    heartbeat_at: datetime | None = None
    enqueued_at: datetime | None = None
    phase_started_at: datetime | None = None
    cancel_requested: bool = False
    feedback: str | None = Field(default=None, sa_column=Column(SafeText))
    error: str | None = Field(default=None, sa_column=Column(SafeText))
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    ended_at: datetime | None = None


class Message(SQLModel, table=True):
    __tablename__ = "messages"

    id: int | None = Field(default=None, primary_key=True)
    ws_id: str = Field(foreign_key="workstreams.id", index=True, max_length=32)
    turn_id: str | None = Field(default=None, max_length=32)
    role: str = Field(max_length=16)
    content: str | None = Field(default=None, sa_column=Column(SafeText))
    reasoning: str | None = Field(default=None, sa_column=Column(SafeText))  # assistant: shown, never re-sent
    tool_calls: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(SafeJSON))
    tool_call_id: str | None = Field(default=None, max_length=200)
    name: str | None = Field(default=None, max_length=200)
    is_error: bool = False
    usage: dict[str, int] | None = Field(default=None, sa_column=Column(SafeJSON))  # assistant: tokens
    # assistant: blocks the provider ran itself (Anthropic's tool search and its tool references),
    # sent back as they came on every later step.
    server_blocks: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(SafeJSON))
    created_at: datetime = Field(default_factory=utcnow)
    # user: who wrote it when not a person ("watch": a watch's result); None for a person
    origin: str | None = Field(default=None, max_length=32)
    # The branch a rewind moved it to (app/engine/life/branches.py); None: in the conversation.
    branch_id: str | None = Field(default=None, max_length=32, index=True)
    # role "summary" (app/compaction): the model is sent it in place of the conversation's
    # messages up to `covers_to` (ids); they stay stored. `covers_count`: how many it replaced.
    covers_from: int | None = None
    covers_to: int | None = None
    covers_count: int | None = None
    # assistant: the model that gave it ([models.NAME]): the workstream's, or a fallback's
    model: str | None = Field(default=None, max_length=200)
    # user: attachments sent with it, as the model is sent them (app/attachments): each
    # {attachment_id, filename, media_type, size}
    attachments: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(SafeJSON))


class Branch(SQLModel, table=True):
    """Messages a rewind took out of a workstream's conversation (app/engine/life/branches.py):
    every one after `after_message_id`, each still a row of `messages` marked with this id."""

    __tablename__ = "branches"

    id: str = Field(primary_key=True, max_length=32)
    ws_id: str = Field(foreign_key="workstreams.id", index=True, max_length=32)
    after_message_id: int  # the last message the conversation kept (0: none)
    reason: str = Field(max_length=16)  # rewind, edit, retry, restore
    created_by: str | None = Field(default=None, max_length=200)
    created_at: datetime = Field(default_factory=utcnow)
    message_count: int
    preview: str = Field(sa_column=Column(SafeText, nullable=False))  # its first message, cut short
    idempotency_key: str | None = Field(default=None, max_length=200)  # an edit's: its retry finds it


class ToolCall(SQLModel, table=True):
    __tablename__ = "tool_calls"
    __table_args__ = (UniqueConstraint("turn_id", "step", "call_id"),)

    id: int | None = Field(default=None, primary_key=True)
    ws_id: str = Field(foreign_key="workstreams.id", index=True, max_length=32)
    turn_id: str = Field(foreign_key="turns.id", index=True, max_length=32)
    step: int
    position: int
    call_id: str = Field(max_length=200)
    func_name: str = Field(max_length=200)
    args: dict[str, Any] = Field(default_factory=dict, sa_column=Column(SafeJSON, nullable=False))
    header: str = Field(default="", sa_column=Column(SafeText, nullable=False))
    preview: str = Field(default="", sa_column=Column(SafeText, nullable=False))
    needs_approval: bool = True
    error: str | None = Field(default=None, sa_column=Column(SafeText))
    status: str = Field(max_length=16)
    decided_by: str | None = Field(default=None, max_length=200)
    decided_how: str | None = Field(default=None, max_length=16)  # user, always, auto, timeout, cancel
    feedback: str | None = Field(default=None, sa_column=Column(SafeText))
    output: str | None = Field(default=None, sa_column=Column(SafeText))
    is_error: bool = False
    catalog_version: str | None = Field(default=None, max_length=64)  # the tool set the model saw
    waiting_on: str | None = Field(default=None, max_length=200)  # what a `waiting` call waits for
    runner: str | None = Field(default=None, max_length=200)  # the worker process that ran it
    process_group: int | None = None  # a command's process group, while it may still run
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    decided_by_id: str | None = Field(default=None, max_length=32)  # the deciding user; None: operator
    decided_via: str | None = Field(default=None, max_length=16)  # http, websocket, cli
    # The model's arguments when the person who approved the call changed them first (`args`
    # then holds what ran); None: it ran as the model asked.
    original_args: dict[str, Any] | None = Field(default=None, sa_column=Column(SafeJSON, nullable=True))
    # The admin's tool policy rule that decided or asked for it (app/policies): kept as it read
    # then, so deleting the rule later does not lose why the call went as it did.
    policy_rule: dict[str, Any] | None = Field(default=None, sa_column=Column(SafeJSON))
    # The intent judge's verdict when the call needed a person (app/judge/heuristic.py Verdict).
    verdict: dict[str, Any] | None = Field(default=None, sa_column=Column(SafeJSON))


class ToolPolicy(SQLModel, table=True):
    """An admin's rule for tool calls (app/policies): allow, deny or ask, by tool-name pattern
    and optionally a command pattern; everyone's (`user_id` and `group_name` None), one user's, or
    the members' of one group."""

    __tablename__ = "tool_policies"

    id: str = Field(primary_key=True, max_length=32)
    effect: str = Field(max_length=8)  # allow, deny, ask
    tool: str = Field(max_length=200)  # a glob on the tool's name
    command: str | None = Field(default=None, sa_column=Column(SafeText))  # a glob on its command
    user_id: str | None = Field(default=None, foreign_key="users.id", index=True, max_length=32)
    group_name: str | None = Field(default=None, index=True, max_length=64)  # a group's members only
    reason: str | None = Field(default=None, sa_column=Column(SafeText))  # shown to the model on deny
    created_by: str | None = Field(default=None, max_length=200)
    created_at: datetime = Field(default_factory=utcnow)


class ApiToken(SQLModel, table=True):
    __tablename__ = "api_tokens"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=200)
    token_hash: str = Field(max_length=64, unique=True)
    created_at: datetime = Field(default_factory=utcnow)
    # None: a token made before users existed, which speaks for the operator (app/users/tokens.py).
    user_id: str | None = Field(default=None, foreign_key="users.id", index=True, max_length=32)
    scopes: list[str] = Field(default_factory=list, sa_column=Column(SafeJSON, nullable=False))
    kind: str = Field(default="api", max_length=16, sa_column_kwargs={"server_default": "api"})  # api, login
    expires_at: datetime | None = None
    revoked_at: datetime | None = None


class User(SQLModel, table=True):
    __tablename__ = "users"

    id: str = Field(primary_key=True, max_length=32)
    name: str = Field(max_length=64, unique=True)
    password_hash: str = Field(sa_column=Column(SafeText, nullable=False))  # argon2id, never logged
    is_admin: bool = False
    disabled_at: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)
    # The groups the user belongs to, by name (an admin sets them): a tool policy rule may be a
    # group's (app/policies). None: none.
    groups: list[str] | None = Field(default=None, sa_column=Column(SafeJSON))


class Blob(SQLModel, table=True):
    """Bytes a workstream keeps (attachments, previews), stored once per workstream and content."""

    __tablename__ = "blobs"

    ws_id: str = Field(foreign_key="workstreams.id", primary_key=True, max_length=32)
    sha256: str = Field(primary_key=True, max_length=64)
    size: int
    data: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class Attachment(SQLModel, table=True):
    """A file a person attached to a workstream; tools name it `attachment:<id>`."""

    __tablename__ = "attachments"

    id: str = Field(primary_key=True, max_length=32)
    ws_id: str = Field(foreign_key="workstreams.id", index=True, max_length=32)
    filename: str = Field(max_length=255)
    media_type: str = Field(max_length=200)
    sha256: str = Field(max_length=64)
    size: int
    created_at: datetime = Field(default_factory=utcnow)
    # A PDF's text, read when it was attached (app/attachments/pdf_text.py), for the model; why
    # there is none (encrypted, no text layer, too slow to read) in `text_note`.
    text: str | None = Field(default=None, sa_column=Column(SafeText))
    pages: int | None = None
    text_note: str | None = Field(default=None, max_length=200)
    # An image described by the `[roles] perception` model for a model that cannot see it.
    description: str | None = Field(default=None, sa_column=Column(SafeText))


class Preview(SQLModel, table=True):
    """Something open_preview showed: its kind, title and content, served inert to clients."""

    __tablename__ = "previews"

    id: str = Field(primary_key=True, max_length=32)
    ws_id: str = Field(foreign_key="workstreams.id", index=True, max_length=32)
    call_id: str | None = Field(default=None, max_length=200)
    kind: str = Field(max_length=16)
    title: str = Field(sa_column=Column(SafeText, nullable=False))
    media_type: str = Field(max_length=200)
    source: str = Field(sa_column=Column(SafeText, nullable=False))  # the URL, path or attachment
    base_url: str | None = Field(default=None, sa_column=Column(SafeText))  # a page's final URL
    sha256: str = Field(max_length=64)
    size: int
    signing_key: str = Field(max_length=64)  # signs its content links; never leaves the service
    created_at: datetime = Field(default_factory=utcnow)


class WatchStatus(StrEnum):
    ACTIVE = "active"
    FIRED = "fired"  # its stop_on held (or, without one, its output changed)
    EXHAUSTED = "exhausted"  # max_polls reached first
    CANCELLED = "cancelled"


class Watch(SQLModel, table=True):
    """A command polled on a schedule for a workstream (the `watch` tool); beat claims due ones."""

    __tablename__ = "watches"
    __table_args__ = (
        # Two active watches of one workstream never share a name; ended ones may.
        Index(
            "uq_watches_active_name",
            "ws_id",
            "name",
            unique=True,
            sqlite_where=text("status = 'active'"),
            postgresql_where=text("status = 'active'"),
        ),
    )

    id: str = Field(primary_key=True, max_length=32)
    ws_id: str = Field(foreign_key="workstreams.id", index=True, max_length=32)
    name: str = Field(max_length=200)
    command: str = Field(sa_column=Column(SafeText, nullable=False))
    poll_every: int  # seconds
    stop_on: str | None = Field(default=None, sa_column=Column(SafeText))
    max_polls: int
    polls: int = 0
    status: str = Field(default=WatchStatus.ACTIVE, max_length=16, index=True)
    next_poll_at: datetime = Field(index=True)
    # The claim: a token per beat pass that took it, and when; a poll runs at most once per claim.
    claim_token: str | None = Field(default=None, max_length=32)
    claimed_at: datetime | None = None
    poll_started_at: datetime | None = None
    # Compared with the next poll's output: read back exactly as written, NULs included.
    last_output: str | None = Field(default=None, sa_column=Column(ExactText))
    last_exit_code: int | None = None
    last_polled_at: datetime | None = None
    # stop_on failed to evaluate on the last poll, or the last poll never finished
    last_error: str | None = Field(default=None, sa_column=Column(SafeText))
    result: str | None = Field(default=None, sa_column=Column(SafeText))  # the message it ended with
    created_by: str | None = Field(default=None, max_length=200)  # the call that created it
    created_at: datetime = Field(default_factory=utcnow)
    ended_at: datetime | None = None


class McpServer(SQLModel, table=True):
    """An MCP server added through the admin API. `env` and `headers` are write-only there."""

    __tablename__ = "mcp_servers"

    name: str = Field(primary_key=True, max_length=40)
    transport: str = Field(max_length=16)
    command: str | None = Field(default=None, sa_column=Column(SafeText))
    args: list[str] = Field(default_factory=list, sa_column=Column(SafeJSON, nullable=False))
    env: dict[str, str] = Field(default_factory=dict, sa_column=Column(SafeJSON, nullable=False))
    cwd: str | None = Field(default=None, sa_column=Column(SafeText))
    url: str | None = Field(default=None, sa_column=Column(SafeText))
    headers: dict[str, str] = Field(default_factory=dict, sa_column=Column(SafeJSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class Memory(SQLModel, table=True):
    """A note the memory tool keeps. Unique by name within its scope: `scope_key` is "" for
    `global`, the workstream id for `workstream`, the owner (app/memory/owners.py) for `user`."""

    __tablename__ = "memories"
    __table_args__ = (UniqueConstraint("scope", "scope_key", "name"),)

    id: str = Field(primary_key=True, max_length=32)
    name: str = Field(max_length=64)
    description: str = Field(default="", sa_column=Column(SafeText, nullable=False))
    content: str = Field(sa_column=Column(SafeText, nullable=False))
    type: str = Field(default="project", max_length=16)
    scope: str = Field(default="global", max_length=16)
    scope_key: str = Field(default="", max_length=200)
    ws_id: str | None = Field(default=None, max_length=32, index=True)  # workstream scope: whose
    owner_id: str | None = Field(default=None, max_length=200, index=True)  # user scope: whose
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class PromptTemplate(SQLModel, table=True):
    """A skill: instructions a workstream can take on, written by a person (`origin` manual: the
    admin API, an import) or an MCP server's prompt (`origin` mcp: read-only, kept in step with
    the server by the workers)."""

    __tablename__ = "prompt_templates"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=200, unique=True)
    description: str = Field(default="", sa_column=Column(SafeText, nullable=False))
    content: str = Field(default="", sa_column=Column(SafeText, nullable=False))
    tags: list[str] = Field(default_factory=list, sa_column=Column(SafeJSON, nullable=False))
    category: str = Field(default="", max_length=200)
    risk_level: str = Field(default="low", max_length=16)
    activation: str = Field(default="manual", max_length=16)
    origin: str = Field(default="manual", max_length=16)
    mcp_server: str | None = Field(default=None, max_length=40, index=True)
    readonly: bool = False
    enabled: bool = True
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class ServiceRecord(SQLModel, table=True):
    """A helper process that serves HTTP to the others (a channel gateway), and its heartbeat:
    a caller picks one whose heartbeat is fresh."""

    __tablename__ = "services"

    id: str = Field(primary_key=True, max_length=32)
    kind: str = Field(max_length=40, index=True)
    url: str = Field(max_length=500)
    started_at: datetime = Field(default_factory=utcnow)
    heartbeat_at: datetime = Field(default_factory=utcnow, index=True)


class ServiceKey(SQLModel, table=True):
    """A secret the service's processes share when the environment gives none (the service JWT's,
    on a local run): made once by whichever process needs it first; the primary key settles races."""

    __tablename__ = "service_keys"

    name: str = Field(primary_key=True, max_length=40)
    secret: str = Field(max_length=200)  # never logged, never shown
    created_at: datetime = Field(default_factory=utcnow)


class ChannelLink(SQLModel, table=True):
    """A place a user is reached by notify: a Discord webhook or bot channel, a JSON webhook, an
    ntfy topic. `target` holds secrets (webhook URLs carry tokens): the API shows it redacted."""

    __tablename__ = "channel_links"

    id: str = Field(primary_key=True, max_length=32)
    user_id: str = Field(foreign_key="users.id", index=True, max_length=32)
    channel_type: str = Field(max_length=16)  # discord, webhook, ntfy
    target: dict[str, Any] = Field(default_factory=dict, sa_column=Column(SafeJSON, nullable=False))
    label: str = Field(default="", max_length=200)
    created_at: datetime = Field(default_factory=utcnow)


class Notification(SQLModel, table=True):
    """One of a turn's notifications: a slot taken before the gateway is asked, marked sent when it
    went out and given back when every attempt failed, so that at most notify's MAX_PER_TURN
    succeed, across worker restarts (app/tools/notify.py)."""

    __tablename__ = "notifications"
    __table_args__ = (UniqueConstraint("turn_id", "slot"),)

    id: int | None = Field(default=None, primary_key=True)
    turn_id: str = Field(max_length=32, index=True)
    slot: int
    call_id: str | None = Field(default=None, max_length=200)
    created_at: datetime = Field(default_factory=utcnow)  # when the slot was taken
    sent_at: datetime | None = None  # None while its notification is being sent


class NotifyPermit(SQLModel, table=True):
    """A user's leave for another user's workstreams to notify them by name (app/users/permits.py)."""

    __tablename__ = "notify_permits"

    user_id: str = Field(foreign_key="users.id", primary_key=True, max_length=32)  # who is notified
    sender_id: str = Field(foreign_key="users.id", primary_key=True, max_length=32)  # whose workstreams
    created_at: datetime = Field(default_factory=utcnow)


# -- coordinators (issue 45) --------------------------------------------------------------------


class TaskStatus(StrEnum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    DONE = "done"
    CANCELLED = "cancelled"


class CoordinatorTask(SQLModel, table=True):
    """One entry of a coordinator's task list (the `tasks` tool; shown in the web client)."""

    __tablename__ = "coordinator_tasks"

    id: int | None = Field(default=None, primary_key=True)
    ws_id: str = Field(foreign_key="workstreams.id", index=True, max_length=32)
    title: str = Field(sa_column=Column(SafeText, nullable=False))
    status: str = Field(default=TaskStatus.PENDING, max_length=16)
    child_ws_id: str | None = Field(default=None, max_length=32)  # the child working on it, if any
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


# -- background shells (issue 45) --------------------------------------------------------------


class ShellStatus(StrEnum):
    RUNNING = "running"
    EXITED = "exited"
    KILLED = "killed"  # by kill_shell, the idle limit, or its workstream's close or delete
    LOST = "lost"  # its worker stopped (the shell was stopped with it); its output so far is kept


class BackgroundShell(SQLModel, table=True):
    """A bash command started with run_in_background (app/tools/commands/background.py): its
    output is stored as it comes (ShellChunk), so that any worker reads it and none loses it."""

    __tablename__ = "background_shells"

    id: str = Field(primary_key=True, max_length=32)
    ws_id: str = Field(foreign_key="workstreams.id", index=True, max_length=32)
    command: str = Field(sa_column=Column(SafeText, nullable=False))
    status: str = Field(default=ShellStatus.RUNNING, max_length=16)
    exit_code: int | None = None
    note: str | None = Field(default=None, sa_column=Column(SafeText))  # why it ended, when not by itself
    kill_requested: bool = False
    read_through: int = 0  # the last chunk id bash_output has returned
    stored_chars: int = 0
    dropped_chars: int = 0  # past the stored cap: counted, not kept
    started_at: datetime = Field(default_factory=utcnow)
    heartbeat_at: datetime = Field(default_factory=utcnow)  # renewed by the worker that runs it
    last_read_at: datetime = Field(default_factory=utcnow)  # bash_output (the idle limit's clock)
    ended_at: datetime | None = None


class ShellChunk(SQLModel, table=True):
    __tablename__ = "shell_chunks"

    id: int | None = Field(default=None, primary_key=True)
    shell_id: str = Field(foreign_key="background_shells.id", index=True, max_length=32)
    text: str = Field(sa_column=Column(SafeText, nullable=False))


# -- runs (app/jobs): a turn with a contract ------------------------------------------------


class Run(SQLModel, table=True):
    """A turn started through the runs API with a contract: its policy (what runs without a
    person), its deadline and the caller's metadata. Its status is read from the turn and its
    calls, never stored apart (app/jobs/status.py); `end_reason` says why the service itself
    ended it (timed_out, policy), written before the cancel that ends it."""

    __tablename__ = "runs"

    id: str = Field(primary_key=True, max_length=32)
    ws_id: str = Field(index=True, max_length=32)
    turn_id: str | None = Field(default=None, max_length=32, unique=True)
    owner_id: str | None = Field(default=None, max_length=32, index=True)
    policy: dict[str, Any] = Field(default_factory=dict, sa_column=Column(SafeJSON, nullable=False))
    run_metadata: dict[str, Any] = Field(
        default_factory=dict, sa_column=Column("metadata", SafeJSON, nullable=False)
    )
    timeout_s: int | None = None
    deadline_at: datetime | None = Field(default=None, index=True)
    end_reason: str | None = Field(default=None, max_length=16)
    end_note: str | None = Field(default=None, sa_column=Column(SafeText))
    created_by: str | None = Field(default=None, max_length=200)
    created_at: datetime = Field(default_factory=utcnow, index=True)
    notified_at: datetime | None = None  # its end's webhooks were recorded (app/webhooks/emitting.py)
    signing_key: str | None = Field(default=None, max_length=64)  # its decide links' (app/jobs/links.py)
    # the caller's own tools for this run (app/tools/client_tools.py), beside its workstream's
    tools: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(SafeJSON, nullable=False))
    webhook_id: str | None = Field(default=None, max_length=32)  # an endpoint that gets all its events


# -- webhooks (app/webhooks): per-user endpoints and each delivery, recorded before it is sent --


class WebhookEndpoint(SQLModel, table=True):
    """Where a user's events are POSTed, signed with `secret` (Standard Webhooks). The secret is
    shown once, when made or rotated, and never again: not in listings, logs or events."""

    __tablename__ = "webhook_endpoints"

    id: str = Field(primary_key=True, max_length=32)
    owner_id: str | None = Field(default=None, max_length=32, index=True)  # None: the operator's
    url: str = Field(sa_column=Column(SafeText, nullable=False))
    secret: str = Field(max_length=100)
    events: list[str] = Field(default_factory=list, sa_column=Column(SafeJSON, nullable=False))  # []: all
    description: str = Field(default="", max_length=200)
    created_at: datetime = Field(default_factory=utcnow)


class WebhookDelivery(SQLModel, table=True):
    """One event for one endpoint: stored with its exact body before the first attempt, then
    attempted until accepted or a day has passed. `event_key` makes recording it twice a no-op."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (UniqueConstraint("endpoint_id", "event_key"),)

    id: str = Field(primary_key=True, max_length=40)  # the webhook-id header: msg_<hex>
    endpoint_id: str = Field(max_length=32, index=True)
    event_type: str = Field(max_length=40)
    event_key: str = Field(max_length=120, index=True)  # found by key: turn.completed (app/webhooks/turns.py)
    payload: str = Field(sa_column=Column(SafeText, nullable=False))  # the body, as signed
    status: str = Field(default="pending", max_length=16, index=True)  # pending, delivered, failed
    attempts: int = 0
    next_attempt_at: datetime | None = Field(default=None, index=True)
    claimed_until: datetime | None = None  # an attempt under way (a worker died in it: retried after)
    # Sent to the workers for its next attempt: the sweep sends it again only once this passes
    # (app/webhooks/deliveries.py), so a backlog is never sent twice.
    queued_until: datetime | None = None
    last_status: int | None = None
    last_error: str | None = Field(default=None, sa_column=Column(SafeText))
    created_at: datetime = Field(default_factory=utcnow)
    delivered_at: datetime | None = None


# -- schedules (app/schedules): runs started on time, each firing claimed once --------------------


class Schedule(SQLModel, table=True):
    """A prompt run on a cron expression or every N seconds, in its timezone, in one workstream
    or a new one each time, under a run's policy. `next_fire_at` is the next time it is due."""

    __tablename__ = "schedules"

    id: str = Field(primary_key=True, max_length=32)
    owner_id: str | None = Field(default=None, max_length=32, index=True)
    cron: str | None = Field(default=None, max_length=200)
    every_s: int | None = None
    timezone: str = Field(default="UTC", max_length=64)
    prompt: str = Field(sa_column=Column(SafeText, nullable=False))
    ws_id: str | None = Field(default=None, max_length=32)  # None: a new workstream each time
    policy: dict[str, Any] = Field(default_factory=dict, sa_column=Column(SafeJSON, nullable=False))
    timeout_s: int | None = None
    paused: bool = False
    webhook_id: str | None = Field(default=None, max_length=32)  # its runs' webhook endpoint
    next_fire_at: datetime = Field(index=True)
    created_by: str | None = Field(default=None, max_length=200)
    created_at: datetime = Field(default_factory=utcnow)


class ScheduleFiring(SQLModel, table=True):
    """One firing of a schedule: the unique (schedule, time) row is its claim, so two beats or a
    restarted one never fire one time twice. `run_id` is decided by the claim (the run's id)."""

    __tablename__ = "schedule_firings"
    __table_args__ = (UniqueConstraint("schedule_id", "fire_at"),)

    id: int | None = Field(default=None, primary_key=True)
    schedule_id: str = Field(max_length=32, index=True)
    fire_at: datetime
    run_id: str = Field(max_length=32)
    started: bool = False  # its run was stored and sent
    error: str | None = Field(default=None, sa_column=Column(SafeText))
    created_at: datetime = Field(default_factory=utcnow)


class Trigger(SQLModel, table=True):
    """A secret URL (`/v1/hooks/{id}`: the id is the secret) whose POSTed JSON starts a run with
    the body as context; with `secret`, only a request signed with it (GitHub's
    X-Hub-Signature-256) is taken (app/jobs/triggers.py)."""

    __tablename__ = "triggers"

    id: str = Field(primary_key=True, max_length=32)
    owner_id: str | None = Field(default=None, max_length=32, index=True)
    prompt: str = Field(sa_column=Column(SafeText, nullable=False))
    ws_id: str | None = Field(default=None, max_length=32)  # None: a new workstream each time
    policy: dict[str, Any] = Field(default_factory=dict, sa_column=Column(SafeJSON, nullable=False))
    timeout_s: int | None = None
    secret: str | None = Field(default=None, max_length=100)  # never shown after its creation
    created_by: str | None = Field(default=None, max_length=200)
    created_at: datetime = Field(default_factory=utcnow)
