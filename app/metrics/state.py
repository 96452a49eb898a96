"""Gauges read from the stored state at scrape time, so that every web process answers the same
and nothing drifts: parked approvals and queued messages (the database), queue depths, live
workers and MCP servers (Redis). A part that cannot be read leaves its gauges out of the answer
and says so in `turnstone_scrape_errors`."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import redis
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import col, select

from app import presence
from app.mcp import status as mcp_status
from app.mcp.states import STATES as MCP_STATES
from app.runtime import Runtime
from app.storage.models import CallStatus, ToolCall, Turn, TurnPhase, TurnStatus
from app.taskqueue import QUEUES

log = logging.getLogger(__name__)


class StateCollector(Collector):
    """The stored-state gauges, computed on each collect."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    def collect(self) -> Iterator[Any]:
        failed = GaugeMetricFamily(
            "turnstone_scrape_errors",
            "Parts of the stored state this scrape could not read (1), by part: database, redis.",
            labels=["part"],
        )
        for part, read in (("database", self._database), ("redis", self._redis)):
            try:
                families = list(read())
            except (SQLAlchemyError, redis.RedisError) as exc:
                log.warning("metrics: could not read the %s: %s", part, type(exc).__name__)
                failed.add_metric([part], 1)
                continue
            failed.add_metric([part], 0)
            yield from families
        yield failed

    def _database(self) -> Iterator[Any]:
        with self._rt.db.reader() as s:
            queued = s.exec(
                select(func.count()).select_from(Turn).where(Turn.status == TurnStatus.QUEUED)
            ).one()
            # Through the parked turns (few, found by the status index), not a scan of every call.
            parked = select(Turn.id).where(Turn.status == TurnStatus.ACTIVE, Turn.phase == TurnPhase.APPROVAL)
            pending = s.exec(
                select(func.count())
                .select_from(ToolCall)
                .where(col(ToolCall.turn_id).in_(parked), ToolCall.status == CallStatus.PENDING)
            ).one()
        yield _gauge("turnstone_queued_messages", "Messages waiting for their turn to start.", queued)
        yield _gauge("turnstone_parked_approvals", "Tool calls waiting for a person's decision.", pending)

    def _redis(self) -> Iterator[Any]:
        client = self._rt.redis
        depths = GaugeMetricFamily(
            "turnstone_queue_depth", "Tasks waiting in a Celery queue (not yet taken).", labels=["queue"]
        )
        with client.pipeline(transaction=False) as pipe:
            for queue in QUEUES:
                pipe.llen(queue)
            lengths = pipe.execute()
        for queue, length in zip(QUEUES, lengths, strict=True):
            depths.add_metric([queue], int(length))
        yield depths
        yield _gauge(
            "turnstone_live_workers", "Celery workers whose presence has not lapsed.", presence.count(client)
        )
        servers = GaugeMetricFamily(
            "turnstone_mcp_servers",
            "Configured MCP servers by state, as the newest worker report has them (connected ones are up).",
            labels=["state"],
        )
        merged = mcp_status.read(client)
        for state in MCP_STATES:
            servers.add_metric([state], sum(1 for s in merged["servers"] if s["state"] == state))
        yield servers


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
