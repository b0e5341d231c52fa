"""Resident memory and thread count of a local process, from /proc/<pid>/status."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

KIB_PER_MIB = 1024


@dataclass(frozen=True)
class ProcessStatus:
    rss_mib: float
    threads: int


def read_process_status(pid: int) -> ProcessStatus:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    rss_kib = int(fields["VmRSS"].split()[0])  # "123456 kB"
    return ProcessStatus(rss_mib=rss_kib / KIB_PER_MIB, threads=int(fields["Threads"]))
