"""Where the file tools may go: they write only in the workstream's folder, read there and in the
read-only roots, and never open the kernel's views, the host's secrets or the service's own files.

A path is resolved (`~`, relative to the folder, `..`, symbolic links) before it is judged, and
what is then opened is judged again: the last component is opened without following a link, and
the kernel's name for the opened file must be the path that was judged (docs/security.md, "The
file tools").
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from app.sandbox.reach import HOST_SECRETS, KERNEL_VIEWS, Roots, is_within, process_roots
from app.tools.core.base import ToolContext
from app.tools.files.paths import FileToolError, linked_refusal

READ = "read"
WRITE = "write"
OPENED_NAME = "/proc/self/fd/{}"  # the kernel's name for what a descriptor opened


def roots_of(ctx: ToolContext) -> Roots:
    return ctx.roots if ctx.roots is not None else process_roots()


def resolve(path: str, ctx: ToolContext) -> str:
    """`path` as an absolute, canonical path: `~` expanded, relative ones started at the
    workstream's folder, `..` and every symbolic link on the way resolved."""
    try:
        return os.path.realpath(os.path.join(ctx.working_dir, os.path.expanduser(path)))
    except OSError as exc:  # a link on the way the service may not read
        raise FileToolError(f"Error: {_short(path)} cannot be used as a path ({exc.strerror})") from None
    except ValueError as exc:  # a NUL byte, a lone surrogate
        raise FileToolError(f"Error: {_short(path)} cannot be used as a path ({str(exc)[:100]})") from None


def check(path: str, ctx: ToolContext, access: str) -> str:
    """The resolved path, or `FileToolError` naming the rule that refuses `access` to it."""
    plain = _plain(path, ctx)
    if any(is_within(plain, view) for view in KERNEL_VIEWS):
        # Not even resolved: its magic links (/proc/self/root, /proc/N/cwd) lead anywhere.
        raise FileToolError(f"Error: {_short(path)} {_never(KERNEL_VIEWS[0], ctx)}")
    resolved = resolve(path, ctx)
    why = refusal(resolved, ctx, access)
    if why is not None:
        raise FileToolError(f"Error: {_short(path)}{_leads_to(path, resolved, ctx)} {why}")
    return resolved


def refusal(resolved: str, ctx: ToolContext, access: str) -> str | None:
    """Why the resolved path is out of reach for `access` ("read" or "write"), or None."""
    roots = roots_of(ctx)
    folder = os.path.realpath(ctx.working_dir)
    for hidden in roots.never:
        if is_within(resolved, hidden) and not _is_own_folder(resolved, hidden, folder, roots):
            return _never(hidden, ctx)
    if is_within(resolved, folder):
        return None
    if access == WRITE:
        return (
            f"is outside the workstream's folder, where alone the file tools write. {_allowed(folder, roots)}"
        )
    if any(is_within(resolved, root) for root in roots.read_only):
        return None
    return f"is outside the folders the file tools may read. {_allowed(folder, roots)}"


def _never(hidden: str, ctx: ToolContext) -> str:
    roots = roots_of(ctx)
    folder = os.path.realpath(ctx.working_dir)
    return f"is never opened by the file tools: {_kind_of(hidden, roots)}. {_allowed(folder, roots)}"


def _is_own_folder(resolved: str, hidden: str, folder: str, roots: Roots) -> bool:
    """The workstream's own folder inside the data root is let through (not the data root itself:
    a folder that is the whole data root would open every other workstream's)."""
    return (
        hidden == roots.data_root
        and folder != roots.data_root
        and is_within(folder, roots.data_root)
        and is_within(resolved, folder)
    )


def _kind_of(hidden: str, roots: Roots) -> str:
    if hidden in KERNEL_VIEWS:
        return "the kernel's views of the host (/proc, /sys)"
    if hidden == roots.data_root:
        return "it is in the service's data folder, which holds every workstream's folder"
    if hidden in HOST_SECRETS:
        return "it is one of the host's password or key files"
    return "it is one of the service's own files (its database or its config file)"


def _allowed(folder: str, roots: Roots) -> str:
    shown = ", ".join(roots.shown_read_only) or "none"
    return f"They write in the workstream's folder, {folder}, and read there and in {shown}"


def _leads_to(path: str, resolved: str, ctx: ToolContext) -> str:
    """The note "(which leads to X)" when links or `..` took the path somewhere it does not say."""
    return "" if _plain(path, ctx) == resolved else f" (which leads to {_short(resolved)})"


def _plain(path: str, ctx: ToolContext) -> str:
    """`path` made absolute and `..` removed by its text alone, no link followed."""
    try:
        return os.path.normpath(os.path.join(ctx.working_dir, os.path.expanduser(path)))
    except ValueError:  # a NUL byte: resolve() says so
        return path


def _short(path: str) -> str:
    return path if len(path) <= 300 else f"{path[:300]}... ({len(path):,} characters)"


# -- opening what was checked ------------------------------------------------------------------


def open_file(resolved: str, shown: str, ctx: ToolContext, access: str = READ) -> int:
    """A descriptor of the regular file at `resolved` (already checked), opened for reading
    without following a link in its last component, and judged again by what it opened."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a FIFO swapped in
    try:
        fd = os.open(resolved, flags)
    except OSError as exc:
        raise _open_error(exc, shown) from None
    try:
        verify(fd, resolved, shown, ctx, access)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileToolError(f"Error: {shown} is not a regular file (a pipe, socket or device)")
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_folder(resolved: str, shown: str, ctx: ToolContext) -> int:
    """A descriptor of the folder at `resolved` (already checked for writing), its missing parts
    created one by one below the nearest existing one, none of them through a link."""
    existing, missing = resolved, []
    while not os.path.lexists(existing):
        existing, name = os.path.split(existing)
        missing.append(name)
    fd = os.open(existing, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # OSError: the caller's to word
    try:
        verify(fd, existing, shown, ctx, WRITE)
        for name in reversed(missing):
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = inner
    except OSError as exc:
        os.close(fd)
        if exc.errno == errno.ELOOP:
            raise _open_error(exc, shown) from None
        raise
    except BaseException:
        os.close(fd)
        raise
    return fd


def verify(fd: int, checked: str, shown: str, ctx: ToolContext, access: str) -> None:
    """`FileToolError` unless `fd` opened `checked` itself (no link or folder swapped in since
    the check) and, if it is a file, one `file_refusal` lets through."""
    try:
        opened = os.readlink(OPENED_NAME.format(fd))
    except OSError:  # no /proc in this process: the same file by device and inode will do
        opened = checked if _is_same_file(fd, checked) else "(another file)"
    if opened != checked:
        raise FileToolError(
            f"Error: {shown} changed while it was being opened (a link or folder was swapped in "
            "after it was checked), so it was not opened"
        )
    why = file_refusal(os.fstat(fd), checked, shown, ctx, access)
    if why is not None:
        raise FileToolError(why)


def file_refusal(info: os.stat_result, checked: str, shown: str, ctx: ToolContext, access: str) -> str | None:
    """Why the file itself (not its path) is not opened, or None. A file with other hard links in
    the workstream's folder: a path cannot tell where its other names lie. A file in a read-only
    root that not everyone may read: the worker may run with more rights than a jailed command
    (root reads /etc/ssl/private), and the file tools read no more there than the command could."""
    if not stat.S_ISREG(info.st_mode):
        return None
    if info.st_nlink > 1 and is_linked_rule(checked, ctx, access):
        return linked_refusal(shown, info.st_nlink)
    if not is_within(checked, os.path.realpath(ctx.working_dir)) and not info.st_mode & stat.S_IROTH:
        return (
            f"Error: {shown} is not readable by every user, and outside the workstream's folder the "
            "file tools read only what any user may"
        )
    return None


def check_replaceable(folder: int, name: str, shown: str) -> None:
    """`FileToolError` unless `name` in the open folder is nothing yet or a regular file of one
    link: what a whole-file write may put its new file in place of."""
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise _open_error(OSError(errno.ELOOP, os.strerror(errno.ELOOP)), shown)
    if not stat.S_ISREG(info.st_mode):
        raise FileToolError(f"Error: {shown} is not a regular file")
    if info.st_nlink > 1:
        raise FileToolError(linked_refusal(shown, info.st_nlink))


def is_linked_rule(checked: str, ctx: ToolContext, access: str) -> bool:
    """Whether the hard-link rule applies: to every write, and to reads in the workstream's folder
    (the read-only roots are the host's own files, linked by its packages)."""
    return access == WRITE or is_within(checked, os.path.realpath(ctx.working_dir))


def _is_same_file(fd: int, path: str) -> bool:
    try:
        there = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    here = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _open_error(exc: OSError, shown: str) -> FileToolError:
    if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link where the check saw none
        return FileToolError(
            f"Error: {shown} became a symbolic link after it was checked; the file tools do not "
            "follow a link swapped in, so it was not opened"
        )
    return FileToolError(f"Error: could not open {shown}: {exc.strerror or exc}")
