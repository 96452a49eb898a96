"""The API's request bodies, query strings and answers, as pydantic models (app/web/contract.py).

Requests are checked against these models; answers are described by them (the engine builds
them). Grouped as the routes are: workstreams and their commands, branching, attachments and
previews, accounts, memories, channels, skills, MCP, the service's own.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, RootModel, StringConstraints

from app.attachments import MAX_PER_MESSAGE as MAX_ATTACHMENTS
from app.jobs import contract as job_contract
from app.jobs import store as job_store
from app.policies import patterns as policy_patterns
from app.policies import store as policy_store
from app.settings import (
    MAX_CHANNEL_URL_CHARS,
    MAX_ID_CHARS,
    MAX_NAME_CHARS,
    MAX_PASSWORD_CHARS,
    MEMORY_MAX_CONTENT_CHARS,
    MEMORY_MAX_DESCRIPTION_CHARS,
    MEMORY_MAX_LIMIT,
)
from app.skills import fields as skill_fields
from app.tools import client_tools as client_tool_fields
from app.users import permits, tokens
from app.users.passwords import MIN_PASSWORD_CHARS
from app.web.contract import WHOLE, Answer, Body, NonBlank, Query, Text, chars, pattern

MAX_PATH_CHARS = 4096  # a path a person may give (Linux's PATH_MAX)
MAX_MESSAGE_ID = 2**31 - 1  # the id column's range: a larger number names no message
TOOL_OUTPUT_CHARS = 1024 * 1024  # a client tool's output (the model reads at most the truncation limit)
MEMORY_TYPES = Literal["user", "project", "feedback", "reference"]

# Text fields by their limits (app/web/contract.py: no NUL, no lone surrogate).
Name = Annotated[str, chars(MAX_NAME_CHARS)]
IdText = Annotated[str, chars(MAX_ID_CHARS)]
# What fits the stored column and any HTTP header (app/web/commands.py checks the header's so).
IdempotencyKey = Annotated[
    str,
    pattern(rf"^[\x20-\x7e]{{1,{MAX_NAME_CHARS}}}$", rule=f"1-{MAX_NAME_CHARS} printable ASCII characters"),
]
PathText = Annotated[str, chars(MAX_PATH_CHARS)]
UrlText = Annotated[str, chars(MAX_CHANNEL_URL_CHARS)]
Password = Annotated[str, chars(MAX_PASSWORD_CHARS)]
ServerName = Annotated[
    str, pattern(r"^(?!.*__)[A-Za-z0-9_-]{1,40}$", rule="1-40 letters, digits, '_' or '-', without '__'")
]  # no "__": it splits tool names
SkillName = Annotated[str, pattern(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", rule=skill_fields.NAME_RULE)]
UserName = Annotated[
    str,
    pattern(
        r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
        rule="1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
    ),
]  # stored in lower case
NewPassword = Annotated[str, StringConstraints(min_length=MIN_PASSWORD_CHARS, max_length=MAX_PASSWORD_CHARS)]
ScopeName = Literal["read", "write", "approve", "admin"]
_SCOPE = "(read|write|approve|admin)"
ScopeList = Annotated[
    str,
    pattern(
        rf"^ *{_SCOPE} *(, *{_SCOPE} *)*$",
        rule="scope names, comma-separated: read, write, approve, admin",
    ),
]
MessageId = Annotated[int, Field(ge=0, le=MAX_MESSAGE_ID), WHOLE]
Duration = Annotated[
    str, pattern(r"^ *[1-9][0-9]{0,5}[smhd] *$", rule="a number and a unit (s, m, h, d), e.g. 30d")
]


class Error(Answer):
    """Every error: `error` says what is wrong; `field` names the field of the request it is about."""

    error: str
    field: str | None = None
    scope: str | None = Field(None, description="403: the scope the token lacks")
    pending: list[str] | None = Field(None, description="409 on approve: the calls still pending")


class Usage(Answer):
    """Tokens as the provider reported them: one model step's, or a workstream's added up;
    cache_* keys where the provider reports them."""

    input_tokens: int
    output_tokens: int


RULE_NOTE = "the admin's policy rule that decided or asked for it"
ToolPattern = Annotated[str, pattern(policy_patterns.TOOL_PATTERN, rule=policy_patterns.TOOL_PATTERN_RULE)]


NOTIFY_APPROVALS_NOTE = (
    "calls that wait for a person are sent to its owner's notify channels with a signed link to decide them"
)
SMART_NOTE = "calls the intent judge finds low-risk run without a person, unless a policy rule asks for one"
VERDICT_NOTE = "the intent judge's verdict, when the call needed a person (docs/policies.md#the-intent-judge)"


class Verdict(Answer):
    """The intent judge's verdict on a call: how risky it looks, why, and how sure it is."""

    risk: Literal["low", "medium", "high"]
    reason: str = Field(description="one line")
    confidence: float = Field(ge=0, le=1)
    by: str = Field(description="`heuristic` (the rules), or the judge model's name")
    heuristic: dict[str, Any] | None = Field(
        None,
        description="a judge model's verdict: the heuristic one it replaced (risk, reason, confidence, by)",
    )


class PolicyRecord(Answer):
    """An admin's tool policy rule as a call records it (docs/policies.md)."""

    id: str
    effect: Literal["allow", "deny", "ask"]
    tool: str
    command: str | None = None
    user: str | None = None
    group: str | None = Field(None, description="a group's rule: the group (its members' workstreams)")
    reason: str | None = None


# -- workstreams ---------------------------------------------------------------------------------


class ToolSearch(Body):
    """This workstream's tool search settings over [tools]' (each optional)."""

    mode: Literal["auto", "on", "off"] | None = None
    threshold: Annotated[int, Field(ge=0, le=100_000), WHOLE] | None = None
    max_results: Annotated[int, Field(ge=1, le=50), WHOLE] | None = None


class NewWorkstream(Body):
    """Every field is optional; null is the same as leaving it out (its default)."""

    name: Name | None = None
    model: Name | None = Field(None, description="a configured model's name (else 400)")
    auto_approve: bool | None = None
    smart_approve: bool | None = Field(None, description=SMART_NOTE)
    notify_approvals: bool | None = Field(None, description=NOTIFY_APPROVALS_NOTE)
    working_dir: PathText | None = Field(
        None,
        description="administrators only (else 403): an existing directory inside the data root, "
        "[sandbox] working_dir_roots or TURNSTONE_WORKING_DIR (else 403 or 400); left out, the "
        "workstream gets a folder of its own",
    )
    tool_search: ToolSearch | None = None
    skill: Name | None = Field(
        None, description="an enabled skill's name (else 400): the workstream starts with it"
    )
    network: Name | None = Field(
        None,
        description="where its commands may connect (default: [sandbox] default_network): one of "
        "[sandbox] networks (else 400); host: administrators only (else 403)",
    )
    kind: Literal["interactive", "coordinator"] | None = Field(
        None,
        description="interactive (the default) or coordinator: one that runs other workstreams as "
        "its children with the coordinator tools (docs/tools.md)",
    )


class ToolItem(Answer):
    call_id: str
    func_name: str
    header: str | None = None
    preview: str | None = None
    needs_approval: bool | None = None
    error: str | None = None
    status: str | None = None
    child_ws_id: str | None = Field(None, description="a sub-agent's call: the sub-agent")
    parent_call_id: str | None = Field(None, description="a sub-agent's call: its task_agent call")
    rule: PolicyRecord | None = Field(None, description=RULE_NOTE)
    verdict: Verdict | None = Field(None, description=VERDICT_NOTE)
    args: dict[str, Any] | None = Field(
        None, description="a call waiting for a decision: its arguments (approve may run it with others)"
    )


class TurnNow(Answer):
    turn_id: str
    phase: Literal["model", "approval", "tools", "awaiting"] = Field(
        description="awaiting: its calls wait on something outside (a sub-agent); no worker holds it"
    )
    step: int
    cancel_requested: bool


class ToolCounts(Answer):
    visible: int
    total: int
    search: str | None = Field(description="the tool search tier while it is on, else null")


class Workstream(Answer):
    ws_id: str
    name: str
    kind: str
    model: str | None
    auto_approve: bool
    smart_approve: bool = Field(False, description=SMART_NOTE)
    notify_approvals: bool = Field(False, description=NOTIFY_APPROVALS_NOTE)
    auto_approve_tools: list[str]
    working_dir: str
    network: Literal["none", "proxy", "host"]
    tool_search: dict[str, Any] | None
    state: Literal["idle", "thinking", "running", "attention", "error"]
    active_turn_id: str | None
    created_at: str
    owner_id: str | None = Field(description="the user it belongs to; null: the operator's")
    skill: str | None = Field(description="the active skill's name")
    forked_from: str | None = Field(None, description="a fork: the workstream it was forked from")
    forked_at: int | None = Field(None, description="a fork: the last message id it copied")
    parent_id: str | None = Field(
        None, description="a coordinator's child, or a task sub-agent: the workstream it belongs under"
    )
    closed: bool = Field(False, description="closed: it takes no more messages")
    pinned: bool = Field(False, description="kept at the top of the list (PATCH)")
    archived: bool = Field(False, description="out of the list until archived ones are shown (PATCH)")
    last_activity_at: str | None = Field(None, description="when a turn of it last started, moved or ended")


# -- workstream settings and models (PATCH /workstreams/{id}, GET /models) --------------------


class WorkstreamChange(Body):
    """What may change after creation; the fields left out (or null) stay as they are. `model`
    and `auto_approve` only between turns (else 409); the rest at any time."""

    name: Annotated[str, chars(MAX_NAME_CHARS, blank=False)] | None = Field(
        None, description="not blank; a name given here is never replaced by a generated title"
    )
    model: Name | None = Field(None, description='a configured chat model (else 400); "": the default')
    auto_approve: bool | None = None
    smart_approve: bool | None = Field(None, description=SMART_NOTE)
    notify_approvals: bool | None = Field(None, description=NOTIFY_APPROVALS_NOTE)
    pinned: bool | None = None
    archived: bool | None = None


class ModelInfo(Answer):
    """One configured model and what it can do; never its key nor its address."""

    name: str = Field(description="the name a workstream's `model` takes")
    model: str = Field(description="the provider's model id")
    provider: Literal["openai", "anthropic", "rerank"]
    provider_family: str | None = Field(description="the server family whose wire quirks apply, when set")
    chat: bool = Field(description="can hold a conversation (a rerank-only model cannot)")
    vision: bool = Field(description="sees images")
    tools: bool = Field(description="may call tools")
    reasoning: bool = Field(description="thinks before answering (a thinking budget, or its capabilities)")
    web_search: bool = Field(description="searches the web on the provider's side")
    context_window: int | None = Field(description="tokens, where configured; null: not known here")
    default: bool = Field(description="the model a workstream without one uses")
    pdf: bool = Field(description="reads an attached PDF as the file itself (docs/attachments.md)")
    health: ModelHealth | None = Field(
        description="its server as last probed; null: not checked lately (docs/providers.md#health)"
    )


class ModelHealth(Answer):
    state: Literal["ok", "degraded"]
    reason: str | None = Field(description="degraded: why")
    checked_at: float = Field(description="Unix seconds: when its server was probed")


class ModelList(Answer):
    models: list[ModelInfo]
    default: str = Field(description="the default model's name")


class WorkstreamNow(Workstream):
    """A workstream with where its turn stands, its pending approvals and queued messages."""

    turn: TurnNow | None
    pending_approvals: list[ToolItem]
    queued_messages: int
    usage: Usage
    tools: ToolCounts
    expanded_tools: list[str]


class WorkstreamList(Answer):
    workstreams: list[Workstream]


class Deleted(Answer):
    deleted: list[str] = Field(description="the workstream and its sub-agents, deleted")


class Send(Body):
    message: NonBlank = Field(description="not empty; at most 256 KiB of UTF-8 (else 413)")
    attachments: list[IdText] | None = Field(
        None,
        max_length=MAX_ATTACHMENTS,
        description="ids of this workstream's attachments, sent to the model with the message: an "
        "image as an image, a PDF as its text, a text file as itself (docs/attachments.md)",
    )
    idempotency_key: IdempotencyKey | None = Field(
        None, description="as the Idempotency-Key header, for clients that cannot set one (a websocket)"
    )


class Sent(Answer):
    turn_id: str
    status: Literal["queued", "active", "done", "cancelled", "error"] = Field(
        description="the turn's status now: queued behind another turn, active, or (a repeated "
        "Idempotency-Key whose turn is over) how it ended"
    )


class Approve(Body):
    approved: bool
    feedback: Text | None = Field(None, description="to the model; at most 256 KiB of UTF-8 (else 413)")
    always: bool | None = None
    call_id: Name | None = Field(None, description="omit to decide every pending call (the sub-agents' too)")
    child_ws_id: IdText | None = Field(
        None, description="the sub-agent whose call call_id names, where ids could clash"
    )
    arguments: dict[str, Any] | None = Field(
        None,
        description="approve call_id with these arguments instead of the model's (checked against the "
        "tool's schema: 422 when it would refuse them; the model is told); with approved true and a "
        "call_id, never with always; at most 256 KiB of JSON (else 413)",
    )


class Decided(Answer):
    decided: list[str]
    pending: list[str]
    resumed: bool


class Cancel(Body):
    turn_id: Name | None = Field(None, description="409 unless this turn is running or queued")


class Cancelled(Answer):
    turn_id: str
    cancel_requested: bool
    status: Literal["active", "cancelled"] = Field(description="cancelled: it has ended already")


class Decision(Answer):
    approved: bool
    by: str | None = Field(
        description="who decided: a user, the operator, policy (an admin's rule), or judge (smart_approve)"
    )
    how: str | None = None
    via: str | None = None
    feedback: str | None = None
    rule: PolicyRecord | None = Field(None, description=RULE_NOTE)
    verdict: Verdict | None = Field(None, description=VERDICT_NOTE)
    arguments: dict[str, Any] | None = Field(
        None, description="present when the person who approved the call changed its arguments: what ran"
    )


class SentAttachment(Answer):
    attachment_id: str
    filename: str
    media_type: str
    size: int


class HistoryMessage(Answer):
    id: int
    turn_id: str | None
    role: Literal["user", "assistant", "tool"]
    content: str | None
    reasoning: str | None = Field(None, description="assistant: the model's reasoning")
    usage: Usage | None = None
    tool_calls: list[dict[str, Any]] | None = Field(
        None, description="assistant: the calls it asked for, in OpenAI chat form"
    )
    tool_call_id: str | None = Field(None, description="tool: the call this is the result of")
    name: str | None = Field(None, description="tool: the tool's name")
    is_error: bool | None = None
    child_ws_id: str | None = None
    decision: Decision | None = None
    origin: str | None = Field(None, description="user: present when a watch, not a person, wrote it")
    model: str | None = Field(
        None, description="assistant: the configured model that gave it (a fallback's when one answered)"
    )
    attachments: list[SentAttachment] | None = Field(None, description="user: what was sent with it")
    created_at: str


class History(Answer):
    ws_id: str
    last_event_id: int | None
    messages: list[HistoryMessage]


class Watch(Answer):
    watch_id: str
    ws_id: str
    name: str
    command: str
    poll_every: str | None = None
    poll_every_seconds: int
    stop_on: str | None
    max_polls: int
    polls: int
    status: Literal["active", "fired", "exhausted", "cancelled"]
    next_poll_at: str | None
    last_polled_at: str | None
    last_exit_code: int | None
    last_error: str | None
    created_at: str
    ended_at: str | None


class WatchList(Answer):
    ws_id: str
    watches: list[Watch]


# -- branching -------------------------------------------------------------------------------------


class Fork(Body):
    at: MessageId | None = Field(None, description="copy up to this message id")
    name: Name | None = None
    copy_folder: bool | None = Field(
        None, description="copy the folder too (else the fork gets an empty one)"
    )


class Rewind(Body):
    to: MessageId = Field(description="the last message id to keep")


class Edit(Body):
    message: NonBlank = Field(description="the new text of the user message")
    idempotency_key: IdempotencyKey | None = None


class Retry(Body):
    idempotency_key: IdempotencyKey | None = None


class Branch(Answer):
    id: str
    after_message_id: int
    reason: str
    created_by: str | None
    created_at: str
    message_count: int
    preview: str | None


class BranchList(Answer):
    branches: list[Branch]


class BranchMessages(Branch):
    messages: list[HistoryMessage]


class BranchChange(Answer):
    branch: str | None = Field(description="the branch the messages after the point went to")
    archived: int
    restored: str | None
    after_message_id: int


# -- attachments and previews ------------------------------------------------------------------


class Attachment(Answer):
    attachment_id: str
    target: str = Field(description="what tools take: attachment:<id>")
    filename: str
    media_type: str
    size: int
    created_at: str
    pages: int | None = Field(None, description="a PDF: its pages")
    text_note: str | None = Field(None, description="a PDF whose text the model is not sent: why")


class AttachmentList(Answer):
    attachments: list[Attachment]


class Preview(Answer):
    preview_id: str
    ws_id: str
    call_id: str | None
    kind: Literal["web", "pdf", "image", "table", "text", "markdown"]
    title: str
    media_type: str
    source: str
    size: int
    created_at: str
    url: str = Field(description="a signed link to the content, for expires_in seconds")
    remote_url: str | None = Field(description="web: the same page with its remote resources allowed")
    expires_in: int


class PreviewList(Answer):
    previews: list[Preview]


class PreviewLink(Query):
    exp: Annotated[str, chars(40)]
    remote: Literal["0", "1"] = "0"
    sig: Name


# -- accounts -----------------------------------------------------------------------------------


class Login(Body):
    username: Name
    password: Password


class Account(Answer):
    user_id: str
    name: str
    admin: bool
    disabled: bool
    groups: list[str] = Field(default_factory=list, description="the groups whose policy rules apply to them")
    created_at: str


class Token(Answer):
    token_id: int
    name: str
    user: str
    scopes: list[str]
    kind: str
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    active: bool


class NewToken(Token):
    token: str = Field(description="the token itself: shown this once")


class SignedIn(NewToken):
    account: Account


class LoggedOut(Answer):
    revoked: bool


class Me(Answer):
    name: str
    user_id: str | None
    scopes: list[str]
    admin: bool
    token_id: int | None
    token_kind: str | None


class UserNames(Answer):
    users: list[str]


class NotifySenders(Body):
    users: list[Name] = Field(
        max_length=permits.MAX_PERMITS, description="user names; unknown names are a 400"
    )


class TokenOwner(Query):
    user: Name | None = Field(None, description="admins: a user's tokens, or * for everyone's")


class TokenList(Answer):
    tokens: list[Token]


class CreateToken(Body):
    name: Name | None = None
    user: Name | None = Field(None, description="admins: the user it is for (default: the caller)")
    scopes: Annotated[list[ScopeName], Field(min_length=1, max_length=16)] | ScopeList | None = Field(
        None, description="at most the caller's (else 403); a list, or a comma-separated string"
    )
    expires: Duration | None = Field(None, description="a number and a unit (s, m, h, d): 30d, 12h, 90m")
    expires_in: Annotated[int, Field(ge=1, le=tokens.MAX_TOKEN_SECONDS), WHOLE] | None = Field(
        None, description="seconds"
    )


class Revoked(Answer):
    token_id: int
    revoked: bool


class UserList(Answer):
    users: list[Account]


class NewUser(Body):
    name: UserName
    password: NewPassword
    admin: bool | None = None


# account changes (the web client's Account page) --------------------------------------------


class ChangePassword(Body):
    current: Password
    new: NewPassword = Field(description="the service's password rule (else 400, or 422 naming it)")


class PasswordChanged(Answer):
    changed: bool
    sign_ins_ended: int = Field(description="the caller's other sign-ins, whose tokens were revoked")
    api_tokens_kept: int = Field(description="the caller's API tokens that still work")


class UserChange(Body):
    disabled: bool | None = Field(None, description="true: refuse the user's tokens and sign-in")
    groups: Annotated[list[UserName], Field(max_length=32)] | None = Field(
        None, description="the groups they belong to, all of them (replacing the ones they had); [] for none"
    )


# -- memories -----------------------------------------------------------------------------------


class Memory(Answer):
    id: str
    name: str
    description: str
    content: str
    type: str
    scope: str
    ws_id: str | None
    owner_id: str | None
    created_at: str
    updated_at: str


class MemoryList(Answer):
    memories: list[Memory]


class MemoryFilter(Query):
    type: MEMORY_TYPES | None = None
    scope: Literal["global", "workstream", "user"] | None = None
    workstream: IdText | None = Field(None, description="a workstream's id")
    q: Annotated[str, chars(MEMORY_MAX_CONTENT_CHARS)] | None = Field(None, description="words to search for")
    limit: int | None = Field(None, ge=1, le=MEMORY_MAX_LIMIT)


class MemoryChange(Body):
    content: Annotated[str, chars(MEMORY_MAX_CONTENT_CHARS, blank=False)] | None = None
    description: Annotated[str, chars(MEMORY_MAX_DESCRIPTION_CHARS)] | None = None
    type: MEMORY_TYPES | None = None


class MemoryDeleted(Answer):
    deleted: str


# -- notify's channels --------------------------------------------------------------------------


class Channel(Answer):
    id: str
    channel_type: Literal["discord", "webhook", "ntfy"]
    label: str
    target: str = Field(description="redacted: a target is never shown back whole")
    created_at: str


class ChannelList(Answer):
    channels: list[Channel]


class _Channel(Body):
    label: Name | None = None


class NtfyChannel(_Channel):
    channel_type: Literal["ntfy"]
    topic: Annotated[str, pattern(r"^[A-Za-z0-9_-]{1,64}$", rule="1-64 letters, digits, '-' or '_'")]


class WebhookChannel(_Channel):
    """The URL must be http(s) and a host the SSRF guard lets the gateway reach (else 422)."""

    channel_type: Literal["webhook"]
    url: Annotated[str, pattern(r"^https?://[^\u0000]+$", MAX_CHANNEL_URL_CHARS, rule="an http(s) URL")]


class DiscordWebhookChannel(_Channel):
    """A Discord webhook URL: {discord_api_base}/webhooks/ID/TOKEN (else 422)."""

    channel_type: Literal["discord"]
    webhook_url: Annotated[
        str,
        pattern(
            r"^https?://[^\u0000]+/webhooks/[0-9]{1,25}/[A-Za-z0-9_.-]{1,200}$",
            rule="a Discord webhook URL, .../webhooks/ID/TOKEN",
        ),
    ]


class DiscordBotChannel(_Channel):
    channel_type: Literal["discord"]
    channel_id: Annotated[str, pattern(r"^[0-9]{1,25}$", rule="a Discord channel id (digits)")]
    bot_token_env: (
        Annotated[
            str,
            pattern(
                r"^TURNSTONE_DISCORD_BOT_TOKEN(_[A-Z0-9_]{1,40})?$",
                rule="TURNSTONE_DISCORD_BOT_TOKEN or TURNSTONE_DISCORD_BOT_TOKEN_NAME",
            ),
        ]
        | None
    ) = None


class NewChannel(RootModel[NtfyChannel | WebhookChannel | DiscordWebhookChannel | DiscordBotChannel]):
    """A channel to link, by channel_type (docs/notify.md)."""


class ChannelDeleted(Answer):
    deleted: str


# -- tool policies (docs/policies.md) ------------------------------------------------------------


class NewPolicy(Body):
    """A rule for tool calls: allow, deny or ask, by tool-name glob and optionally command glob."""

    effect: Literal["allow", "deny", "ask"]
    tool: ToolPattern = Field(
        description="a glob on the tool's name: '*' any run of characters, '?' one (bash, mcp__git__*, web_*)"
    )
    command: Annotated[str, chars(policy_patterns.MAX_COMMAND_PATTERN_CHARS, blank=False)] | None = Field(
        None,
        description="a glob on the call's command argument (bash): a deny or ask rule matches when the "
        "command or any simple command in it does, an allow rule when every one does; at most "
        f"{policy_patterns.MAX_STARS} '*' (else 422)",
    )
    user: UserName | None = Field(
        None, description="only this user's workstreams (else everyone's); 422 if nobody has the name"
    )
    group: UserName | None = Field(
        None,
        description="only its members' workstreams (a user's `groups`); not with `user` (else 422)",
    )
    reason: Annotated[str, chars(policy_store.MAX_REASON_CHARS)] | None = Field(
        None, description="said to the model with a deny"
    )


class PolicyRule(PolicyRecord):
    user_id: str | None = None
    created_by: str | None = None
    created_at: str


class PolicyList(Answer):
    policies: list[PolicyRule] = Field(description="oldest first")


class PolicyDeleted(Answer):
    deleted: str


# -- skills -----------------------------------------------------------------------------------


class SkillFields(Body):
    """A skill as an admin writes it (checked further by app/skills/fields.py, which `skills
    import` shares)."""

    name: SkillName | None = Field(None, description=skill_fields.NAME_RULE)
    description: Annotated[str, chars(skill_fields.MAX_DESCRIPTION_CHARS)] | None = None
    content: Annotated[str, chars(skill_fields.SKILL_MAX_CONTENT_CHARS, blank=False)] | None = None
    tags: list[Annotated[str, chars(skill_fields.MAX_TAG_CHARS, blank=False)]] | None = Field(
        None, max_length=skill_fields.MAX_TAGS
    )
    category: Annotated[str, chars(skill_fields.MAX_CATEGORY_CHARS)] | None = None
    risk_level: Literal["low", "medium", "high", "critical"] | None = None
    activation: Literal["manual", "default"] | None = None
    enabled: bool | None = None


class NewSkill(SkillFields):
    name: SkillName = Field(description=skill_fields.NAME_RULE)
    content: Annotated[str, chars(skill_fields.SKILL_MAX_CONTENT_CHARS, blank=False)]


class Skill(Answer):
    name: str
    description: str
    tags: list[str]
    category: str
    risk_level: str
    activation: str
    origin: str
    mcp_server: str | None
    readonly: bool
    enabled: bool
    created_at: str
    updated_at: str
    content: str | None = Field(None, description="one skill's answer only, not the list's")


class SkillList(Answer):
    skills: list[Skill]


class SkillDeleted(Answer):
    deleted: str


# -- MCP servers ------------------------------------------------------------------------------


class _McpServer(Body):
    # python-re: the name's rule looks ahead (no "__"); these strings are short.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, regex_engine="python-re")

    name: ServerName | None = Field(None, description="required to add; a PUT's must be the path's")


McpValue = Annotated[str, chars(8192)]
McpKey = Annotated[str, StringConstraints(min_length=1, max_length=8192, pattern=r"^[^\u0000]*$")]
# JSON Schema says what a key may be with propertyNames, which pydantic does not write itself.
MCP_KEYS: dict[str, Any] = {"propertyNames": {"minLength": 1, "maxLength": 8192, "pattern": "^[^\\u0000]*$"}}


class StdioMcpServer(_McpServer):
    """A server the workers start as a child process."""

    type: Literal["stdio"] | None = None
    transport: Literal["stdio"] | None = None
    command: Annotated[str, chars(8192, blank=False)]
    args: list[McpValue] | None = Field(None, max_length=200)
    env: dict[McpKey, McpValue] | None = Field(
        None, max_length=200, description="write-only", json_schema_extra=MCP_KEYS
    )
    cwd: McpValue | None = None


class HttpMcpServer(_McpServer):
    """A server the workers reach over streamable HTTP."""

    type: Literal["http", "streamable-http", "streamable_http"] | None = None
    transport: Literal["http", "streamable-http", "streamable_http"] | None = None
    url: Annotated[str, pattern(r"^https?://[^\u0000]*$", 8192, rule="an http(s) URL")]
    headers: dict[McpKey, McpValue] | None = Field(
        None, max_length=200, description="write-only", json_schema_extra=MCP_KEYS
    )


class McpServerFields(RootModel[StdioMcpServer | HttpMcpServer]):
    """An MCP server's definition: stdio (command, args, env, cwd) or http (url, headers)."""

    def given(self) -> dict[str, Any]:
        return self.root.given()


class NewStdioMcpServer(StdioMcpServer):
    name: ServerName


class NewHttpMcpServer(HttpMcpServer):
    name: ServerName


class NewMcpServer(RootModel[NewStdioMcpServer | NewHttpMcpServer]):
    """An MCP server to add (its name is required)."""

    def given(self) -> dict[str, Any]:
        return self.root.given()


class McpServer(Answer):
    name: str
    transport: str
    command: str | None
    args: list[str]
    cwd: str | None
    url: str | None
    env_keys: list[str]
    header_keys: list[str]
    origin: str


class McpServerList(Answer):
    servers: list[McpServer]


class McpOverview(Answer):
    servers: list[dict[str, Any]] = Field(description="each server's state as the workers report it")
    workers: dict[str, Any]
    totals: dict[str, Any]


class McpRefresh(Body):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, regex_engine="python-re")

    server: ServerName | None = Field(None, description="one server (default: all)")
    reconnect: bool | None = Field(None, description="close and start again even where it is up")


class McpRefreshing(Answer):
    refreshing: str
    reconnect: bool
    workers: int


# -- the service --------------------------------------------------------------------------------


class Health(Answer):
    ok: bool
    process: dict[str, Any]
    redis: dict[str, Any]
    database: dict[str, Any]
    workers: dict[str, Any]
    sandbox: dict[str, Any] = Field(
        description="{enforced, mode, bwrap, reason}: whether commands run in the bubblewrap jail"
    )
    data_root: dict[str, Any]
    mcp: dict[str, Any] | None = None


class SocketQuery(Query):
    after: int | None = Field(None, ge=0, lt=2**63, description="replay the log after this event id")


# -- coordinators and background shells (issue 45) ---------------------------------------------


class Closed(Answer):
    closed: list[str] = Field(description="the workstreams closed now (one closed before is not)")


class CoordinatorTask(Answer):
    task_id: int
    title: str
    status: Literal["pending", "in_progress", "done", "cancelled"]
    child_ws_id: str | None
    updated_at: str


class TaskList(Answer):
    tasks: list[CoordinatorTask]


class Shell(Answer):
    shell_id: str
    command: str
    status: Literal["running", "exited", "killed", "lost"]
    exit_code: int | None
    note: str | None = Field(description="why it ended, when not by itself")
    started_at: str
    ended_at: str | None
    dropped_chars: int = Field(description="output past the stored limit: counted, not kept")
    tail: str = Field(description="the end of its output")


class ShellList(Answer):
    shells: list[Shell]


# -- compaction and usage (app/web/compaction.py, app/web/usage.py) ---------------------------


class CompactStarted(Answer):
    ws_id: str
    upto: int = Field(description="the newest message the summary may cover")
    messages: int = Field(description="how many messages the summary will stand for")
    status: Literal["compacting"]


def _iso_text(value: Any) -> Any:
    """Only a date or time as ISO 8601 writes it: not the Unix timestamps pydantic also reads."""
    if not isinstance(value, str) or not re.match(r"\d{4}-\d{2}-\d{2}", value):
        raise ValueError("expected a date (YYYY-MM-DD) or an ISO 8601 time")
    return value


IsoMoment = Annotated[date | datetime, BeforeValidator(_iso_text)]


class UsageFilter(Query):
    group_by: Literal["day", "model", "user"] | None = Field(None, description="day (default, UTC)")
    user: Annotated[str, chars(64)] | None = Field(None, description="a user's name; `operator`")
    workstream: IdText | None = Field(None, description="a workstream's id")
    since: IsoMoment | None = Field(
        None, alias="from", description="YYYY-MM-DD or an ISO 8601 time (UTC without an offset)"
    )
    until: IsoMoment | None = Field(
        None, alias="to", description="YYYY-MM-DD (that day included) or an ISO 8601 time"
    )


class UsageCounts(Answer):
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    steps: int
    cost: float = Field(description="US dollars, from [prices]")
    unpriced_steps: int = Field(description="steps of models without a price, not in `cost`")


class UsageReport(Answer):
    group_by: str
    rows: list[UsageCounts] = Field(description="one per group, with the group's key under `group_by`")
    total: UsageCounts


# -- runs, triggers, webhooks, schedules (app/jobs, app/webhooks, app/schedules) ----------------


class Policy(Body):
    """What may run without a person: the named tools, or everything (auto_approve); with
    deny_unapproved a call that would wait for a person fails the run instead."""

    tools: list[Name] | None = Field(None, max_length=job_contract.MAX_POLICY_TOOLS)
    auto_approve: bool | None = None
    deny_unapproved: bool | None = None


class ClientTool(Body):
    """A tool the caller answers itself: a call to it waits for POST .../tool_outputs."""

    # A built-in tool's name is refused by the declaration's own check (422), not by the pattern.
    name: Annotated[str, pattern(r"^[A-Za-z0-9_-]{1,64}$", rule="1-64 letters, digits, '-' or '_'")]
    description: Annotated[str, chars(client_tool_fields.MAX_DESCRIPTION_CHARS)] | None = None
    parameters: dict[str, Any] | None = Field(
        None,
        description='a JSON schema of "type": "object" (at most 16 KiB; else 422); default: no arguments',
    )


ClientTools = Annotated[list[ClientTool], Field(max_length=client_tool_fields.MAX_TOOLS)]


class ToolOutput(Body):
    call_id: IdText
    output: Annotated[str, chars(TOOL_OUTPUT_CHARS)] = Field(description="what the model reads as the result")
    is_error: bool | None = Field(None, description="the call failed (the model is told so)")


class ToolOutputs(Body):
    tool_outputs: Annotated[
        list[ToolOutput], Field(min_length=1, max_length=client_tool_fields.MAX_TOOLS * 4)
    ]


class ToolOutputsTaken(Answer):
    call_ids: list[str] = Field(description="the calls finished by these outputs")


class WorkstreamClientTools(Body):
    tools: ClientTools


class ClientToolsView(Answer):
    tools: list[dict[str, Any]]
    required_action: dict[str, Any] | None = Field(
        None,
        description="{type: submit_tool_outputs, tool_calls: [{call_id, name, arguments}]} while calls wait",
    )


ISO_TIME = (  # 2026-12-06, 2026-12-06T09:30, 2026-12-06T09:30:00.5+01:00, ...Z
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,6})?)?)?(Z|[+-][0-9]{2}:[0-9]{2})?$"
)
Timeout = Annotated[int, Field(ge=1, le=job_contract.MAX_TIMEOUT_SECONDS), WHOLE]


class NewRun(Body):
    prompt: NonBlank = Field(description="the message the run's turn starts with (at most a message's size)")
    workstream: IdText | None = Field(None, description="an existing workstream (default: a new one)")
    model: Name | None = Field(None, description="a new workstream's model (a configured one)")
    policy: Policy | None = None
    timeout_s: Timeout | None = Field(None, description="the run ends timed_out after this many seconds")
    metadata: dict[str, Any] | None = Field(
        None, description="yours, kept and shown back (at most 16 KiB as JSON; no NUL, else 422)"
    )
    tools: ClientTools | None = Field(None, description="tools you answer (POST .../tool_outputs)")
    webhook: IdText | None = Field(None, description="one of your webhook endpoints: every event of this run")


class RunStarted(Answer):
    run_id: str
    ws_id: str
    turn_id: str | None
    status: str


class RunView(Answer):
    """A run: its status read from its turn (queued, running, awaiting_approval, requires_action,
    succeeded, failed, cancelled, timed_out), its answer, its calls, usage and times (docs/runs.md)."""

    run_id: str
    ws_id: str
    status: str


class RunList(Answer):
    runs: list[RunView]


class RunFilter(Query):
    status: (
        Literal[
            "queued",
            "running",
            "awaiting_approval",
            "requires_action",
            "succeeded",
            "failed",
            "cancelled",
            "timed_out",
        ]
        | None
    ) = None
    since: Annotated[str, pattern(ISO_TIME, rule="an ISO 8601 time")] | None = Field(
        None, description="ISO 8601, e.g. 2026-12-06T00:00:00Z"
    )
    limit: Annotated[int, Field(ge=1, le=job_store.MAX_LISTED)] | None = None


class RunWait(Query):
    wait: Annotated[int, Field(ge=0, le=60)] | None = Field(
        None, description="seconds to wait for the run to end or need someone (at most 60)"
    )


class NewTrigger(Body):
    prompt: NonBlank
    workstream: IdText | None = None
    policy: Policy | None = None
    timeout_s: Timeout | None = None
    signed: bool | None = Field(None, description="false: no secret, the URL alone starts runs")


class Trigger(Answer):
    trigger_id: str
    path: str = Field(description="POST here to start a run: /v1/hooks/{trigger_id}")
    secret: str | None = Field(None, description="shown once, at creation")


class TriggerList(Answer):
    triggers: list[Trigger]


class HookContext(RootModel[dict[str, Any]]):
    """Any JSON object (a push, an alert): the run's context, at most 256 KiB."""


class Fired(Answer):
    run_id: str
    status: str


class LinkDecision(Body):
    approved: bool
    feedback: Annotated[str, chars(8000)] | None = None


LinkValue = Annotated[str, chars(128)]


class ApprovalLink(Query):
    """A pushed approval link's signed query (docs/notify.md#approvals-pushed-out)."""

    turn: LinkValue
    step: LinkValue
    exp: LinkValue
    sig: LinkValue


class ApprovalLinkDecision(Body):
    approved: bool
    feedback: Annotated[str, chars(8000)] | None = None
    call_id: Name | None = Field(None, description="one of the link's calls; omitted: all of them")


class LinkedApproval(Answer):
    """The calls a pushed approval link decides, as the workstream shows them."""

    ws_id: str
    name: str
    items: list[ToolItem]
    expires_at: int = Field(description="when the link stops deciding (Unix seconds)")


class DecideLink(Query):
    turn: LinkValue
    step: LinkValue
    exp: LinkValue
    sig: LinkValue


class NewWebhook(Body):
    url: Annotated[
        str,
        pattern(
            r"^https?://[^ /@\u0000]+(/[^\u0000]*)?$",
            2048,
            rule="an http(s) URL without a user name or password",
        ),
    ]
    events: (
        list[
            Literal[
                "run.succeeded",
                "run.failed",
                "run.cancelled",
                "approval.requested",
                "run.requires_action",
                "turn.completed",
            ]
        ]
        | None
    ) = Field(None, max_length=6, description="default: all of them but turn.completed")
    description: Name | None = None


class Webhook(Answer):
    endpoint_id: str
    url: str
    events: list[str]


class NewWebhookSecret(Webhook):
    secret: str = Field(description="shown once: whsec_ and base64")


class WebhookList(Answer):
    endpoints: list[Webhook]


class Rotated(Answer):
    endpoint_id: str
    secret: str


class Deliveries(Answer):
    deliveries: list[dict[str, Any]]


class DeliveryLimit(Query):
    limit: Annotated[int, Field(ge=1, le=200)] | None = None  # app/webhooks/deliveries.py MAX_LISTED


class Redelivered(Answer):
    delivery_id: str | None = None


class _NewSchedule(Body):
    timezone: Annotated[str, chars(64)] | None = Field(None, description="an IANA zone (default UTC)")
    prompt: NonBlank
    workstream: IdText | None = Field(None, description="runs go to this workstream...")
    new_workstream_each_time: bool | None = Field(None, description="...or to a new one each time")
    policy: Policy | None = None
    timeout_s: Timeout | None = None
    webhook: IdText | None = Field(None, description="one of your webhook endpoints: every event of its runs")


class CronSchedule(_NewSchedule):
    cron: Annotated[str, chars(200)] = Field(description="five fields, as cronsim reads them (else 422)")


class EverySchedule(_NewSchedule):
    every: Annotated[int, Field(ge=1, le=366 * 86400), WHOLE] = Field(
        description="seconds between firings (the configured minimum, else 422)"
    )


class NewSchedule(RootModel[CronSchedule | EverySchedule]):
    """cron or every, not both."""

    def given(self) -> dict[str, Any]:
        return self.root.given()


class ScheduleView(Answer):
    schedule_id: str
    paused: bool


class ScheduleList(Answer):
    schedules: list[ScheduleView]


class NoBody(Body):
    """An empty object, or no body."""
