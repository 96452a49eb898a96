"""Reading what a person sends, without a server: body parsing, field checks, gunicorn's errors."""

from __future__ import annotations

import json

import pytest
from gunicorn.http import errors

from app.errors import BadRequestError
from app.web import shapes
from app.web.commands import checked_idempotency_key
from app.web.contract import parse
from app.web.gunicorn_worker import REQUEST_READ_TIMEOUT_SECONDS, JsonThreadWorker, error_status, json_error
from app.web.requests import parse_object


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"[]",
        b"null",
        b"1",
        b"\xff",
        b"[" * 100_000,
        b'{"a": NaN}',
        b'{"a": Infinity}',
        b'{"a": 1' + b"0" * 5000 + b"}",
    ],
)
def test_anything_but_one_json_object_is_a_400_on_the_body(raw):
    with pytest.raises(BadRequestError) as caught:
        parse_object(raw)
    assert caught.value.details == {"field": "body"}


def test_a_json_object_is_read_from_bytes_or_text():
    assert parse_object(b'{"message": "hi"}') == parse_object('{"message": "hi"}') == {"message": "hi"}


@pytest.mark.parametrize("value", ["a\x00b", "\ud800", "x\udfff"])
def test_text_that_cannot_be_stored_is_refused_naming_the_field(value):
    with pytest.raises(BadRequestError) as caught:
        parse(shapes.NewWorkstream, {"name": value})
    assert caught.value.details == {"field": "name"}


def test_text_longer_than_its_column_is_refused():
    assert parse(shapes.NewWorkstream, {"name": "n" * 200}).name == "n" * 200
    with pytest.raises(BadRequestError):
        parse(shapes.NewWorkstream, {"name": "n" * 201})


@pytest.mark.parametrize("key", ["", "k" * 201, "caf\u00e9", "tab\t", "new\nline"])
def test_a_bad_idempotency_key_is_refused(key):
    with pytest.raises(BadRequestError):
        checked_idempotency_key(key)


def test_a_good_idempotency_key_passes():
    assert checked_idempotency_key("retry 1/3: ~!") == "retry 1/3: ~!"
    assert checked_idempotency_key(None) is None


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (errors.LimitRequestLine(20_000, 4094), 414),
        (errors.InvalidHeader("CONTENT-LENGTH"), 400),
        (errors.InvalidRequestLine("GET"), 400),
        (errors.LimitRequestHeaders("too many"), 431),
        (errors.UnsupportedTransferCoding(""), 400),
        (errors.InvalidResponseHeader("X"), 500),
        (RuntimeError("boom"), 500),
    ],
)
def test_gunicorns_own_errors_map_to_their_status(exc, status):
    assert error_status(exc)[0] == status


def test_gunicorns_own_errors_are_answered_in_json():
    raw = json_error(414, "URI Too Long", "Request Line is too large (20000 > 4094)")
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 414 URI Too Long\r\n")
    assert b"Content-Type: application/json" in head and b"Connection: close" in head
    assert f"Content-Length: {len(body)}".encode() in head
    assert json.loads(body) == {"error": "uri too long: Request Line is too large (20000 > 4094)"}


def test_a_body_read_times_out_after_the_settings_default_or_the_worker_classs_own():
    """The worker class reads the default when asked (the master loads the class and not the
    settings); a subclass's own value, as the tests' short-read worker sets, still wins."""

    class Impatient(JsonThreadWorker):
        read_timeout = 1.0

    assert object.__new__(JsonThreadWorker).read_timeout == REQUEST_READ_TIMEOUT_SECONDS
    assert object.__new__(Impatient).read_timeout == 1.0
