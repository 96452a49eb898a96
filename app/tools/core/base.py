"""What every tool handler receives and returns.

Handlers know nothing of Celery, Flask or Redis: `prepare` and `execute` get a
`ToolContext` and plain JSON-serialisable arguments, so they can be tested alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, MutableSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from app.settings import ModelSettings, ToolSettings

if TYPE_CHECKING:
    from app.sandbox.enforcement import Sandbox
    from app.sandbox.reach import Roots
    from app.storage.database import Database
    from app.storage.models import Workstream


def _never_cancelled() -> bool:
    return False


def _discard(_chunk: str) -> None:
    return None


def _no_events(_type: str, _fields: dict[str, Any]) -> None:
    return None


def _unrecorded(_group: int) -> None:
    return None


@dataclass
class ToolContext:
    """The world a handler may see: never a request, a task or a connection.

    `db` is the service's storage (tools that keep state: memories, watches);
    `publish(type, fields)` sends an event of this call to the workstream's clients
    (tagged with its `call_id`); `fetcher` is the guarded HTTP fetcher where the
    service has one, `mcp` the worker's MCP manager; `start_task(prompt)` starts a
    sub-agent on the prompt and gives its workstream id (a `task_agent` call in a
    service's tool batch; None elsewhere); `roots` what the file tools may reach besides
    the folder (app.tools.files.reach). A handler tested alone gets inert defaults for all of them.
    """

    ws_id: str
    working_dir: str
    settings: ToolSettings = field(default_factory=ToolSettings)
    model: ModelSettings | None = None
    is_cancelled: Callable[[], bool] = _never_cancelled
    emit_output: Callable[[str], None] = _discard  # streamed stdout, as produced
    read_paths: MutableSet[str] = field(default_factory=set)  # read-before-edit guard
    kind: str = "interactive"
    workstream: Workstream | None = None  # a detached snapshot, as the step loaded it
    turn_id: str | None = None
    call_id: str | None = None
    db: Database | None = None
    publish: Callable[[str, dict[str, Any]], None] = _no_events
    fetcher: Any = None
    mcp: Any = None  # app.mcp.manager.MCPManager: a worker's MCP connections (web_search's MCP backend)
    start_task: Callable[[str], str] | None = None
    # Called by bash once its command's processes exist (their group id): the service records
    # it, so that a call found running after its worker died can say whether it had started.
    note_process: Callable[[int], None] = _unrecorded
    roots: Roots | None = None  # the file tools' roots; None: those of this process's settings
    # The process's app.sandbox.enforcement.Sandbox: bash and watch polls run in its jail; None
    # (a handler tested alone) runs them unjailed. `network` is the workstream's choice.
    sandbox: Sandbox | None = None
    network: str = "none"
    # A coordinator's reach (app/coordination/reach.py Coordination): its children, waits, task
    # list and the live workers; None outside a coordinator's batch in the service.
    coordination: Any = None
    # Credentials a tool redacted by their shape as its output streamed (bash's StreamRedactor),
    # by kind: the output guard's event counts them with its own (app/tools/core/pipeline.py).
    redacted: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class Preparation:
    """Phase 1's answer for one call: what to show, and whether a person must decide.

    `args` are the validated, normalised arguments that `execute` will receive
    (stored with the call, so they must be JSON-serialisable). When `error` is
    set the call is never executed and `error` becomes its result.
    """

    args: dict[str, Any]
    header: str
    preview: str = ""
    needs_approval: bool = True
    error: str | None = None


@dataclass(frozen=True)
class ToolOutcome:
    """Phase 3's answer. With `waiting_on` set, the call is not over: its execute phase
    started something (a sub-agent's turn, say) whose end will finish the call later,
    through `app.engine.life.calls.finish_waiting`; `output` is then ignored."""

    output: str
    is_error: bool = False
    waiting_on: str | None = None


class ToolHandler(Protocol):
    """A handler module: `prepare` then (if approved) `execute`."""

    def prepare(self, args: dict[str, Any], ctx: ToolContext) -> Preparation: ...

    def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome: ...
