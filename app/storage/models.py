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
    auto_approve_tools: list[str] = Field(default_factory=list, sa_column=Column(SafeJSON, nullable=False))
    read_paths: list[str] = Field(default_factory=list, sa_column=Column(SafeJSON, nullable=False))
    # Tools that tool search has brought into view for this workstream; they stay offered.
    expanded_tools: list[str] = Field(
        default_factory=list, sa_column=Column(SafeJSON, nullable=False, server_default="[]")
    )
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


class ApiToken(SQLModel, table=True):
    __tablename__ = "api_tokens"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=200)
    token_hash: str = Field(max_length=64, unique=True)
    created_at: datetime = Field(default_factory=utcnow)
    # None: a token made before users existed, which speaks for the operator (app/users/tokens.py).
    user_id: str | None = Field(default=None, foreign_key="users.id", index=True, max_length=32)
    scopes: list[str] = Field(
        default_factory=list, sa_column=Column(SafeJSON, nullable=False, server_default="[]")
    )
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
