"""The bubblewrap jail one command runs in: its argv, its environment and its resource limits.

A jailed command sees the read-only roots of the policy (minus what `reach.never_reachable`
hides), a fresh /proc of its own PID namespace, a private /tmp, and its workstream's folder as
the only writable place; it runs as an unprivileged uid in new user, PID, IPC, UTS (and, unless
its network is `host`, network) namespaces, and dies with the call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from app.sandbox.reach import KERNEL_VIEWS, is_within
from app.sandbox.settings import SandboxSettings

# Where the command's script is bound inside the jail (read-only, inside the private /tmp).
SCRIPT_PATH = "/tmp/.turnstone-command.sh"
JAIL_UID = 1000  # the unprivileged user a command runs as inside its user namespace
JAIL_GID = 1000
HOSTNAME = "sandbox"
BASE_ENV = ("PATH", "LANG", "TERM")  # passed through when set; HOME is the workstream's folder
FALLBACK_PATH = "/usr/local/bin:/usr/bin:/bin"
REFUSED_EXIT = 126  # a limit the jail could not set: the command does not run


@dataclass(frozen=True)
class Egress:
    """The way out of a `proxy` network: a Unix socket bound read-only at the same path inside,
    the variables that point programs at it (HTTP_PROXY, ...), and the argv that runs before the
    command (an in-jail relay from a TCP port to the socket)."""

    socket_path: str
    env: Mapping[str, str] = field(default_factory=dict)
    argv_prefix: tuple[str, ...] = ()


@dataclass(frozen=True)
class Jail:
    """The policy, with the program that enforces it and the paths it must hide."""

    sandbox: SandboxSettings
    bwrap: str  # the program's path
    hidden: tuple[str, ...]  # reach.never_reachable, resolved
    egress: Egress | None = None  # a `proxy` network's way out, where the service runs the proxy

    def argv(
        self,
        folder: str,
        network: str,
        script: str,
        environ: Mapping[str, str],
    ) -> list[str]:
        """The bwrap command line that runs `script` (a file on the host) in `folder`.

        `environ` is the worker's environment, already scrubbed of secrets: only the allow-listed
        names are taken from it. A `proxy` network without `egress` has no network at all.
        """
        folder = os.path.abspath(folder)
        egress = self.egress
        argv = [self.bwrap, *_namespaces(network), "--die-with-parent", "--new-session"]
        argv += ["--uid", str(JAIL_UID), "--gid", str(JAIL_GID), "--hostname", HOSTNAME]
        argv += self._filesystem(folder)
        argv += ["--ro-bind", script, SCRIPT_PATH]
        if network == "proxy" and egress is not None:
            argv += ["--ro-bind", egress.socket_path, egress.socket_path]
        argv += ["--clearenv", *_setenv(self._environment(folder, environ, network, egress))]
        argv += ["--chdir", folder, "--"]
        if network == "proxy" and egress is not None:
            argv += egress.argv_prefix
        return [*argv, "bash", SCRIPT_PATH]

    def _filesystem(self, folder: str) -> list[str]:
        mounts: list[tuple[str, list[str]]] = [
            ("/proc", ["--proc", "/proc"]),
            ("/dev", ["--dev", "/dev"]),
            ("/tmp", ["--tmpfs", "/tmp"]),
        ]
        bound: list[str] = []
        for root in (r for r in self.sandbox.read_only_roots if os.path.lexists(r)):
            if os.path.islink(root):  # /bin -> usr/bin on a merged-/usr system
                mounts.append((root, ["--symlink", os.readlink(root), root]))
            else:
                mounts.append((root, ["--ro-bind", root, root]))
                bound.append(os.path.realpath(root))
        # Outer before inner: a root inside /tmp goes on the private /tmp, not under it, and a
        # root of `/` goes below the fresh /proc, /dev and /tmp.
        argv = [arg for _, args in sorted(mounts, key=lambda m: _depth(m[0])) for arg in args]
        real_folder = os.path.realpath(folder)
        masks = [m for m in _masks(self.hidden, bound) if not is_within(m, real_folder)]
        remount: list[str] = []
        for path in masks:
            if os.path.isdir(path):
                argv += ["--tmpfs", path]
                remount.append(path)
            else:
                argv += ["--ro-bind", "/dev/null", path]
        argv += ["--bind", real_folder, folder]
        # Hidden paths inside the folder itself (an admin's folder holding the config, say).
        for path in self.hidden:
            if is_within(path, real_folder) and path != real_folder and os.path.lexists(path):
                if os.path.isdir(path):
                    argv += ["--tmpfs", path]
                    remount.append(path)
                else:
                    argv += ["--ro-bind", "/dev/null", path]
        # Last: an empty folder standing for a hidden one must not be a place to write, but the
        # workstream's folder may sit inside one (the data root), so it is bound first.
        for path in remount:
            argv += ["--remount-ro", path]
        return argv

    def _environment(
        self, folder: str, environ: Mapping[str, str], network: str, egress: Egress | None
    ) -> dict[str, str]:
        env = {name: environ[name] for name in (*BASE_ENV, *self.sandbox.env) if name in environ}
        env.setdefault("PATH", FALLBACK_PATH)
        env["HOME"] = folder
        if network == "proxy" and egress is not None:
            env.update(egress.env)
        return env

    def limits(self) -> str:
        """The resource limits, hard and soft, set before the user's command (bash's ulimit: -f
        counts 1024-byte blocks, -v kibibytes); on the script's first line, with no line break of
        its own, so that bash's messages number the command's lines as they were without it."""
        s = self.sandbox
        return (
            f"ulimit -HS -t {s.cpu_seconds} -v {s.memory_mb * 1024} -n {s.open_files}"
            f" -u {s.processes} -f {s.file_size_mb * 1024} || exit {REFUSED_EXIT}; "
        )


def _depth(path: str) -> int:
    return 0 if path == "/" else path.rstrip("/").count("/")


def _namespaces(network: str) -> list[str]:
    argv = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    # `proxy` has no network namespace of the host's either: its only way out is the egress
    # socket, bound in by the caller (wired to the service's egress proxy where it runs).
    return argv if network == "host" else [*argv, "--unshare-net"]


def _masks(hidden: tuple[str, ...], roots: list[str]) -> list[str]:
    """What must be covered: each hidden path inside an exposed root, and each exposed root
    inside a hidden path (an admin exposing the data root, say). /proc is replaced whole."""
    out: list[str] = []
    for path in hidden:
        if path == "/proc" or not os.path.lexists(path):
            continue
        for root in roots:
            if is_within(path, root):
                out.append(path)
            elif is_within(root, path) and path not in KERNEL_VIEWS:
                out.append(root)
    # Parents before children, each once: a folder's mask already hides what is inside it.
    kept: list[str] = []
    for path in sorted(set(out), key=len):
        if not any(is_within(path, k) for k in kept):
            kept.append(path)
    return kept


def _setenv(env: Mapping[str, str]) -> list[str]:
    argv: list[str] = []
    for name, value in sorted(env.items()):
        argv += ["--setenv", name, value]
    return argv
