"""A model step: stream the model's answer, store it, prepare its tool calls, park or go on."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import redis
from sqlmodel import col, select

from app.attachments import perception
from app.compaction import plan as compaction_plan
from app.compaction import run as compacting
from app.compaction import window
from app.engine.conversation import prompt, stored
from app.engine.life import asked, calls, turns
from app.engine.publishing.outbox import Outbox, ordered
from app.engine.publishing.streaming import Coalescer, StreamMark
from app.engine.running.handoff import Handoff, hand_on
from app.engine.running.leases import fenced
from app.engine.running.phases import run_phase
from app.engine.running.stop_check import CancelCheck
from app.events import EventType, Fence, NewEvent
from app.jobs.contract import is_runs_key
from app.metrics import recording
from app.policies import rules
from app.policies import store as policy_store
from app.policies.rules import EMPTY as EMPTY_POLICY
from app.providers import ModelError, health, slots, stream_reply
from app.providers.anthropic_format import referenced_tools
from app.providers.errors import ContextWindowError
from app.providers.reply import portable, service_options
from app.runtime import Runtime
from app.sandbox.reach import Roots
from app.settings import ModelSettings
from app.storage.models import (
    Message,
    ToolCall,
    TurnPhase,
    TurnStatus,
    Workstream,
)
from app.storage.types import storable
from app.taskqueue import TOOL_BATCH_TASK
from app.tools import client_tools, task_agent, tool_search
from app.tools.core import tool_search_plan
from app.tools.core import toolset as toolsets
from app.tools.core.base import ToolContext
from app.tools.core.pipeline import PreparedCall, prepare_call
from app.tools.web import native_search
from app.usage import budgets

log = logging.getLogger(__name__)

RESTART_NOTICE = "The worker streaming this answer stopped; the answer is being generated again."
COMPACTING_NOTICE = "The conversation is longer than the model's window: compacting it, then asking again"
# How many times an answer's calls are decided again because the workstream changed meanwhile.
MAX_DECISIONS = 5


@dataclass
class Reply:
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_calls: list[Any] = field(default_factory=list)  # providers' ToolCallRequest
    server_blocks: list[dict[str, Any]] = field(default_factory=list)  # what the provider ran itself
    usage: dict[str, int] = field(default_factory=dict)
    model: str | None = None  # the model that gave it: the step's, or a fallback's


def run(rt: Runtime, turn_id: str, step: int, handed: Handoff | None = None) -> None:
    """The step, as its task (`handed`: kept by the task that ran the phase before)."""

    def body(fence: Fence, cancelled: CancelCheck) -> None:
        _step(rt, fence, step, cancelled)

    run_phase(rt, turn_id, TurnPhase.MODEL, step, body, handed.claim if handed else None)


def _step(rt: Runtime, fence: Fence, step: int, cancelled: CancelCheck, compacted: bool = False) -> None:
    """The step; `compacted`: the conversation was compacted for it already (once is enough)."""
    with rt.db.reader() as s:
        turn, ws = turns.with_workstream(s, fence.turn_id)
        # Only the rows this worker has not seen are loaded, and made into entries.
        pairs = rt.conversations.model_pairs(
            s, ws.id, partial(stored.model_entry, load=stored.loader(rt, ws.id))
        )
        # A run's own client tools are read for a run's turn only: no statement on any other step.
        run_turn = turn.id if is_runs_key(turn.idempotency_key) else None
        sources = client_tools.sources(rt.tool_sources, s, ws, run_turn)
    publish = _publisher(rt, ws.id, fence)
    if turn.cancel_requested or cancelled():
        return _finish(rt, ws.id, fence, TurnStatus.CANCELLED)
    if step > 0 and not compacted:  # the step before crossed a budget: the turn stops here
        spent, who = budgets.exceeded(rt, ws.id)
        if spent is not None:
            return _fail(rt, ws.id, fence, f"Stopped before step {step + 1}: {spent.describe(who)}.")
    if turn.step_claims > 1 and not compacted:
        publish(EventType.STREAM_END, step=step, discard=True, reason=RESTART_NOTICE)
    model = rt.settings.model(ws.model)
    if model is None:
        return _fail(
            rt,
            ws.id,
            fence,
            f"model {ws.model or rt.settings.default_model!r} is not configured: "
            "set TURNSTONE_MODEL (e.g. openai:gpt-4.1) or add [models.NAME] to config.toml",
        )
    search = tool_search_plan.plan(rt.settings.tools, ws.tool_search, model)
    tools = toolsets.build(rt.registry, sources, ws.kind, ws.expanded_tools, search)
    last_step = task_agent.last_step_notice(rt.settings, ws, step)  # a bounded sub-agent's answer
    if last_step:
        tools = task_agent.last_step_tools(tools, model)
    context = prompt.PromptContext(ws, tools, rt.settings, db=rt.db, message=turn.message)
    system = prompt.build(context, rt.prompt_sections)
    history = perception.described(rt, model, stored.arrange(system, compaction_plan.visible(pairs)))
    if trailing := prompt.turn_context(context):
        history.append(trailing)
    if last_step:
        history.append({"role": "user", "content": last_step})
    schemas = tools.schemas(ws.working_dir, rt.settings.tools.workspace_dir)
    schemas = native_search.swap(schemas, model, _may_search(rt, ws.kind, tools, last_step))
    rules = window.rules_for(rt.settings.compaction, model)  # the server's window, if none is set
    if not compacted and rules.threshold is not None:
        size = compaction_plan.estimate_tokens(history, schemas)
        if compacting.is_due(rules, size):
            return _compact_first(rt, fence, step, cancelled, ws, pairs, "window", size)
    # Until the answer is stored, history points before its deltas; its stream_end goes out
    # with the events of the transition that stores it (or ends the turn).
    with StreamMark(rt, ws.id) as mark:
        try:
            delta = _publisher(rt, ws.id, fence, best_effort=True)
            reply = _stream(rt, model, history, schemas, publish, delta, step, cancelled, ws.id)
        except ContextWindowError as exc:
            if compacted or not rules.enabled:
                mark.end(NewEvent(EventType.STREAM_END, fence.turn_id, fence, {"step": step}))
                return _fail(rt, ws.id, fence, str(exc), mark)
            ended = {"step": step, "discard": True, "reason": COMPACTING_NOTICE}
            mark.end(NewEvent(EventType.STREAM_END, fence.turn_id, fence, ended))
            overflow = exc
        except ModelError as exc:
            mark.end(NewEvent(EventType.STREAM_END, fence.turn_id, fence, {"step": step}))
            return _fail(rt, ws.id, fence, str(exc), mark)
        else:
            usage = reply.usage or None
            mark.end(NewEvent(EventType.STREAM_END, fence.turn_id, fence, {"step": step, "usage": usage}))
            if last_step:
                reply.tool_calls = []  # asked for its answer: any call now is not run
            if cancelled():  # keep what was said; calls it had begun to ask for are dropped
                return _store_reply(rt, fence, ws, tools, reply, step, mark, TurnStatus.CANCELLED)
            return _store_reply(rt, fence, ws, tools, reply, step, mark)
    size = compaction_plan.estimate_tokens(history, schemas)
    _compact_first(rt, fence, step, cancelled, ws, pairs, "overflow", size, overflow)


def _compact_first(
    rt: Runtime,
    fence: Fence,
    step: int,
    cancelled: CancelCheck,
    ws: Workstream,
    pairs: list[tuple[Message, dict[str, Any]]],
    reason: str,
    size: int,
    overflow: ModelError | None = None,
) -> None:
    """Compact the conversation, then run the step on it. Found too long by the provider
    (`overflow`) and with nothing that could be summarised, the turn ends with its error."""
    rows = [row for row, _entry in pairs]
    done = compacting.compact(
        rt, ws, rows, reason=reason, request_tokens=size, fence=fence, cancelled=cancelled
    )
    if done is compacting.Outcome.CANCELLED:
        return _finish(rt, ws.id, fence, TurnStatus.CANCELLED)
    if overflow is not None and done is not compacting.Outcome.DONE:
        return _fail(rt, ws.id, fence, str(overflow))
    _step(rt, fence, step, cancelled, compacted=True)


Publish = Callable[..., int | None]


def _may_search(rt: Runtime, kind: str, tools: toolsets.ToolSet, last_step: str | None) -> bool:
    """Whether the step may search the web natively: the kind is offered web_search, and this
    is not a last step stripped of its tools."""
    definition = rt.registry.definition(native_search.TOOL)
    stripped = bool(last_step) and not tools.visible
    return definition is not None and definition.is_for_kind(kind) and not stripped


def _stream(
    rt: Runtime,
    model: ModelSettings,
    history: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    publish: Publish,
    delta: Publish,
    step: int,
    cancelled: CancelCheck,
    cache_key: str | None = None,
) -> Reply:
    """The model's answer; `delta` sends its text as it comes (best-effort: the stored answer
    is what counts), `publish` the step's other events (which wait out a Redis fault)."""
    # A degraded model with a fallback that is not goes after it (app/providers/health.py).
    first, fallbacks, skipped = health.healthy_first(rt.redis, model, _fallbacks(rt, model))
    if skipped is not None:
        tools = portable(tools)  # another provider's: the first model's provider-side tools go
        why = f"{model.name} is degraded: {skipped.reason or 'its server failed'}"
        _switched(publish, step, model.name, first.name, None, why)
    reply = Reply(model=first.name)
    slot = _slot(rt, first, publish, step, cancelled)  # its model's max_concurrent, if it has one
    if slot is _CANCELLED:
        return reply  # cancelled while it waited: nothing was asked
    attempt = None
    content = Coalescer(lambda text: delta(EventType.CONTENT, step=step, text=text))
    reasoning = Coalescer(lambda text: delta(EventType.REASONING, step=step, text=text))
    try:
        for event in stream_reply(
            first,
            history,
            tools,
            should_stop=cancelled,
            cache_key=cache_key,
            fallbacks=fallbacks,
            **service_options(rt.settings),
        ):
            if isinstance(slot, slots.Slot):
                _renewed(slot)
            if event.kind == "content":
                reply.content.append(event.text)
                content.add(event.text)
            elif event.kind == "reasoning":
                reply.reasoning.append(event.text)
                reasoning.add(event.text)
            elif event.kind == "tool_call":
                reply.tool_calls.append(event.tool_call)
            elif event.kind == "server_block" and event.block is not None:
                reply.server_blocks.append(dict(event.block))
            elif event.kind == "finish":
                reply.usage = dict(event.usage)
            elif event.kind == "retry":  # an attempt failed: who watches sees why, and the wait
                attempt = event.attempt
                delta(
                    EventType.MODEL_RETRY,
                    step=step,
                    attempt=event.attempt,
                    wait_seconds=round(event.wait_seconds or 0.0, 3),
                    reason=event.text,
                )
            elif event.kind == "fallback":  # the next attempt goes to the chain's next model
                _switched(publish, step, event.from_model, event.to_model, attempt, event.text)
                reply.model = event.to_model
            elif event.kind == "restart":  # the stream broke and is being asked for again
                reasoning.flush()
                content.flush()
                publish(EventType.STREAM_END, step=step, discard=True, reason=event.text)
                reply = Reply(model=reply.model)
    finally:
        if isinstance(slot, slots.Slot):
            _given_back(slot)
        reasoning.close()
        content.close()
    return reply


_CANCELLED = object()  # `_slot`: the turn was cancelled while the step waited
SLOT_LEASE_MARGIN_SECONDS = 60.0
SLOT_WAIT_MAX_SECONDS = 0.5  # between tries for a slot, at most


def _slot(
    rt: Runtime, model: ModelSettings, publish: Publish, step: int, cancelled: CancelCheck
) -> slots.Slot | object | None:
    """One of the model's `max_concurrent` slots, taken before its request (docs/providers.md,
    Concurrency limits): None when it has no limit (or Redis cannot say: a limit protects a
    server, it never stops a turn); waited for, with a `model_waiting` event, when all are taken;
    `_CANCELLED` when the turn was cancelled meanwhile."""
    if not model.max_concurrent:
        return None
    lease = max(rt.settings.model_timeout_seconds, rt.settings.model_stream_idle_seconds or 0)
    slot = slots.Slot(rt.redis, model.name, lease + SLOT_LEASE_MARGIN_SECONDS)
    said, pause = False, 0.05
    try:
        while not slot.take(model.max_concurrent):
            if not said:
                publish(EventType.MODEL_WAITING, step=step, model=model.name, limit=model.max_concurrent)
                said = True
            if cancelled():
                return _CANCELLED
            time.sleep(pause)
            pause = min(pause * 2, SLOT_WAIT_MAX_SECONDS)
    except redis.RedisError as exc:
        log.warning("model %s's slots cannot be read (%s): its request goes out without one", model.name, exc)
        return None
    return slot


def _renewed(slot: slots.Slot) -> None:
    with contextlib.suppress(redis.RedisError):  # the lease runs on, and lapses if Redis stays down
        slot.renew()


def _given_back(slot: slots.Slot) -> None:
    with contextlib.suppress(redis.RedisError):  # its lease lapses instead
        slot.release()


def _switched(
    publish: Publish, step: int, from_model: str | None, to_model: str | None, attempt: int | None, why: str
) -> None:
    """The step moved to another model of its chain (a failure, or a degraded model passed over)."""
    publish(
        EventType.MODEL_FALLBACK,
        step=step,
        from_model=from_model,
        to_model=to_model,
        attempt=attempt,
        reason=why,
    )


def _fallbacks(rt: Runtime, model: ModelSettings) -> list[ModelSettings]:
    """The models of `model`'s fallback chain, in order (settings checked each names one)."""
    return [m for name in model.fallbacks if (m := rt.settings.model(name)) is not None]


def _store_reply(
    rt: Runtime,
    fence: Fence,
    ws: Workstream,
    tools: toolsets.ToolSet,
    reply: Reply,
    step: int,
    mark: StreamMark,
    end_as: TurnStatus = TurnStatus.DONE,
) -> None:
    """Store the answer; without tool calls the turn ends (`end_as`), else its calls park or run.

    A cancel requested while the answer streamed is seen here, by the transition that would
    store the calls: they are dropped and the turn ends cancelled."""
    requested = reply.tool_calls if end_as != TurnStatus.CANCELLED else []  # nobody will run them
    prepared, read_paths = _prepare_all(rt, ws, tools, fence.turn_id, step, requested)
    answer = {
        "content": "".join(reply.content),
        "reasoning": "".join(reply.reasoning) or None,
        "usage": reply.usage or None,
        "server_blocks": reply.server_blocks or None,
        "model": reply.model,
    }
    is_plain = not prepared and end_as == TurnStatus.DONE and not _found(tools, reply, prepared)
    with ordered(rt, ws.id) as out:
        mark.send_with(out)
        ended = is_plain and turns.end_with_answer(rt, out, fence, ws, answer)
        going = (
            None
            if ended
            else _store(rt, out, fence, ws, tools, reply, step, prepared, read_paths, answer, end_as)
        )
    _count_usage(rt, ws, reply)
    if going is not None:
        hand_on(rt, TOOL_BATCH_TASK, fence.turn_id, step, *going)


def _count_usage(rt: Runtime, ws: Workstream, reply: Reply) -> None:
    """The stored step's tokens and cost in the metrics (by model and owner)."""
    model = rt.settings.model(reply.model or ws.model)  # a fallback's tokens are its own
    if model is None or not reply.usage:
        return
    price = rt.settings.prices.get(model.name)
    cost = price.cost(reply.usage, model.provider) if price is not None else 0.0
    recording.model_usage(model.name, ws.owner_id or "operator", dict(reply.usage), cost)


def _store(
    rt: Runtime,
    out: Outbox,
    fence: Fence,
    ws: Workstream,
    tools: toolsets.ToolSet,
    reply: Reply,
    step: int,
    prepared: list[tuple[PreparedCall, Any]],
    read_paths: set[str],
    answer: dict[str, Any],
    end_as: TurnStatus,
) -> tuple[Fence | None, calls.StartedCall | None] | None:
    """`_store_reply`: the answer with its calls (`asked.store`), decided again from the
    workstream as it now is should that decline; or the turn's end with the answer (no calls,
    or a cancel asked). The batch's claim and started call when its calls go on, None when
    they wait or the turn ended."""
    found = _found(tools, reply, prepared)
    policy = policy_store.book(rt.db, ws.owner_id) if prepared else EMPTY_POLICY  # read each step
    for tried in range(MAX_DECISIONS + 1):
        if not prepared or end_as != TurnStatus.DONE:
            break
        if tried == MAX_DECISIONS:  # the turn keeps changing under the fence: a bug
            raise RuntimeError(f"turn {fence.turn_id}: its calls could not be stored")
        decided = _decided(ws, tools, fence.turn_id, step, prepared, read_paths, found, policy)
        going = asked.store(rt, out, fence, ws, step, decided, answer)
        if going is not False:
            return going
        with fenced(rt, fence) as (s, turn):  # why not: a cancel, or the workstream changed
            if turn.cancel_requested:
                end_as, prepared = TurnStatus.CANCELLED, []
            fresh = s.get(Workstream, ws.id, populate_existing=True)
            assert fresh is not None
            ws = fresh
    with fenced(rt, fence) as (s, turn):
        if turn.cancel_requested:
            end_as = TurnStatus.CANCELLED
        if found:  # merged into the workstream as it now is
            fresh = s.get(Workstream, ws.id, populate_existing=True)
            assert fresh is not None
            fresh.expanded_tools = tool_search.expanded(fresh.expanded_tools, found)
            s.add(fresh)
        turns.end_turn(s, out, turn, end_as, fence=fence, answer=answer)
    return None


def _decided(
    ws: Workstream,
    tools: toolsets.ToolSet,
    turn_id: str,
    step: int,
    prepared: list[tuple[PreparedCall, Any]],
    read_paths: set[str],
    found: list[str],
    policy: rules.Book,
) -> asked.Asked:
    """The answer's calls decided as `ws` and the admin's `policy` stand, and what they add to it."""
    rows = [
        calls.new_row(ws, turn_id, step, n, p, _version(tools, p), policy)
        for n, (p, _c) in enumerate(prepared)
    ]
    return asked.Asked(
        rows=rows,
        asked_as=[_as_message_call(p, c) for p, c in prepared],
        read_paths=sorted(set(ws.read_paths) | read_paths),
        expanded_tools=tool_search.expanded(ws.expanded_tools, found) if found else None,
        known=[tools.tool(r.func_name) is not None for r in rows],
    )


def _found(tools: toolsets.ToolSet, reply: Reply, prepared: list[tuple[PreparedCall, Any]]) -> list[str]:
    """Deferred tools the provider's own tool search found (it referenced them, or the model
    called one): they join the workstream's expanded tools, as `tool_search` would add them."""
    named = referenced_tools(reply.server_blocks) + [p.func_name for p, _c in prepared if p.error is None]
    return [name for name in named if tools.is_deferred(name)]


def _version(tools: toolsets.ToolSet, p: PreparedCall) -> str | None:
    tool = tools.tool(p.func_name) if p.error is None else None
    return tool.catalog_version if tool is not None else None


def _prepare_all(
    rt: Runtime, ws: Workstream, tools: toolsets.ToolSet, turn_id: str, step: int, requested: list[Any]
) -> tuple[list[tuple[PreparedCall, Any]], set[str]]:
    """Phase 1 for every call; also the read set as the calls left it (read_file marks at prepare)."""
    read_paths: set[str] = set(ws.read_paths)
    seen = _used_ids(rt, turn_id, [call.id for call in requested if call.id]) if step else set()
    out = []
    for n, call in enumerate(requested):
        call_id = _call_id(call.id, n, seen)
        seen.add(call_id)
        ctx = _context(rt, ws, turn_id, call_id, read_paths)
        out.append((prepare_call(tools, call_id, call.name, call.arguments, ctx), call))
    return out, read_paths


def _used_ids(rt: Runtime, turn_id: str, given: list[str]) -> set[str]:
    """Which of the `given` ids an earlier step of the turn used already. A call is found by its
    turn and id (its tool message, `calls.finish_waiting`), so an id is used once per turn; a
    local model numbering every step's calls from `0` gets new ones. The first step has none."""
    if not given:
        return set()
    with rt.db.session() as s:
        used = s.exec(
            select(ToolCall.call_id).where(ToolCall.turn_id == turn_id, col(ToolCall.call_id).in_(given))
        ).all()
    return set(used)


def _call_id(given: str | None, n: int, seen: set[str]) -> str:
    # Local models may repeat, omit or garble ids; a result must name exactly one call of its
    # turn, and the id must fit its column and be storable as it is.
    usable = given and given not in seen and len(given) <= calls.MAX_STORED_NAME and storable(given) == given
    return given if usable and given else f"call_{n}_{turns.new_id()[:8]}"


def _context(rt: Runtime, ws: Workstream, turn_id: str, call_id: str, read_paths: set[str]) -> ToolContext:
    return ToolContext(
        ws_id=ws.id,
        working_dir=ws.working_dir,
        settings=rt.settings.tools,
        model=rt.settings.model(ws.model),
        read_paths=read_paths,
        kind=ws.kind,
        workstream=ws,
        turn_id=turn_id,
        call_id=call_id,
        db=rt.db,
        fetcher=rt.fetcher,
        sandbox=rt.sandbox,
        network=ws.network,
        roots=Roots.from_settings(rt.settings),
    )


def _as_message_call(p: PreparedCall, requested: Any) -> dict[str, Any]:
    return {
        "id": p.call_id,
        "type": "function",
        "function": {"name": requested.name, "arguments": requested.arguments},
    }


def _fail(rt: Runtime, ws_id: str, fence: Fence, message: str, mark: StreamMark | None = None) -> None:
    _finish(rt, ws_id, fence, TurnStatus.ERROR, message, mark)


def _finish(
    rt: Runtime,
    ws_id: str,
    fence: Fence,
    status: TurnStatus,
    error: str | None = None,
    mark: StreamMark | None = None,
) -> None:
    with ordered(rt, ws_id) as out, fenced(rt, fence) as (s, turn):
        if mark is not None:
            mark.send_with(out)
        turns.end_turn(s, out, turn, status, error=error, fence=fence)


def _publisher(rt: Runtime, ws_id: str, fence: Fence, best_effort: bool = False) -> Publish:
    send = rt.events.publish_best_effort if best_effort else rt.events.publish

    def publish(type_: str, **fields: Any) -> int | None:
        return send(ws_id, type_, turn_id=fence.turn_id, fence=fence, **fields)

    return publish
