"""The private mount namespace every sandbox process lives in, where /etc/hosts is the sandbox's.

The machine's /etc/hosts is never touched: the daemon starts under `unshare --mount` and
bind-mounts the sandbox hosts file over /etc/hosts there; its children inherit the view.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Sequence

INITIAL_HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"


def unshare_prefix() -> list[str]:
    """Argv prefix that runs a command in a new private mount namespace (user namespace if not root)."""
    prefix = ["unshare", "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        prefix[1:1] = ["--user", "--map-root-user"]
    return prefix


def nsenter_prefix(pid: int) -> list[str]:
    """Argv prefix that runs a command inside the namespace of the process `pid`."""
    if os.geteuid() != 0:
        return ["nsenter", f"--target={pid}", "--user", "--mount", "--preserve-credentials", "--"]
    return ["nsenter", f"--target={pid}", "--mount", "--"]


def bind_hosts_file(hosts_file: Path) -> None:
    """Called inside the new namespace: make `hosts_file` the /etc/hosts everyone here sees."""
    if not hosts_file.exists():
        hosts_file.write_text(INITIAL_HOSTS)
    subprocess.run(["mount", "--bind", str(hosts_file), "/etc/hosts"], check=True, capture_output=True)


def mount_namespace_id(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def processes_in_namespace(namespace_id: str, exclude: Sequence[int] = ()) -> list[int]:
    """All pids whose mount namespace is `namespace_id` (how `down` finds every leftover)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in exclude and mount_namespace_id(int(entry)) == namespace_id:
            found.append(int(entry))
    return found
