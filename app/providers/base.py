"""What the provider modules share: the local-server placeholder key, how a model
is named in messages, and how an SDK error becomes a `Failure`."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import httpx2

from app.providers.content import Shared, dumps
from app.providers.failure import (
    CONNECTION_FAILED,
    TIMED_OUT,
    AttemptFailedError,
    Failure,
    parse_retry_after,
    server_code,
    server_message,
)
from app.settings import ModelSettings

# Local OpenAI/Anthropic-compatible servers usually ignore the key, but both
# SDKs refuse to send a request without one.
LOCAL_SERVER_API_KEY = "not-needed"


def api_key_for(model: ModelSettings) -> str:
    return model.api_key or LOCAL_SERVER_API_KEY


def describe_target(model: ModelSettings, default_base_url: str) -> str:
    return f"{model.provider} model {model.model!r} at {model.base_url or default_base_url}"


def status_failure(status: int, headers: Mapping[str, str], body: object, fallback: str) -> Failure:
    # A status below 400 here is an error event inside a 200 stream: the
    # server broke down mid-reply, which is worth a retry like a 5xx.
    return Failure(
        status=status if status >= 400 else None,
        message=server_message(body, fallback),
        retry_after=parse_retry_after(headers),
        code=server_code(body),
    )


def truncated_failure() -> Failure:
    # A server killed mid-reply may close the connection cleanly; without this
    # check a cut-off reply would pass for a short, complete one.
    return Failure(status=None, message="the stream ended before the reply was complete")


def malformed_failure(detail: str) -> Failure:
    # A broken SSE line (a proxy cutting a frame, a server bug) is a broken
    # stream like any other, and worth another try.
    return Failure(status=None, message=f"the stream carried a malformed event ({detail})")


def connection_failure(exc: BaseException, timeout_seconds: float) -> Failure:
    cause = exc.__cause__ or exc.__context__
    detail = f"{exc} ({cause})" if cause and str(cause) else str(exc)
    if "timed out" in detail.lower() or "timeout" in type(exc).__name__.lower():
        return Failure(status=None, message=f"{TIMED_OUT} {timeout_seconds:g} s: {detail}")
    return Failure(status=None, message=f"{CONNECTION_FAILED}: {detail}")


@functools.lru_cache(maxsize=32)
def cached_client(
    client_class: type, api_key: str, base_url: str, timeout_seconds: float, idle_seconds: float | None = None
) -> Any:
    """One SDK client per endpoint, shared by the worker's threads: building one costs ~50 ms
    (its HTTP client and TLS context), and a shared one keeps connections alive. `idle_seconds`:
    how long a read may wait for the server's next bytes (a stalled stream), when not the timeout."""
    return client_class(
        api_key=api_key,
        # Passed even when unset so the SDK never falls back to the environment.
        base_url=base_url,
        timeout=httpx2.Timeout(timeout_seconds, read=idle_seconds or timeout_seconds),
        max_retries=0,  # our retry loop decides
    )


SPLICED = ("tools", "messages")  # the body's lists whose items may be Shared


def raw_request(params: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    """The JSON body and headers of a `create(**params)` call, for the SDK client's `post`:
    `extra_headers` go with the headers and `extra_body` into the body, as `create` would put
    them. Serialised as the SDKs do (UTF-8, compact), in one `json.dumps`."""
    body = {key: value for key, value in params.items() if key not in ("extra_headers", "extra_body")}
    body.update(params.get("extra_body") or {})
    headers = {"Content-Type": "application/json", **(params.get("extra_headers") or {})}
    # The tools and the messages go last, each shared item's JSON as made once (Shared).
    spliced = {key: body.pop(key) for key in SPLICED if isinstance(body.get(key), list)}
    members = [dumps(body)[1:-1]] if body else []
    for key, items in spliced.items():
        listed = ",".join(i.json_text() if isinstance(i, Shared) else dumps(i) for i in items)
        members.append(f'"{key}":[{listed}]')
    return f"{{{','.join(members)}}}".encode(), headers


def post_stream(client: Any, path: str, params: dict[str, Any], cast_to: type, stream_cls: type) -> Any:
    """`create(stream=True, **params)` on either SDK with the body serialised here, in one
    `json.dumps` (`raw_request`): the SDK's own preparation walks every message of the history
    on every step and leaves plain JSON as it is. The SDK still sends it, with its headers,
    error mapping and stream class."""
    body, headers = raw_request(params)
    return client.post(
        path, content=body, options={"headers": headers}, cast_to=cast_to, stream=True, stream_cls=stream_cls
    )


@contextmanager
def sdk_failures(
    sdk: ModuleType, timeout_seconds: float, transport_errors: tuple[type[BaseException], ...] = ()
) -> Iterator[None]:
    """SDK errors (the openai and anthropic SDKs share their names) leave as `AttemptFailedError`."""
    try:
        yield
    except sdk.APIStatusError as exc:
        failure = status_failure(exc.status_code, exc.response.headers, exc.body, exc.message)
        raise AttemptFailedError(failure) from None
    except sdk.APIConnectionError as exc:
        raise AttemptFailedError(connection_failure(exc, timeout_seconds)) from None
    except sdk.APIError as exc:  # an error event inside the stream
        # Its body may be the server's words alone (TGI: `{"error": "<text>"}`), which the
        # openai SDK's message replaces with "An error occurred during streaming".
        message = server_message(exc.body, exc.message)
        failure = Failure(status=None, message=message, code=server_code(exc.body))
        raise AttemptFailedError(failure) from None
    except json.JSONDecodeError as exc:  # the SDKs parse each event's data unguarded
        raise AttemptFailedError(malformed_failure(exc.msg)) from None
    except RecursionError:  # data nested deeper than the parser goes: a hostile or broken server
        raise AttemptFailedError(malformed_failure("nested too deep")) from None
    except transport_errors as exc:
        raise AttemptFailedError(connection_failure(exc, timeout_seconds)) from None
