"""Run a floor with the backup operator's CPU share. The sandbox's kubelet gives each container
the cpu.shares of its CPU request (the backup operator's 50m: 51 shares, against 1024 for a plain
process): on a loaded machine, a floor run by the benchmark's own process gets about twenty times
the operator's CPU under contention, and the ratio measures the scheduler, not the code. Operator
and floor never run at the same time, so the floor's processes join the operator container's own
cpu cgroup (cgroup v1; only the cpu controller: memory stays the benchmark's) and get exactly its
position."""
from __future__ import annotations

import multiprocessing
import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

CPU_CGROUP_ROOT = Path("/sys/fs/cgroup/cpu")
T = TypeVar("T")


def cpu_cgroup_of(pid: int, root: Path = CPU_CGROUP_ROOT, proc: Path = Path("/proc")) -> Path | None:
    """The cgroup v1 cpu directory process `pid` is in; None when there is none to join (cgroup
    v2 only, or the root cgroup: a plain process)."""
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(",") and path not in ("", "/"):
            directory = root / path.lstrip("/")
            return directory if (directory / "cgroup.procs").exists() else None
    return None


def cpu_shares(cgroup: Path | None) -> int | None:
    if cgroup is None:
        return None
    try:
        return int((cgroup / "cpu.shares").read_text())
    except (OSError, ValueError):
        return None


def run_in_cpu_cgroup(cgroup: Path | None, work: Callable[[], T]) -> T:
    """`work()` in a forked child that first joins `cgroup` (its subprocesses too); its result
    back through a pipe. Without a cgroup, `work()` here."""
    if cgroup is None:
        return work()
    context = multiprocessing.get_context("fork")
    receiving, sending = context.Pipe(duplex=False)

    def child() -> None:
        try:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))
            sending.send(("ok", work()))
        except BaseException:  # noqa: BLE001 (sent to the parent, which raises it)
            sending.send(("error", traceback.format_exc()))

    process = context.Process(target=child, name="floor-in-operator-cgroup")
    process.start()
    try:
        outcome: tuple[str, Any] = receiving.recv()
    except EOFError as error:
        raise RuntimeError(f"the floor's process exited with {process.exitcode} before answering") from error
    finally:
        process.join()
    if outcome[0] != "ok":
        raise RuntimeError(f"the floor failed in its process:\n{outcome[1]}")
    result: T = outcome[1]
    return result
