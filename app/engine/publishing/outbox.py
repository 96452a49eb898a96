"""A transition's events go out after it commits, and in the order the transitions committed.

Events sent before the commit could be acted on before the state they announce is
visible (a client approving the call an `approve_request` names, and told it is not
pending); events sent after it could be overtaken by the next transition's, sent by
another process (an `approval_resolved` before the `attention` it resolves). So each
transition of a workstream holds that workstream's ordering lock from before its
transaction until its events are out. What the transition sets going elsewhere (a
sub-agent's end finishing its parent's call) runs once the lock is released. The events and the
lock's release go to Redis together, in one round trip (`EventLog.publish_many`).

A phase task the transition starts may be sent as soon as it has committed, before its events
(`Outbox.on_commit`): the task's claim waits until the workstream's ordering lock is free
(`wait_for_order`), so the phase's own events still come after the ones that announce it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import redis
from redis.lock import Lock

from app import redis_keys
from app.events import Fence, NewEvent, ScriptCall, retrying
from app.runtime import Runtime

log = logging.getLogger(__name__)

# A holder that died leaves the lock for this long at most; a waiter waits that long at
# most, then goes on unordered rather than not at all.
ORDER_LOCK_SECONDS = 10.0
# How long a claim waiting out a lock waits for the holder's events before it looks at the lock
# again: the wait of one whose holder publishes none (all refused by their fences), or died.
ORDER_WAKE_SECONDS = 0.25


# Takes what follows a transition's commit, to run it later in the same thread (`ordered`).
Defer = Callable[[Callable[[], None]], object]


@dataclass
class Outbox:
    """The events of one transition, sent once it has committed; then its `after` actions."""

    ws_id: str
    events: list[NewEvent] = field(default_factory=list)
    committed: list[Callable[[Runtime], object]] = field(default_factory=list)
    actions: list[Callable[[Runtime], object]] = field(default_factory=list)
    then: list[ScriptCall] = field(default_factory=list)  # scripts sent with the events, after them
    is_tried: bool = False  # the transition committed and its events were sent (they may be out)
    is_sent: bool = False  # they are out, with `then`

    def add(
        self, type_: str, *, turn_id: str | None = None, fence: Fence | None = None, **fields: Any
    ) -> None:
        self.events.append(NewEvent(type_, turn_id, fence, fields))

    def on_commit(self, action: Callable[[Runtime], object]) -> None:
        """Run `action(rt)` once the transition has committed, before its events go out: for
        sending a phase task, whose claim waits for those events (`wait_for_order`). Its events
        go out even when it fails."""
        self.committed.append(action)

    def after(self, action: Callable[[Runtime], object]) -> None:
        """Run `action(rt)` once the transition has committed, its events are out and the
        workstream's ordering lock is released (it may take another workstream's)."""
        self.actions.append(action)


@contextmanager
def ordered(rt: Runtime, ws_id: str, defer: Defer | None = None) -> Iterator[Outbox]:
    """Run a transition (its transaction inside this block) whose events go out in order.

    With `defer`, what follows the commit (the tasks it sends, its events, the lock's release,
    its `after` actions) is handed to `defer` to be run later in this thread, instead of before
    the block ends: a web request answers once its transition is stored and does the rest right
    after its response (`app/web/after_response.py`). The lock stays held until then, so this
    thread must take no other lock of the workstream's in between: it would wait out its own."""
    lock = rt.redis.lock(
        redis_keys.ws_order(ws_id), timeout=ORDER_LOCK_SECONDS, blocking_timeout=ORDER_LOCK_SECONDS
    )
    held = _take(rt, lock, ws_id)
    if not held:
        log.warning("workstream %s: ordering lock not had in %s s; going on", ws_id, ORDER_LOCK_SECONDS)
    box = Outbox(ws_id)
    try:
        yield box
    except BaseException:  # rolled back: nothing to send
        if held:
            _release(lock, ws_id)
        raise
    finish = partial(_finish, rt, box, lock if held else None)
    if defer is None:
        finish()
    else:
        defer(finish)


def _take(rt: Runtime, lock: Lock, ws_id: str) -> bool:
    """Take the ordering lock. A worker rides out a Redis outage as publishing does: a transition
    that gave up here would throw away finished work (a command's result, a paid-for answer)."""
    token = uuid.uuid4().hex
    attempts = 0

    def attempt() -> bool:
        nonlocal attempts
        attempts += 1
        # An attempt whose answer was lost may have taken it: then it is ours, not someone's.
        if attempts > 1 and rt.redis.get(lock.name) == token.encode():
            lock.local.token = token.encode()
            return True
        return bool(lock.acquire(token=token))

    if not rt.waits_out_outages:
        return attempt()
    return retrying(attempt, rt.events.retry_seconds, f"workstream {ws_id}: ordering lock")


def _finish(rt: Runtime, box: Outbox, lock: Lock | None) -> None:
    """What follows a transition's commit: its early actions, its events with the lock's
    release, then its `after` actions."""
    try:
        try:
            for early in box.committed:
                early(rt)
        finally:
            _publish(rt, box, lock)
    finally:
        if lock is not None and lock.local.token is not None:  # not sent with the events
            _release(lock, box.ws_id)
    for action in box.actions:
        action(rt)


def wait_for_order(rt: Runtime, ws_id: str) -> None:
    """Return once the workstream's ordering lock is free: the transition holding it has sent
    its events. Called by a claim that found the lock held (`EventLog.set_fence`), so that a
    phase sent before its starter's events (`Outbox.on_commit`) publishes nothing before them.
    Gives up as `ordered` does, after ORDER_LOCK_SECONDS.

    The holder releases the lock in the Redis transaction that adds its events to the
    workstream's log, so the wait is a blocking read of the log from its last entry: it wakes
    as the events go in. A holder with no events, or one that died, is seen at the read's
    timeout (ORDER_WAKE_SECONDS), when the lock is looked at again."""
    lock, log_key = redis_keys.ws_order(ws_id), redis_keys.event_log(ws_id)
    deadline = time.monotonic() + ORDER_LOCK_SECONDS
    while True:
        with rt.redis.pipeline(transaction=True) as pipe:
            pipe.exists(lock)
            pipe.xrevrange(log_key, count=1)
            held, last = pipe.execute()
        if not held:
            return
        if time.monotonic() > deadline:
            log.warning("workstream %s: ordering lock held over %s s; going on", ws_id, ORDER_LOCK_SECONDS)
            return
        after = last[0][0] if last else b"0-0"
        rt.redis.xread({log_key: after}, count=1, block=int(ORDER_WAKE_SECONDS * 1000))


def _publish(rt: Runtime, box: Outbox, lock: Lock | None) -> None:
    """Send the box's events, its `then` and the release of `lock` after them, in one round trip."""
    box.is_tried = True
    try:
        rt.events.publish_many(box.ws_id, box.events, then=box.then, release=lock)
    except redis.exceptions.LockNotOwnedError:  # raised once the events are out
        _warn_expired(box.ws_id)
    box.is_sent = True


def _release(lock: Lock, ws_id: str) -> None:
    try:
        lock.release()
    except redis.exceptions.LockError:
        _warn_expired(ws_id)


def _warn_expired(ws_id: str) -> None:
    """The lock expired while held (someone else may hold it now): its events may be out of order."""
    log.warning("workstream %s: ordering lock expired before its events were out", ws_id)
