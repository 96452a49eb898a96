"""Reading request bodies: a wrong body is a 400 (or 413) that names the field, never a 500."""

from __future__ import annotations

import json
from typing import Any

from flask import request
from gunicorn.http.errors import ParseException
from werkzeug.exceptions import ClientDisconnected

from app.errors import BadRequestError, NotFoundError, PayloadTooLargeError, check_text
from app.nesting import is_too_deep
from app.settings import MAX_ID_CHARS

# An over-large body is read and dropped up to this much before the 413 goes out, so that
# a client that sends its whole body before reading (curl, requests) sees the answer and
# not a broken pipe; past it the connection is closed.
MAX_DISCARD_BYTES = 64 * 1024 * 1024

_DISCARD_CHUNK = 64 * 1024


BODY_STALLED = "turnstone.body_stalled"  # environ key: the body's read ran out of time


def json_body() -> dict[str, Any]:
    """The body as a JSON object, whatever its Content-Type says (curl's `-d` says form)."""
    limit = request.max_content_length
    if limit is not None and (request.content_length or 0) > limit:
        raise PayloadTooLargeError(f"body: over the size limit of {limit} bytes", field="body")
    try:
        # get_data before anything touches request.form: a form parse would swallow the body.
        raw = request.get_data(cache=True)
    except ClientDisconnected:  # the server's read timeout, or the client hung up mid-body
        request.environ[BODY_STALLED] = True  # nothing more to wait for: see discard_body
        raise BadRequestError(
            "body: shorter than its Content-Length (the rest did not arrive in time)", field="body"
        ) from None
    except ParseException:  # gunicorn reads chunked bodies as they are asked for
        raise BadRequestError("body: malformed chunked encoding", field="body") from None
    return parse_object(raw) if raw.strip() else {}


def parse_object(raw: str | bytes) -> dict[str, Any]:
    """One JSON object from a request body or a websocket frame; any other text is a 400."""
    if is_too_deep(raw):
        raise BadRequestError("body: JSON nested too deeply", field="body")
    try:
        body = json.loads(raw, parse_constant=_not_json)
    except RecursionError:
        raise BadRequestError("body: JSON nested too deeply", field="body") from None
    except ValueError:  # bad syntax, bytes that are not UTF-8, an integer past Python's digit limit
        raise BadRequestError("body: not valid JSON", field="body") from None
    if not isinstance(body, dict):
        raise BadRequestError("body: expected a JSON object", field="body")
    return body


def discard_body() -> None:
    """Read and drop what is left of the body, up to MAX_DISCARD_BYTES (nothing when it has
    been read already); past that the server closes the connection after its answer."""
    stream = request.environ.get("wsgi.input")
    length = request.content_length
    if request.environ.get(BODY_STALLED):
        return  # its read timed out already: a second wait would only delay the answer
    if stream is None or (length is not None and length > MAX_DISCARD_BYTES):
        return  # not worth reading: the server drops the connection after the answer
    if length is None and "chunked" not in request.headers.get("Transfer-Encoding", "").lower():
        return  # neither a length nor chunks: HTTP/1.1 says there is no body
    left = MAX_DISCARD_BYTES
    try:
        while left > 0 and (chunk := stream.read(min(_DISCARD_CHUNK, left))):
            left -= len(chunk)
    except (OSError, ParseException):  # gone, stalled past the read timeout, or bad chunks
        return  # the server closes the connection after its answer


def path_id(kind: str, value: str) -> str:
    """An id from the URL: one that no stored row can have (too long, a NUL from `%00`) is a
    404 before a query sees it (PostgreSQL refuses NUL in a query's text)."""
    try:
        check_text("id", value, MAX_ID_CHARS)
    except BadRequestError:
        raise NotFoundError(f"no {kind} {value[:MAX_ID_CHARS]!r}") from None
    return value


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")
