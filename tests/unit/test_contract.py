"""A route's model refuses what its document forbids with a 400 that names the field in the API's
own words (app/web/contract.py): never pydantic's text, never a 500."""

from __future__ import annotations

import pytest

from app.errors import BadRequestError
from app.web import shapes
from app.web.contract import parse


@pytest.mark.parametrize(
    ("model", "body", "field", "message"),
    [
        (shapes.Send, {}, "message", "message: required"),
        (shapes.Send, {"message": "   "}, "message", "message: must not be empty"),
        (shapes.Send, {"message": "a\x00b"}, "message", "message: must not contain a NUL character"),
        (
            shapes.Send,
            {"message": "\ud800"},
            "message",
            "message: contains a lone surrogate (not valid Unicode)",
        ),
        (shapes.Send, {"message": 5}, "message", "message: expected string, got integer"),
        (shapes.Send, {"message": ["x"]}, "message", "message: expected string, got array"),
        (
            shapes.Send,
            {"mesage": "typo"},
            "mesage",
            "mesage: unknown field (fields: message, attachments, idempotency_key)",
        ),
        (shapes.Approve, {"approved": 1}, "approved", "approved: expected boolean, got integer"),
        (shapes.Approve, {"approved": "yes"}, "approved", "approved: expected boolean, got string"),
        (shapes.Rewind, {"to": True}, "to", "to: expected integer, got boolean"),
        (shapes.Rewind, {"to": 1.5}, "to", "to: expected integer, got number"),
        (shapes.Rewind, {"to": -1}, "to", "to: must be at least 0"),
        (shapes.Rewind, {"to": 2**80}, "to", "to: must be at most 2147483647"),
        (shapes.NewWorkstream, {"name": "n" * 201}, "name", "name: at most 200 characters, got 201"),
        (
            shapes.NewWorkstream,
            {"tool_search": {"mode": "sometimes"}},
            "tool_search.mode",
            "tool_search.mode: must be one of auto, on or off",
        ),
        (
            shapes.NewWorkstream,
            {"tool_search": {"deep": {"a": [1]}}},
            "tool_search.deep",
            "tool_search.deep: unknown field (fields: mode, threshold, max_results)",
        ),
        (
            shapes.CreateToken,
            {"scopes": ["read", "root"]},
            "scopes[1]",
            "scopes[1]: must be one of read, write, approve or admin",
        ),
        (shapes.NewChannel, {"channel_type": "webhook"}, "url", "url: required"),
        (shapes.NewChannel, {"channel_type": "ntfy", "topic": "ok", "x\x00" * 200: 1}, "x\x00" * 50, None),
        (shapes.NewMcpServer, {"name": "a__b", "command": "x"}, "name", None),
    ],
)
def test_a_wrong_field_is_a_400_naming_it(model, body, field, message):
    with pytest.raises(BadRequestError) as refused:
        parse(model, body)
    assert refused.value.status == 400
    assert refused.value.details["field"] == field
    if message is not None:
        assert refused.value.message == message
    assert len(refused.value.message) < 400  # a hostile key is cut short, not echoed whole


def test_a_whole_number_written_with_a_point_is_that_number():
    assert parse(shapes.Rewind, {"to": 7.0}).to == 7
    assert parse(shapes.NewWorkstream, {"tool_search": {"threshold": 10.0}}).tool_search.threshold == 10


def test_null_is_the_same_as_leaving_a_field_out():
    body = parse(shapes.NewWorkstream, {"name": None, "auto_approve": None})
    assert body.given() == {}


def test_one_of_several_shapes_is_told_by_its_fixed_field():
    bot = parse(shapes.NewChannel, {"channel_type": "discord", "channel_id": "123"}).root
    assert isinstance(bot, shapes.DiscordBotChannel)
    http = parse(shapes.NewMcpServer, {"name": "remote", "url": "https://mcp.example/mcp"}).root
    assert isinstance(http, shapes.NewHttpMcpServer)


def test_one_regex_is_said_in_one_way() -> None:
    """Errors find a pattern's words by its regex: a second field giving the same regex other
    words would change the first field's error message (it did: a topic's error spoke of
    built-in tools)."""
    from app.web.contract import pattern

    pattern(r"^[a-z]{1,3}$", rule="1-3 small letters")
    pattern(r"^[a-z]{1,3}$", rule="1-3 small letters")  # the same words again: fine
    with pytest.raises(ValueError, match="already said"):
        pattern(r"^[a-z]{1,3}$", rule="up to three letters")
