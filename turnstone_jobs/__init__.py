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

__all__ = [
    "ApiError",
    "ApprovalItem",
    "ApprovalNeededError",
    "AsyncClient",
    "AsyncEventStream",
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
    "NotFoundError",
    "SendReceipt",
    "ServerError",
    "TimeoutError",
    "ToolResult",
    "TurnResult",
    "Workstream",
]
