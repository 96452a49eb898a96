"""Image markers: what counts as one, their summary line, and how the conversation hands them on."""

import base64
import json

import pytest

from app.engine.conversation import stored
from app.storage.models import Message
from app.tools.files import images

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40
DATA = base64.b64encode(PNG).decode()


def marker(**changes) -> str:
    value = {"type": "image", "media_type": "image/png", "path": "/w/pic.png", "size": len(PNG), "data": DATA}
    return json.dumps({**value, **changes})


def test_a_marker_is_image_content():
    assert images.image_content(images.marker("/w/pic.png", "image/png", PNG)) == json.loads(marker())


@pytest.mark.parametrize(
    "text",
    [
        "plain text",
        '{"type": "image", "data": "broken',
        marker(media_type="text/html"),
        marker(size=len(PNG) + 1),
        marker(size="48"),
        marker(data="not base64!"),
        marker(data=None),
        marker(path=7),
        json.dumps({**json.loads(marker()), "extra": 1}),
    ],
    ids=["text", "broken json", "media type", "size", "size text", "base64", "no data", "path", "extra key"],
)
def test_anything_but_a_well_formed_marker_is_text(text):
    assert images.image_content(text) is None


def test_a_marker_over_the_size_cap_is_text():
    too_big = b"\x00" * (images.MAX_IMAGE_BYTES + 3)
    assert images.image_content(images.marker("/w/big.png", "image/png", too_big)) is None


def test_summary_of_a_marker_is_one_short_line():
    big = b"\x89PNG" + b"\x00" * 12_341
    assert images.summary(images.marker("/w/pic.png", "image/png", big)) == (
        "[image: /w/pic.png, image/png, 12,345 bytes]"
    )


def test_summary_of_other_text_is_the_text():
    assert images.summary("   1\thello") == "   1\thello"
    assert images.summary("") == ""


def for_model(*rows: Message) -> list[dict]:
    return stored.for_model("system", list(rows))[1:]  # without the system prompt


def test_for_model_turns_an_image_result_into_text_and_image_parts():
    calls = [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]
    history = for_model(
        Message(ws_id="ws", role="user", content="look"),
        Message(ws_id="ws", role="assistant", content="", tool_calls=calls),
        Message(ws_id="ws", role="tool", tool_call_id="c1", name="read_file", content=marker()),
    )
    assert history[-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": [
            {"type": "text", "text": f"[image: /w/pic.png, image/png, {len(PNG)} bytes]"},
            {"type": "image", "media_type": "image/png", "data": DATA},
        ],
    }
    assert history[:2] == [
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": "", "tool_calls": calls},
    ]


def test_for_model_keeps_a_text_result_as_text():
    history = for_model(Message(ws_id="ws", role="tool", tool_call_id="c1", content="a.txt"))
    assert history == [{"role": "tool", "tool_call_id": "c1", "content": "a.txt"}]
