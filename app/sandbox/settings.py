"""The `[sandbox]` section of config.toml: what a tool's command and the file tools may reach.

Parsed here, beside the sandbox, and loaded by app.settings (the one module that reads the
environment passes the environment in). Every key is documented in docs/security.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MODES = ("auto", "required")  # auto: without bwrap only while the operator is the only user
NETWORKS = ("none", "proxy", "host")  # host: admins only, whatever `networks` says
DEFAULT_NETWORKS = ("none", "proxy")  # what a non-admin may choose
DEFAULT_NETWORK = "none"
# Exposed read-only to commands and readable by the file tools (those that exist on the host).
DEFAULT_READ_ONLY_ROOTS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")
DEFAULT_CPU_SECONDS = 600  # per process, as RLIMIT_CPU
DEFAULT_MEMORY_MB = 4096  # address space per process, as RLIMIT_AS
DEFAULT_OPEN_FILES = 1024
DEFAULT_PROCESSES = 512  # RLIMIT_NPROC
DEFAULT_FILE_SIZE_MB = 1024  # the largest file a command may write, as RLIMIT_FSIZE
DATA_ROOT_ENV = "TURNSTONE_DATA_ROOT"
DEFAULT_DATA_ROOT = "workspaces"  # relative to the folder the service starts in


class SandboxSettingsError(ValueError):
    """A `[sandbox]` key with a value the service cannot use."""


@dataclass(frozen=True)
class SandboxSettings:
    """The `[sandbox]` section."""

    mode: str = "auto"
    bwrap: str = "bwrap"  # the program, by name on PATH or by path
    read_only_roots: tuple[str, ...] = DEFAULT_READ_ONLY_ROOTS
    env: tuple[str, ...] = ()  # names passed through to commands besides PATH, HOME, LANG, TERM
    networks: tuple[str, ...] = DEFAULT_NETWORKS
    default_network: str = DEFAULT_NETWORK
    proxy_domains: tuple[str, ...] = ()  # non-empty: the egress proxy reaches only these (and subdomains)
    cpu_seconds: int = DEFAULT_CPU_SECONDS
    memory_mb: int = DEFAULT_MEMORY_MB
    open_files: int = DEFAULT_OPEN_FILES
    processes: int = DEFAULT_PROCESSES
    file_size_mb: int = DEFAULT_FILE_SIZE_MB
    # Each workstream's folder is <data_root>/<user>/<ws_id>; admins may name a working_dir
    # inside one of working_dir_roots instead.
    data_root: str = field(default_factory=lambda: os.path.abspath(DEFAULT_DATA_ROOT))
    working_dir_roots: tuple[str, ...] = ()


def from_section(section: Any, env: Mapping[str, str]) -> SandboxSettings:
    if not isinstance(section, Mapping):
        raise SandboxSettingsError("[sandbox] must be a table")
    unknown = set(section) - set(SandboxSettings.__dataclass_fields__)
    if unknown:
        raise SandboxSettingsError(f"[sandbox]: unknown key(s) {', '.join(sorted(unknown))}")
    mode = _choice(section, "mode", "auto", MODES)
    networks = _strings(section, "networks", DEFAULT_NETWORKS)
    for name in networks:
        if name not in NETWORKS:
            raise SandboxSettingsError(f"[sandbox] networks: {name!r} is not one of {', '.join(NETWORKS)}")
    default_network = _choice(section, "default_network", DEFAULT_NETWORK, NETWORKS)
    if default_network not in networks:
        raise SandboxSettingsError(f"[sandbox] default_network {default_network!r} must be one of networks")
    data_root = env.get(DATA_ROOT_ENV) or section.get("data_root", DEFAULT_DATA_ROOT)
    if not isinstance(data_root, str) or not data_root or "\x00" in data_root:
        raise SandboxSettingsError(f"[sandbox] data_root must be a folder's path, got {data_root!r}")
    return SandboxSettings(
        mode=mode,
        bwrap=_string(section, "bwrap", "bwrap"),
        read_only_roots=_paths(section, "read_only_roots", DEFAULT_READ_ONLY_ROOTS),
        env=_strings(section, "env", ()),
        networks=networks,
        default_network=default_network,
        proxy_domains=tuple(d.lower().strip(".") for d in _strings(section, "proxy_domains", ())),
        cpu_seconds=_positive(section, "cpu_seconds", DEFAULT_CPU_SECONDS),
        memory_mb=_positive(section, "memory_mb", DEFAULT_MEMORY_MB),
        open_files=_positive(section, "open_files", DEFAULT_OPEN_FILES),
        processes=_positive(section, "processes", DEFAULT_PROCESSES),
        file_size_mb=_positive(section, "file_size_mb", DEFAULT_FILE_SIZE_MB),
        data_root=os.path.abspath(os.path.expanduser(data_root)),
        working_dir_roots=_paths(section, "working_dir_roots", ()),
    )


def _string(section: Mapping[str, Any], key: str, default: str) -> str:
    value = section.get(key, default)
    if not isinstance(value, str) or not value or "\x00" in value:
        raise SandboxSettingsError(f"[sandbox] {key} must be a non-empty string, got {value!r}")
    return value


def _choice(section: Mapping[str, Any], key: str, default: str, allowed: tuple[str, ...]) -> str:
    value = section.get(key, default)
    if value not in allowed:
        raise SandboxSettingsError(f"[sandbox] {key} must be one of {', '.join(allowed)}, got {value!r}")
    return str(value)


def _strings(section: Mapping[str, Any], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    value = section.get(key, default)
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise SandboxSettingsError(f"[sandbox] {key} must be a list of non-empty strings, got {value!r}")
    return tuple(value)


def _paths(section: Mapping[str, Any], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    paths = _strings(section, key, default)
    for path in paths:
        if not os.path.isabs(path) or "\x00" in path:
            raise SandboxSettingsError(f"[sandbox] {key}: {path!r} is not an absolute path")
    return tuple(os.path.normpath(p) for p in paths)


def _positive(section: Mapping[str, Any], key: str, default: int) -> int:
    value = section.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SandboxSettingsError(f"[sandbox] {key} must be a whole number, 1 or more, got {value!r}")
    return value
