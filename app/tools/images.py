"""Image content in a tool result: the marker read_file returns to a model with vision.

A `ToolOutcome` carries text only, so an image travels as one JSON object,
`{"type": "image", "media_type": ..., "path": ..., "size": ..., "data": <base64>}`,
and `image_content()` is how the provider layer recognises it and turns it into
the wire format's image part.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

MAX_IMAGE_BYTES = 4 * 1024 * 1024  # 4 MiB, larger images are refused
MARKER_TYPE = "image"
MEDIA_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".bmp": "image/bmp",
    ".tiff": "image/tiff",
    ".tif": "image/tiff",
    ".ico": "image/vnd.microsoft.icon",
}


def media_type(path: str) -> str | None:
    """The image type its extension names (any case), or None for every other file (SVG too)."""
    return MEDIA_TYPES.get(os.path.splitext(path)[1].lower())


def marker(path: str, media: str, data: bytes) -> str:
    return json.dumps(
        {
            "type": MARKER_TYPE,
            "media_type": media,
            "path": path,
            "size": len(data),
            "data": base64.b64encode(data).decode("ascii"),
        }
    )


def image_content(output: str) -> dict[str, Any] | None:
    """The image a tool result carries, or None when it is ordinary text."""
    if not output.startswith('{"type": "image"'):
        return None
    try:
        value = json.loads(output)
    except json.JSONDecodeError:
        return None
    keys = {"type", "media_type", "path", "size", "data"}
    if isinstance(value, dict) and set(value) == keys and value["type"] == MARKER_TYPE:
        return value
    return None
