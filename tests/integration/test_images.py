"""An image read_file reads reaches a model that can see, in its wire format; one that cannot gets words."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path

import pytest

from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration


def png(width: int = 2, height: int = 2) -> bytes:
    """A real, decodable RGB PNG, every pixel red."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def read_picture(api, model, open_socket, workdir: Path, model_name: str | None) -> tuple[bytes, dict]:
    """A turn in which the model reads pic.png; the request the model got after it."""
    picture = png()
    (workdir / "pic.png").write_bytes(picture)
    ws_id = api.create_workstream(working_dir=str(workdir), **({"model": model_name} if model_name else {}))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("read_file", {"path": "pic.png"}, id="call_pic")]))
    model.enqueue(Reply(text="a red square"))
    turn_id = api.send(ws_id, "what is in pic.png?")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    assert "".join(e["text"] for e in sock.of_type("content")) == "a red square"
    # People see a line about the image, live and in the history; the base64 is the model's alone.
    if model_name:
        shown = f"[image: {workdir / 'pic.png'}, image/png, {len(picture)} bytes]"
        assert sock.wait_type("tool_result")["output"] == shown
        assert [m["content"] for m in api.history(ws_id) if m["role"] == "tool"] == [shown]
    return picture, model.history[-1].body


def test_an_openai_model_with_vision_gets_the_image_after_the_tool_result(api, model, open_socket, workdir):
    picture, body = read_picture(api, model, open_socket, workdir, "vision")
    tool_message, image_message = body["messages"][-2:]
    summary = f"[image: {workdir / 'pic.png'}, image/png, {len(picture)} bytes]"
    assert tool_message == {"role": "tool", "tool_call_id": "call_pic", "content": summary}
    assert image_message == {
        "role": "user",
        "content": [
            {"type": "text", "text": f"Image from call_pic: {summary}"},
            {
                "type": "image_url",
                "image_url": {"url": "data:image/png;base64," + base64.b64encode(picture).decode()},
            },
        ],
    }


def test_an_anthropic_model_with_vision_gets_the_image_in_the_tool_result(api, model, open_socket, workdir):
    picture, body = read_picture(api, model, open_socket, workdir, "claude")
    result = body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "call_pic"
    assert result["content"] == [
        {"type": "text", "text": f"[image: {workdir / 'pic.png'}, image/png, {len(picture)} bytes]"},
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(picture).decode(),
            },
        },
    ]


def test_a_model_without_vision_gets_a_description_and_no_image(api, model, open_socket, workdir):
    picture, body = read_picture(api, model, open_socket, workdir, None)
    last = body["messages"][-1]
    assert last["role"] == "tool" and last["tool_call_id"] == "call_pic"
    assert last["content"].startswith(f"pic.png is an image (image/png, {len(picture)} bytes).")
    assert "cannot view images" in last["content"]
    assert base64.b64encode(picture).decode() not in json.dumps(body)
