"""Sized claims: a claim of the storage class SIZED_STORAGE_CLASS is a tmpfs of the claim's
request mounted at its directory, so a write beyond the size fails with ENOSPC as on a real
volume; and the no-space fault (`leave_free`), which takes a sized volume's free space away.

The opt-in is the class name, nothing else: every other claim stays a plain directory on the host's
disk with no size. A tmpfs lives in the daemon's private mount namespace (the pods' processes see
it, the machine does not) and holds its data in memory: the data goes when the claim is deleted,
and with the sandbox. Mounting needs root (or the daemon's user namespace); without it a sized
claim is a plain directory (a warning in the daemon log), like limits without cgroups.
"""
from __future__ import annotations

import logging
import math
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from kube_sandbox.kubelet.resources import parse_quantity

log = logging.getLogger(__name__)

SIZED_STORAGE_CLASS: Final = "kube-sandbox-sized"
TMPFS_SOURCE: Final = "kube-sandbox-claim"
PAGE_BYTES: Final = os.sysconf("SC_PAGE_SIZE")


class VolumeNotSized(LookupError):
    """The no-space fault was aimed at a claim that is not a sized one (its directory is on the
    host's disk, which the fault never fills)."""


def is_sized(claim: Mapping[str, Any]) -> bool:
    return (claim.get("spec") or {}).get("storageClassName") == SIZED_STORAGE_CLASS


def requested_bytes(claim: Mapping[str, Any], default: str) -> int:
    """The claim's `resources.requests.storage` in bytes (`default` when it has none)."""
    spec = claim.get("spec") or {}
    requested = ((spec.get("resources") or {}).get("requests") or {}).get("storage", default)
    return int(math.ceil(parse_quantity(requested)))


def whole_pages(size_bytes: int) -> int:
    """`size_bytes` rounded up to whole pages, at least one: tmpfs reads size=0 as unlimited."""
    return max(1, -(-size_bytes // PAGE_BYTES)) * PAGE_BYTES


def mount(directory: Path, size_bytes: int) -> bool:
    """A tmpfs of `size_bytes` at `directory` (kept if one is there); False if it cannot mount."""
    if os.path.ismount(directory):
        return True
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={whole_pages(size_bytes)},mode=0755",
                             TMPFS_SOURCE, str(directory)], capture_output=True, text=True)
    if result.returncode != 0:
        log.warning("sized claim %s: cannot mount a tmpfs (%s); it is a plain directory without a size",
                    directory, result.stderr.strip() or f"exit {result.returncode}")
        return False
    return True


def unmount(directory: Path) -> None:
    """Lazily: a process still inside lets go when it leaves; the memory is freed then."""
    if os.path.ismount(directory):
        subprocess.run(["umount", "--lazy", str(directory)], capture_output=True, check=True)


def resize(directory: Path, size_bytes: int) -> int:
    """Remount the tmpfs at `directory` with a new size (not below what it holds); the size set."""
    size = whole_pages(size_bytes)
    subprocess.run(["mount", "-o", f"remount,size={size}", str(directory)], capture_output=True, check=True)
    return size


def used_bytes(directory: Path) -> int:
    stat = os.statvfs(directory)
    return (stat.f_blocks - stat.f_bfree) * stat.f_frsize


def leave_free(directory: Path, leave_bytes: int) -> int:
    """The no-space fault: the tmpfs at `directory` keeps what it holds and only `leave_bytes`
    more (rounded up to a page; at least a page in all); the size set. As if something else had
    filled it, without spending the memory a filler file would."""
    if not os.path.ismount(directory):
        raise VolumeNotSized(f"{directory} has no tmpfs of its own")
    return resize(directory, used_bytes(directory) + max(0, leave_bytes))
