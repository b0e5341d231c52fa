"""The floor's process joins the backup operator's cpu cgroup (found from /proc/<pid>/cgroup)
and hands its result back; without a cgroup it runs in place."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.cpu_share import cpu_cgroup_of, cpu_shares, run_in_cpu_cgroup


def test_the_operators_cpu_cgroup_is_found_from_proc(tmp_path: Path) -> None:
    root, proc = tmp_path / "cpu", tmp_path / "proc"
    container = root / "kube-sandbox" / "pod1" / "etcd-backup-operator"
    container.mkdir(parents=True)
    (container / "cgroup.procs").write_text("")
    (container / "cpu.shares").write_text("51\n")
    (proc / "7").mkdir(parents=True)
    (proc / "7" / "cgroup").write_text("4:memory:/other\n2:cpuacct:/x\n1:cpu:/kube-sandbox/pod1/etcd-backup-operator\n")
    (proc / "8").mkdir()
    (proc / "8" / "cgroup").write_text("1:cpu:/\n0::/\n")
    assert cpu_cgroup_of(7, root, proc) == container and cpu_shares(container) == 51
    assert cpu_cgroup_of(8, root, proc) is None  # a plain process: nothing to join
    assert cpu_cgroup_of(9, root, proc) is None


def test_the_work_runs_in_a_child_that_joined_the_cgroup_first(tmp_path: Path) -> None:
    (tmp_path / "cgroup.procs").write_text("")

    def work() -> tuple[int, str]:
        return os.getpid(), (tmp_path / "cgroup.procs").read_text()
    child_pid, joined = run_in_cpu_cgroup(tmp_path, work)
    assert child_pid != os.getpid() and joined == str(child_pid)
    assert run_in_cpu_cgroup(None, work)[0] == os.getpid()


def test_a_failing_floor_is_raised_in_the_parent(tmp_path: Path) -> None:
    def work() -> None:
        raise ValueError("upload refused")
    with pytest.raises(RuntimeError, match="upload refused"):
        run_in_cpu_cgroup(tmp_path, work)
