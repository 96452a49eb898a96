"""The tables. Everything a client relies on lives here, never only in a process."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Column, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.storage.types import SafeJSON, SafeText


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

    id: str = Field(primary_key=True, max_length=32)
    name: str = Field(max_length=200)
    kind: str = Field(default="interactive", max_length=32)
    parent_id: str | None = Field(default=None, max_length=32)
    model: str | None = Field(default=None, max_length=200)
    auto_approve: bool = False
    auto_approve_tools: list[str] = Field(default_factory=list, sa_column=Column(SafeJSON, nullable=False))
    read_paths: list[str] = Field(default_factory=list, sa_column=Column(SafeJSON, nullable=False))
    # Tools that tool search has brought into view for this workstream; they stay offered.
    expanded_tools: list[str] = Field(
        default_factory=list, sa_column=Column(SafeJSON, nullable=False, server_default="[]")
    )
    working_dir: str = Field(sa_column=Column(SafeText, nullable=False))
    state: str = Field(default=WorkstreamState.IDLE, max_length=16)
    active_turn_id: str | None = Field(default=None, max_length=32)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    # The active skill (app/skills): its name, and its content as rendered when it was chosen.
    skill: str | None = Field(default=None, max_length=200)
    skill_content: str | None = Field(default=None, sa_column=Column(SafeText))


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
    created_at: datetime = Field(default_factory=utcnow)


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


class ApiToken(SQLModel, table=True):
    __tablename__ = "api_tokens"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=200)
    token_hash: str = Field(max_length=64, unique=True)
    created_at: datetime = Field(default_factory=utcnow)


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
    """A skill: instructions a workstream can take on. `origin` is `manual` (the admin API, an
    import) or `mcp` (synced from an MCP server's prompts: `readonly`, owned by that sync)."""

    __tablename__ = "prompt_templates"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=64, unique=True)
    description: str = Field(default="", sa_column=Column(SafeText, nullable=False))
    content: str = Field(sa_column=Column(SafeText, nullable=False))
    tags: list[str] = Field(default_factory=list, sa_column=Column(SafeJSON, nullable=False))
    category: str = Field(default="", max_length=100)
    risk_level: str = Field(default="low", max_length=16)
    activation: str = Field(default="manual", max_length=16)
    origin: str = Field(default="manual", max_length=16)
    mcp_server: str | None = Field(default=None, max_length=200)
    readonly: bool = False
    enabled: bool = True
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
