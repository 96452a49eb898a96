"""Files as the file tools see them: paths resolved against the working directory,
the read-before-edit set, binary sniffing, and text loaded and saved byte for byte.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from typing import Any

from app.storage.types import UNSTORABLE
from app.tools.core.base import ToolContext

SNIFF_BYTES = 8192  # a NUL byte in this much of the head marks a file as binary
ENCODING = "utf-8"
# Undecodable bytes survive a load and save unchanged (edits never corrupt them).
ROUND_TRIP = "surrogateescape"


class FileToolError(Exception):
    """A file cannot be used as asked; the message is the model-facing error text."""


def path_argument(args: dict[str, Any], key: str, tool: str, required: bool = True) -> str | None:
    """The string argument `key`, or `FileToolError` naming what is wrong with it.

    An optional path given as "" counts as not given: models fill optional fields so.
    """
    value = args.get(key)
    if value in (None, "") and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise FileToolError(f"Error: {tool} needs a non-empty '{key}' string")
    if "\0" in value:
        raise FileToolError(f"Error: '{key}' contains a NUL character, which no path can hold")
    if found := UNSTORABLE.search(value):
        raise FileToolError(
            f"Error: '{key}' contains a lone surrogate (U+{ord(found.group()):04X}), which is not a "
            "character; send the path as text"
        )
    return value


def check_text(value: str, key: str, tool: str, where: str = "") -> None:
    """`FileToolError` if the text argument `key` holds a NUL (binary content) or a lone surrogate
    (no character at all): stored call arguments rewrite both (UNSTORABLE), so a call taking them
    would write one thing when it runs at once and another once approved."""
    found = UNSTORABLE.search(value)
    if found is None:
        return
    if found.group() == "\0":
        raise FileToolError(
            f"Error: {where}'{key}' contains a NUL character; {tool} handles text only, so write "
            "binary content with bash (printf with \\x escapes, or base64 -d)"
        )
    raise FileToolError(
        f"Error: {where}'{key}' contains a lone surrogate (U+{ord(found.group()):04X}), which is not "
        "a character and cannot be written as UTF-8; send the text itself (a character past U+FFFF "
        "as both halves of its surrogate pair)"
    )


def mark_read(ctx: ToolContext, resolved: str) -> None:
    ctx.read_paths.add(resolved)


def has_read(ctx: ToolContext, resolved: str) -> bool:
    return resolved in ctx.read_paths


def is_binary(head: bytes) -> bool:
    return b"\x00" in head[:SNIFF_BYTES]


def check_file(resolved: str, shown: str) -> None:
    """`FileToolError` unless `resolved` is an existing regular file."""
    if os.path.isdir(resolved):
        raise FileToolError(f"Error: {shown} is a directory, not a file")
    if not os.path.exists(resolved):
        raise FileToolError(f"Error: file not found: {shown}")
    if not os.path.isfile(resolved):
        # A FIFO would block the reader forever, a device could stream without end.
        raise FileToolError(f"Error: {shown} is not a regular file (a pipe, socket or device)")


def check_target(resolved: str, shown: str) -> None:
    """`FileToolError` unless `resolved` may be written: a regular file, or nothing yet."""
    if os.path.isdir(resolved):
        raise FileToolError(f"Error: {shown} is a directory, not a file")
    if os.path.exists(resolved):
        check_file(resolved, shown)


def load_text(fd: int, shown: str) -> str:
    """The whole file open at `fd` (closed after) as text, line endings untouched; binary
    files refused. The descriptor comes from `reach.open_file`, which checked what it opened."""
    with os.fdopen(fd, "rb") as file:
        data = file.read()
    if is_binary(data):
        raise FileToolError(binary_refusal(shown))
    return data.decode(ENCODING, ROUND_TRIP)


def binary_refusal(shown: str) -> str:
    return (
        f"Error: {shown} is a binary file (it contains NUL bytes), so it cannot be shown as text; "
        f"inspect it with bash instead (for example `file {shown}` or `xxd {shown} | head`)"
    )


def save_text(folder: int, name: str, text: str) -> None:
    """Replace the file `name` in the open folder `folder` in one step: readers see the old or
    the new, never half. Working through the folder's descriptor, a link swapped in for the
    folder since it was checked cannot send the write elsewhere.

    The file keeps its permission bits; a new file gets the usual ones (umask).
    """
    temp = f".turnstone-{secrets.token_hex(8)}.tmp"
    kept = _mode_of(folder, name)
    # A new file's mode is left to the kernel's umask: reading the umask means setting
    # it, and tools run on several threads. An existing file's temp starts private and
    # gets the file's bits before it takes its place.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temp, flags, 0o666 if kept is None else 0o600, dir_fd=folder)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(text.encode(ENCODING, ROUND_TRIP))
            if kept is not None:
                os.fchmod(file.fileno(), kept)
        os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=folder)
        raise


def append_text(folder: int, name: str, text: str, shown: str) -> None:
    """Add `text` to the end of the file `name` in the open folder (created if missing); a link
    in its place is refused (ELOOP), not followed, and so is a file with other hard links."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(name, flags, 0o666, dir_fd=folder)
    with os.fdopen(fd, "ab") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileToolError(f"Error: {shown} is not a regular file (a pipe, socket or device)")
        if info.st_nlink > 1:
            raise FileToolError(linked_refusal(shown, info.st_nlink))
        file.write(text.encode(ENCODING, ROUND_TRIP))


def linked_refusal(shown: str, links: int) -> str:
    return (
        f"Error: {shown} has {links} hard links, and the file tools do not open such a file in the "
        "workstream's folder: another of its names may lie outside the folders they may reach. "
        "Copy it (`cp`) to work on a file of its own"
    )


def _mode_of(folder: int, name: str) -> int | None:
    """The permission bits of an existing file, or None when there is none yet."""
    try:
        return stat.S_IMODE(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return None
