"""The fleet figure's CPU reading counts a process's reaped children (etcdctl calls, say)."""
from __future__ import annotations

import os
import subprocess
import sys

from benchmarks.fleet_figures import CpuSample, cpu_seconds_per_minute, read_cpu_seconds


def test_cpu_of_a_reaped_child_is_counted() -> None:
    before = read_cpu_seconds(os.getpid())
    # A child doing a fixed amount of work (CPU time, whatever the machine's load).
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)
    after = read_cpu_seconds(os.getpid())
    assert after - before >= 0.05


def test_cpu_seconds_per_minute() -> None:
    assert cpu_seconds_per_minute(CpuSample(at=10.0, seconds=1.0), CpuSample(at=40.0, seconds=2.5)) == 3.0
