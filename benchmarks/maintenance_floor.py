"""The maintenance floors: NOSPACE recovered and members defragmented with raw etcdctl, as a person
would do it, on plain etcd processes (benchmarks.floor's RawCluster, started with the same backend
quota) holding the same history (benchmarks.history_load)."""
from __future__ import annotations

import json
import logging
import subprocess
import time
from dataclasses import dataclass

from benchmarks import history_load
from benchmarks.floor import POLL_SECONDS, RawCluster
from kube_sandbox import binaries
from kube_sandbox.testing import wait_for

log = logging.getLogger(__name__)

ETCDCTL_TIMEOUT_SECONDS = 300.0
WRITABLE_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class MaintenanceRun:
    """One run's figures, the operator's or the floor's."""

    no_space_seconds: float  # first write refused for NOSPACE -> a write accepted again
    refused_after_bytes: int  # history written when the first write was refused
    defragment_seconds: tuple[float, ...]  # per member
    db_sizes: tuple[int, ...]  # each member's database before it was defragmented


def measure_floor(quota_bytes: int, refill_bytes: int, size: int = 3) -> MaintenanceRun:
    """A plain `size`-member cluster with `quota_bytes` as its backend quota: filled until NOSPACE
    and recovered by hand (timed); then `refill_bytes` more history, compacted, and each member
    defragmented with `etcdctl defrag` on its own endpoint (each timed)."""
    cluster = RawCluster(etcd_flags=(f"--quota-backend-bytes={quota_bytes}",))
    try:
        cluster.bring_up(size)
        urls = cluster.client_urls()
        etcdctl = str(binaries.etcd_dir(cluster.version) / "etcdctl")
        writer = history_load.HistoryWriter(urls[0], history_load.keys_for(quota_bytes))
        refused_at = writer.fill_until_refused(4 * quota_bytes)
        refused_after = writer.written_bytes
        recover_by_hand(etcdctl, urls)
        wait_for(lambda: history_load.write_accepted(urls[0]), timeout=WRITABLE_TIMEOUT_SECONDS,
                 interval=POLL_SECONDS, what="the floor cluster writable again")
        no_space = time.monotonic() - refused_at
        writer.write(refill_bytes)
        sizes = tuple(history_load.db_size(url) for url in urls)
        history_load.compact_all_history(urls[0])
        defragments = tuple(_timed(etcdctl, [url], "defrag") for url in urls)
        log.info("floor: writable %.2fs after NOSPACE (%.0f MiB written); defrag %s s of %s MiB", no_space,
                 refused_after / history_load.MIB, ", ".join(f"{s:.2f}" for s in defragments),
                 ", ".join(f"{b / history_load.MIB:.0f}" for b in sizes))
        return MaintenanceRun(no_space, refused_after, defragments, sizes)
    finally:
        cluster.stop()


def recover_by_hand(etcdctl: str, urls: list[str]) -> None:
    """What a person does after NOSPACE: read the revision, compact to it, defragment every member
    (one `etcdctl defrag` per endpoint), disarm the alarm."""
    status = json.loads(_etcdctl(etcdctl, urls[:1], "endpoint", "status", "-w", "json").stdout)
    revision = int(status[0]["Status"]["header"]["revision"])
    _etcdctl(etcdctl, urls[:1], "compaction", str(revision), "--physical")
    for url in urls:
        _etcdctl(etcdctl, [url], "defrag")
    _etcdctl(etcdctl, urls, "alarm", "disarm")


def _timed(etcdctl: str, urls: list[str], *args: str) -> float:
    started = time.monotonic()
    _etcdctl(etcdctl, urls, *args)
    return time.monotonic() - started


def _etcdctl(etcdctl: str, urls: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    argv = [etcdctl, f"--endpoints={','.join(urls)}", f"--command-timeout={ETCDCTL_TIMEOUT_SECONDS:.0f}s", *args]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=ETCDCTL_TIMEOUT_SECONDS + 10)
    if result.returncode != 0:
        raise RuntimeError(f"floor: etcdctl {' '.join(args)} on {','.join(urls)} failed: "
                           f"{result.stderr.strip()[-300:]}")
    return result
