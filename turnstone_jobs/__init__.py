"""The Python client of turnstone-jobs (sync and asyncio) and the terminal client, over the
public HTTP API and websocket only."""

from turnstone_jobs.aio import AsyncClient, AsyncEventStream
from turnstone_jobs.client import Client, EventStream
from turnstone_jobs.errors import (
    ApiError,
    ApprovalNeededError,
    AuthError,
    ClientError,
    ConflictError,
    ConnectionError,
    InvalidRequestError,
    NotFoundError,
    ServerError,
    TimeoutError,
)
from turnstone_jobs.results import (
    ApprovalItem,
    Attachment,
    Decision,
    DecisionResult,
    Event,
    History,
    Message,
    SendReceipt,
    ToolResult,
    TurnResult,
    Workstream,
)
from turnstone_jobs.runs import AsyncRun, AsyncRuns, Run, Runs

__all__ = [
    "ApiError",
    "ApprovalItem",
    "ApprovalNeededError",
    "AsyncClient",
    "AsyncEventStream",
    "AsyncRun",
    "AsyncRuns",
    "Attachment",
    "AuthError",
    "Client",
    "ClientError",
    "ConflictError",
    "ConnectionError",
    "Decision",
    "DecisionResult",
    "Event",
    "EventStream",
    "History",
    "InvalidRequestError",
    "Message",
    "Run",
    "Runs",
    "NotFoundError",
    "SendReceipt",
    "ServerError",
    "TimeoutError",
    "ToolResult",
    "TurnResult",
    "Workstream",
]
