"""Each pod in its own cgroups from its first process, as a real kubelet places it.

The machines this runs on have a hybrid cgroup layout: the v1 controllers mounted one per
controller (`/sys/fs/cgroup/memory`, `.../cpu`, `.../blkio`) and the v2 hierarchy beside them
(`/sys/fs/cgroup/unified`). A pod gets:

| hierarchy | group | what it is for |
|---|---|---|
| v2 (unified) | `kube-sandbox/pod<uid>` | partitions: its packets told apart (`iptables -m cgroup`, `ss cgroup`) |
| memory (v1) | `kube-sandbox/pod<uid>/<container>` | `resources.limits.memory`; an exceeded limit is `OOMKilled` |
| cpu (v1) | `kube-sandbox/pod<uid>/<container>` | `resources.limits.cpu` (CFS quota) and `requests.cpu` (shares) |
| blkio (v1) | `kube-sandbox/pod<uid>` | the slow-disk fault (write throttling of the pod's disk) |

A container's first process joins its groups before it `exec`s the container's command (a
`/bin/sh` wrapper writes its pid to each `cgroup.procs`), so nothing it starts runs outside them.
Without this layout (another cgroup setup, or not root) pods run without cgroups: limits are
not enforced and the partition and slow-disk faults refuse with a reason.
"""
from __future__ import annotations

import logging
import math
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kube_sandbox.kubelet.resources import InvalidQuantity, parse_quantity

log = logging.getLogger(__name__)

SANDBOX_GROUP = "kube-sandbox"
CFS_PERIOD_MICROSECONDS = 100_000
SHARES_PER_CPU = 1024
MOUNTS_FILE = Path("/proc/self/mounts")
SYS_BLOCK_DEVICES = Path("/sys/dev/block")


class CgroupsUnavailable(RuntimeError):
    """This machine's cgroup layout (or our permissions) does not allow what was asked."""


@dataclass(frozen=True)
class CgroupLayout:
    """Where the hierarchies the kubelet uses are mounted."""

    unified: Path
    memory: Path
    cpu: Path
    blkio: Path
    group: str = SANDBOX_GROUP  # the group under each root holding this sandbox's pods
    # The other v1 hierarchies (pids, freezer, devices, ...): runc puts the containers of local
    # images there too (runc.py); their groups go with the pod as the others do.
    others: tuple[Path, ...] = ()

    @property
    def roots(self) -> tuple[Path, ...]:
        return (self.unified, self.blkio, self.memory, self.cpu, *self.others)


def detect_layout(mounts_text: str, writable: bool) -> CgroupLayout | None:
    """The hybrid layout from a /proc/mounts text: a cgroup2 mount and v1 mounts carrying the
    memory, cpu and blkio controllers. None when one is missing or the kubelet cannot write them."""
    unified: Path | None = None
    v1: dict[str, Path] = {}
    others: list[Path] = []
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        mount_point, fs_type, options = Path(fields[1]), fields[2], set(fields[3].split(","))
        if fs_type == "cgroup2" and unified is None:
            unified = mount_point
        elif fs_type == "cgroup":
            used = [c for c in ("memory", "cpu", "blkio") if c in options and c not in v1]
            for controller in used:
                v1[controller] = mount_point
            if not used and mount_point not in others:
                others.append(mount_point)
    if unified is None or set(v1) != {"memory", "cpu", "blkio"} or not writable:
        return None
    return CgroupLayout(unified=unified, memory=v1["memory"], cpu=v1["cpu"], blkio=v1["blkio"],
                        others=tuple(p for p in others if p not in v1.values()))


def machine_layout() -> CgroupLayout | None:
    try:
        mounts = MOUNTS_FILE.read_text()
    except OSError:
        return None
    layout = detect_layout(mounts, writable=os.geteuid() == 0)
    if layout is None:
        log.warning("no hybrid cgroup layout (a cgroup2 mount beside v1 memory, cpu and blkio) writable by "
                    "this kubelet: pods run without cgroups, limits are not enforced, partitions are refused")
    return layout


@dataclass(frozen=True)
class ContainerLimits:
    """What a container's `resources` ask of its cgroups; None where nothing is set."""

    memory_bytes: int | None
    cpu_quota_microseconds: int | None
    cpu_shares: int | None


def container_limits(container: dict[str, Any]) -> ContainerLimits:
    """The limits of a container spec (a bad quantity is ignored here: admission refuses it first)."""
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}

    def quantity(value: Any) -> Any:
        try:
            return parse_quantity(value) if value is not None else None
        except InvalidQuantity:
            return None

    memory = quantity(limits.get("memory"))
    cpu = quantity(limits.get("cpu"))
    cpu_request = quantity(requests.get("cpu", limits.get("cpu")))
    return ContainerLimits(
        memory_bytes=int(memory) if memory else None,
        cpu_quota_microseconds=max(1000, math.ceil(cpu * CFS_PERIOD_MICROSECONDS)) if cpu else None,
        cpu_shares=max(2, math.ceil(cpu_request * SHARES_PER_CPU)) if cpu_request else None,
    )


def join_argv(procs_files: list[Path], argv: list[str]) -> list[str]:
    """`argv` run by a shell that first moves itself into each cgroup (its pid into each
    `cgroup.procs`), then execs `argv`: the container's first process starts inside them."""
    joins = " && ".join(f"echo $$ > {shlex.quote(str(path))}" for path in procs_files)
    return ["/bin/sh", "-c", f'{joins} && exec "$@"', "sh", *argv]


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _remove_tree(directory: Path) -> None:
    """rmdir a cgroup and its child groups (deepest first); a group with live processes stays."""
    if not directory.is_dir():
        return
    for child in sorted((p for p in directory.iterdir() if p.is_dir()), reverse=True):
        _remove_tree(child)
    try:
        directory.rmdir()
    except OSError as e:
        log.warning("cgroup %s not removed: %s", directory, e)


class PodCgroups:
    """The cgroups of one pod (see the module docstring)."""

    def __init__(self, layout: CgroupLayout, uid: str) -> None:
        self.layout = layout
        self.uid = uid
        self.name = f"pod{uid}"
        self.memory_caps: dict[str, int] = {}  # container -> the memory-squeeze fault's cap

    @property
    def net_path(self) -> str:
        """The pod's v2 group as `iptables -m cgroup --path` and `ss cgroup` name it."""
        return f"/{self.layout.group}/{self.name}"

    def _pod_dir(self, root: Path) -> Path:
        return root / self.layout.group / self.name

    def prepare(self, container: str, limits: ContainerLimits) -> list[Path]:
        """Create the container's groups with its limits; the `cgroup.procs` files it must join."""
        unified = self._pod_dir(self.layout.unified)
        blkio = self._pod_dir(self.layout.blkio)
        memory = self._pod_dir(self.layout.memory) / container
        cpu = self._pod_dir(self.layout.cpu) / container
        for directory in (unified, blkio, memory, cpu):
            directory.mkdir(parents=True, exist_ok=True)
        memory_limit = min(b for b in (limits.memory_bytes, self.memory_caps.get(container)) if b) \
            if limits.memory_bytes or container in self.memory_caps else None
        _write(memory / "memory.limit_in_bytes", str(memory_limit) if memory_limit else "-1")
        _write(cpu / "cpu.cfs_period_us", str(CFS_PERIOD_MICROSECONDS))
        _write(cpu / "cpu.cfs_quota_us", str(limits.cpu_quota_microseconds or -1))
        _write(cpu / "cpu.shares", str(limits.cpu_shares or SHARES_PER_CPU))
        return [unified / "cgroup.procs", blkio / "cgroup.procs", memory / "cgroup.procs", cpu / "cgroup.procs"]

    def oom_kills(self, container: str) -> int:
        """How many processes the kernel's OOM killer ended in the container's memory group."""
        try:
            text = (self._pod_dir(self.layout.memory) / container / "memory.oom_control").read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def cap_memory(self, container: str, limit_bytes: int | None) -> None:
        """The memory-squeeze fault: from the container's next start on, its memory limit is at most
        `limit_bytes` (None lifts the cap). The running process keeps its limit: the kernel refuses
        a limit below what it uses."""
        if limit_bytes:
            self.memory_caps[container] = limit_bytes
        else:
            self.memory_caps.pop(container, None)

    def throttle_disk(self, device: str, write_iops: int | None, write_bytes_per_second: int | None) -> None:
        """Slow every write the pod makes to `device` ("major:minor"); None lifts that limit."""
        blkio = self._pod_dir(self.layout.blkio)
        if not blkio.is_dir():
            raise CgroupsUnavailable(f"pod {self.uid} has no blkio group (no container started yet)")
        _write(blkio / "blkio.throttle.write_iops_device", f"{device} {write_iops or 0}")
        _write(blkio / "blkio.throttle.write_bps_device", f"{device} {write_bytes_per_second or 0}")

    def remove(self) -> None:
        for root in self.layout.roots:
            _remove_tree(self._pod_dir(root))


def remove_leftovers(layout: CgroupLayout) -> None:
    """At kubelet start: remove the groups an earlier kubelet left (its processes were reaped
    already; the pods it ran get new groups when their containers start again)."""
    for root in layout.roots:
        _remove_tree(root / layout.group)


def block_device_of(path: Path) -> str:
    """The "major:minor" of the block device holding `path` (what blkio throttles)."""
    st_dev = path.stat().st_dev
    major, minor = os.major(st_dev), os.minor(st_dev)
    if major == 0:
        raise CgroupsUnavailable(f"{path} is not on a block device (device 0:{minor}); its I/O cannot be throttled")
    device = SYS_BLOCK_DEVICES / f"{major}:{minor}"
    if (device / "partition").exists():  # blkio throttles whole disks: the partition's parent
        return (device.resolve().parent / "dev").read_text().strip()
    return f"{major}:{minor}"
