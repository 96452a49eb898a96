"""Runs from the Python client (docs/runs.md): `client.runs.create(prompt, ...).wait()`. A run
is one call that starts a turn with a contract; waiting is the service's long poll, asked again
until the run ends, needs a person or the client's tool outputs, or the caller's time runs out.
`AsyncRuns` (`AsyncClient.runs`) is the same, awaited."""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from turnstone_jobs.errors import TimeoutError
from turnstone_jobs.protocol import API

FINAL = frozenset({"succeeded", "failed", "cancelled", "timed_out"})
MOVING = frozenset({"queued", "running"})  # what a wait waits through
MAX_WAIT_SECONDS = 60  # the most the service holds one long poll
_MARGIN = 5.0  # seconds a long poll's answer may take beyond its wait

Call = Callable[..., Any]  # Client._call
AsyncCall = Callable[..., Awaitable[Any]]  # AsyncClient._call


def run_path(run_id: str, suffix: str = "") -> str:
    return f"{API}/runs/{quote(run_id, safe='')}{suffix}"


@dataclass
class _RunState:
    """What a run says as last read, for `Run` and `AsyncRun` alike."""

    run_id: str
    ws_id: str
    status: str
    answer: str | None = None
    error: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: dict[str, Any], runs: Any = None) -> Any:
        return cls(  # type: ignore[call-arg]
            run_id=str(data["run_id"]),
            ws_id=str(data["ws_id"]),
            status=str(data["status"]),
            answer=data.get("answer") if isinstance(data.get("answer"), str) else None,
            error=data.get("error") if isinstance(data.get("error"), str) else None,
            raw=data,
            _runs=runs,
        )

    @property
    def is_final(self) -> bool:
        return self.status in FINAL

    @property
    def ok(self) -> bool:
        return self.status == "succeeded"

    @property
    def required_tool_calls(self) -> builtins.list[dict[str, Any]]:
        """Under `requires_action`: the client tool calls waiting, each `call_id`, `name`, `arguments`."""
        required = self.raw.get("required_action") or {}
        return list(required.get("tool_calls") or [])

    def _update(self, fresh: _RunState) -> Any:
        self.status, self.answer, self.error, self.raw = fresh.status, fresh.answer, fresh.error, fresh.raw
        return self


@dataclass
class Run(_RunState):
    """A run as last read; `refresh`, `wait` and `cancel` read it again."""

    _runs: Runs | None = field(default=None, repr=False, compare=False)

    def _owner(self) -> Runs:
        if self._runs is None:
            raise RuntimeError("this Run was not read through a client")
        return self._runs

    def refresh(self) -> Run:
        return self._update(self._owner().get(self.run_id))

    def wait(self, timeout: float | None = None) -> Run:
        """Until the run ends, waits for a person (`awaiting_approval`) or for your client tools'
        outputs (`requires_action`); TimeoutError when `timeout` seconds pass first (None: no limit)."""
        return self._update(self._owner().wait(self.run_id, timeout))

    def cancel(self) -> Run:
        return self._update(self._owner().cancel(self.run_id))

    def submit_tool_outputs(self, outputs: dict[str, str] | builtins.list[dict[str, Any]]) -> Run:
        """Answer the waiting client tool calls (`{call_id: output}`, or the API's list of
        `{call_id, output, is_error?}`), every one at once; the run as it then stands."""
        self._owner().submit_tool_outputs(self.run_id, outputs)
        return self.refresh()


class Runs:
    """`client.runs`: create, get, wait, list, cancel."""

    def __init__(self, call: Call) -> None:
        self._call = call

    def create(
        self,
        prompt: str,
        *,
        workstream: str | None = None,
        model: str | None = None,
        policy: dict[str, Any] | None = None,
        timeout_s: int | None = None,
        metadata: dict[str, Any] | None = None,
        tools: builtins.list[dict[str, Any]] | None = None,
        webhook: str | None = None,
    ) -> Run:
        """Start a run (in `workstream`, else a new one); the answer says where it stands.
        `tools`: your own (`{name, description, parameters}` each; docs/runs.md, "Client tools");
        `webhook`: one of your endpoints' ids, which gets every event of the run."""
        body = new_run(prompt, workstream, model, policy, timeout_s, metadata, tools, webhook)
        return Run.from_json(self._call("POST", f"{API}/runs", body), self)

    def submit_tool_outputs(
        self, run_id: str, outputs: dict[str, str] | builtins.list[dict[str, Any]]
    ) -> builtins.list[str]:
        """The call ids the outputs finished."""
        data = self._call("POST", run_path(run_id, "/tool_outputs"), tool_outputs_body(outputs))
        return list(data["call_ids"])

    def get(self, run_id: str) -> Run:
        return Run.from_json(self._call("GET", run_path(run_id)), self)

    def wait(self, run_id: str, timeout: float | None = None) -> Run:
        until = None if timeout is None else time.monotonic() + timeout
        while True:
            left = MAX_WAIT_SECONDS if until is None else until - time.monotonic()
            seconds = max(0, min(MAX_WAIT_SECONDS, int(left)))
            data = self._call("GET", run_path(run_id, f"?wait={seconds}"), timeout=seconds + _MARGIN)
            run = Run.from_json(data, self)
            if run.status not in MOVING:
                return run
            if until is not None and time.monotonic() >= until:
                raise TimeoutError(f"run {run_id} is still {run.status} after {timeout} s")

    def list(
        self, status: str | None = None, since: str | None = None, limit: int | None = None
    ) -> builtins.list[Run]:
        """The caller's runs, newest first (`status`: of that status; `since`: ISO 8601)."""
        return [Run.from_json(r, self) for r in self._call("GET", list_path(status, since, limit))["runs"]]

    def cancel(self, run_id: str) -> Run:
        return Run.from_json(self._call("POST", run_path(run_id, "/cancel"), {}), self)


def new_run(
    prompt: str,
    workstream: str | None,
    model: str | None,
    policy: dict[str, Any] | None,
    timeout_s: int | None,
    metadata: dict[str, Any] | None,
    tools: builtins.list[dict[str, Any]] | None,
    webhook: str | None,
) -> dict[str, Any]:
    """A run's body, the fields left out unsaid (the service's defaults)."""
    body = {
        "prompt": prompt,
        "workstream": workstream,
        "model": model,
        "policy": policy,
        "timeout_s": timeout_s,
        "metadata": metadata,
        "tools": tools,
        "webhook": webhook,
    }
    return {k: v for k, v in body.items() if v is not None}


def tool_outputs_body(outputs: dict[str, str] | builtins.list[dict[str, Any]]) -> dict[str, Any]:
    if isinstance(outputs, dict):
        return {"tool_outputs": [{"call_id": k, "output": v} for k, v in outputs.items()]}
    return {"tool_outputs": list(outputs)}


def list_path(status: str | None, since: str | None, limit: int | None) -> str:
    query = {k: v for k, v in (("status", status), ("since", since), ("limit", limit)) if v is not None}
    suffix = "?" + "&".join(f"{k}={quote(str(v), safe='')}" for k, v in query.items()) if query else ""
    return f"{API}/runs{suffix}"


@dataclass
class AsyncRun(_RunState):
    """A run as last read, from `AsyncClient.runs`: the same as `Run`, awaited."""

    _runs: AsyncRuns | None = field(default=None, repr=False, compare=False)

    def _owner(self) -> AsyncRuns:
        if self._runs is None:
            raise RuntimeError("this AsyncRun was not read through a client")
        return self._runs

    async def refresh(self) -> AsyncRun:
        return self._update(await self._owner().get(self.run_id))

    async def wait(self, timeout: float | None = None) -> AsyncRun:
        return self._update(await self._owner().wait(self.run_id, timeout))

    async def cancel(self) -> AsyncRun:
        return self._update(await self._owner().cancel(self.run_id))

    async def submit_tool_outputs(self, outputs: dict[str, str] | builtins.list[dict[str, Any]]) -> AsyncRun:
        await self._owner().submit_tool_outputs(self.run_id, outputs)
        return await self.refresh()


class AsyncRuns:
    """`AsyncClient.runs`: create, get, wait, list, cancel, submit_tool_outputs, awaited."""

    def __init__(self, call: AsyncCall) -> None:
        self._call = call

    async def create(
        self,
        prompt: str,
        *,
        workstream: str | None = None,
        model: str | None = None,
        policy: dict[str, Any] | None = None,
        timeout_s: int | None = None,
        metadata: dict[str, Any] | None = None,
        tools: builtins.list[dict[str, Any]] | None = None,
        webhook: str | None = None,
    ) -> AsyncRun:
        """As `Runs.create`."""
        body = new_run(prompt, workstream, model, policy, timeout_s, metadata, tools, webhook)
        return AsyncRun.from_json(await self._call("POST", f"{API}/runs", body), self)

    async def get(self, run_id: str) -> AsyncRun:
        return AsyncRun.from_json(await self._call("GET", run_path(run_id)), self)

    async def wait(self, run_id: str, timeout: float | None = None) -> AsyncRun:
        until = None if timeout is None else time.monotonic() + timeout
        while True:
            left = MAX_WAIT_SECONDS if until is None else until - time.monotonic()
            seconds = max(0, min(MAX_WAIT_SECONDS, int(left)))
            path = run_path(run_id, f"?wait={seconds}")
            run = AsyncRun.from_json(await self._call("GET", path, timeout=seconds + _MARGIN), self)
            if run.status not in MOVING:
                return run
            if until is not None and time.monotonic() >= until:
                raise TimeoutError(f"run {run_id} is still {run.status} after {timeout} s")
            await asyncio.sleep(0)

    async def list(
        self, status: str | None = None, since: str | None = None, limit: int | None = None
    ) -> builtins.list[AsyncRun]:
        return [
            AsyncRun.from_json(r, self)
            for r in (await self._call("GET", list_path(status, since, limit)))["runs"]
        ]

    async def cancel(self, run_id: str) -> AsyncRun:
        return AsyncRun.from_json(await self._call("POST", run_path(run_id, "/cancel"), {}), self)

    async def submit_tool_outputs(
        self, run_id: str, outputs: dict[str, str] | builtins.list[dict[str, Any]]
    ) -> builtins.list[str]:
        data = await self._call("POST", run_path(run_id, "/tool_outputs"), tool_outputs_body(outputs))
        return list(data["call_ids"])
