"""The private mount namespace every sandbox process lives in, where /etc/hosts and
/etc/resolv.conf are the sandbox's.

The machine's files are never touched: the daemon starts under `unshare --mount` and bind-mounts
the sandbox hosts file over /etc/hosts and a resolv.conf naming the sandbox's own DNS server over
/etc/resolv.conf there; its children inherit the view. So no lookup made inside the sandbox ever
reaches the machine's resolver (which may be off loopback).
"""
from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

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


def bind_resolv_conf(resolv_conf: Path, nameserver: str) -> bool:
    """Called inside the new namespace: make /etc/resolv.conf name only `nameserver`.
    False (and nothing mounted) on a machine without /etc/resolv.conf."""
    if not Path("/etc/resolv.conf").exists():
        return False
    # ndots:1 tries dotted names as they are first; one short try, as the server is local.
    resolv_conf.write_text(f"nameserver {nameserver}\noptions ndots:1 timeout:1 attempts:2\n")
    subprocess.run(["mount", "--bind", str(resolv_conf), "/etc/resolv.conf"], check=True, capture_output=True)
    return True


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
