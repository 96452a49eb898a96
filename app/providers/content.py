"""Neutral message content: a string, or a list of parts, `{"type": "text", "text": ...}`
and `{"type": "image", "media_type": ..., "data": <base64>}`; and which images a model is sent."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

# The image types that both wire formats (OpenAI chat, Anthropic Messages) accept;
# sending another makes the request fail, and so every later turn of the workstream.
SENDABLE_MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
NO_VISION_NOTE = "not shown: the current model cannot view images"
UNSENDABLE_NOTE = "not shown: {media_type} images cannot be sent to the model"
# An assistant message's key for the blocks its provider ran itself (see ModelEvent "server_block").
SERVER_BLOCKS = "server_blocks"

T = TypeVar("T")


class Shared(dict[str, Any]):
    """A dict that many requests share: it cannot be changed, so its JSON is made once
    (`json_text`) and spliced into every request body that sends it as it is."""

    __slots__ = ("_json",)

    def json_text(self) -> str:
        try:
            return self._json
        except AttributeError:
            self._json: str = dumps(self)
            return self._json

    def __copy__(self) -> dict[str, Any]:  # a copy is its taker's to change: a plain dict
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return copy.deepcopy(dict(self), memo)

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))

    def _refuse(self, *_args: Any, **_kwargs: Any) -> Any:
        raise TypeError("shared by every request that sends it, never changed: copy it first")

    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = __ior__ = _refuse


class SharedList(list[Any]):
    """A list inside a `frozen` value: it refuses changes as `Shared` does."""

    __slots__ = ()

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return copy.deepcopy(list(self), memo)

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))

    def _refuse(self, *_args: Any, **_kwargs: Any) -> Any:
        raise TypeError("shared by every request that sends it, never changed: copy it first")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = remove = pop = clear = sort = reverse = _refuse


def frozen(value: Any) -> Any:
    """`value` (JSON-like) with every dict and list in it, at any depth, a copy that refuses
    changes (`Shared`, `SharedList`): for what many requests send as it is."""
    if isinstance(value, dict):
        return Shared({key: frozen(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return SharedList(frozen(item) for item in value)
    return value


def shared_with_json(items: dict[str, Any], text: str) -> Shared:
    """`items` as a Shared dict whose JSON, `text`, the caller assembled from shared parts;
    it must be what `dumps(items)` gives."""
    shared = Shared(items)
    shared._json = text
    return shared


class SharedMessage(Shared):
    """A neutral message that a worker keeps (one per stored message) and every step sends:
    its JSON, and what a wire format makes of it (`derived`), are made once."""

    __slots__ = ("_derived",)
    _derived: dict[Hashable, Any]

    def derived(self, key: Hashable, make: Callable[[SharedMessage], T]) -> T:
        """`make(self)`, made the first time `key` is asked for (a format and its options)."""
        try:
            cache = self._derived
        except AttributeError:
            cache = self._derived = {}
        if key not in cache:
            cache[key] = make(self)
        return cast(T, cache[key])


def dumps(value: Any) -> str:
    """JSON as the SDKs send it: compact, UTF-8 (not \\u-escaped)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def text_of(content: Any) -> str:
    """A message's text; of a list of parts, only the text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def split(
    content: Any, supports_vision: bool, supports_pdf: bool = False
) -> tuple[str, list[dict[str, Any]]]:
    """The text to send and the image (and document) parts that go with it.

    An image held back (the model cannot see, or the type is not accepted)
    leaves a note in the text, so the model knows it was not shown. A document part
    (an attached PDF, app/attachments) goes as itself to a model that reads PDFs, else as
    the text it carries.
    """
    if not isinstance(content, list):
        return text_of(content), []
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            texts.append(part.get("text", ""))
        elif part.get("type") == "document":
            if supports_pdf:
                texts.append(part.get("header", ""))
                images.append(part)
            else:
                texts.append(part.get("text", ""))
        elif part.get("type") == "image":
            note = _held_back(part, supports_vision)
            if note is None:
                images.append(part)
            else:
                texts.append(note)
    return "".join(texts), images


def _held_back(image: dict[str, Any], supports_vision: bool) -> str | None:
    """What the text says in place of an image that is not sent (None: it is sent). An attached
    image names its file; one a perception model described is its description
    (app/attachments/perception.py)."""
    name = f"{image['filename']}: " if image.get("filename") else ""
    if not supports_vision:
        if image.get("description"):
            return (
                f"\n[{name}{NO_VISION_NOTE}; a model that can view it describes it:]\n"
                f"{image['description']}\n[end of the description]"
            )
        return f" ({name}{NO_VISION_NOTE}{'; ' + image['note'] if image.get('note') else ''})"
    if image.get("media_type") not in SENDABLE_MEDIA_TYPES:
        return f" ({name}{UNSENDABLE_NOTE.format(media_type=image.get('media_type'))})"
    return None
