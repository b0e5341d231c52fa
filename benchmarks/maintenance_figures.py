"""Figures about day-two maintenance (issue 21), on a 3-member cluster whose history fills its
backend quota: the time from NOSPACE to writable again, and one member's defragmentation, each
against a raw-etcdctl floor measured in the same run on the same history
(benchmarks.maintenance_floor)."""
from __future__ import annotations

import logging
import time
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families

from benchmarks import history_load, maintenance_floor
from benchmarks.clusters import BenchClusters
from benchmarks.environment import OPERATOR_NAMESPACE, OPERATOR_SELECTOR, bench_namespace
from benchmarks.fleet_figures import OPERATOR_METRICS_PORT
from benchmarks.floor import POLL_SECONDS
from benchmarks.maintenance_floor import MaintenanceRun
from benchmarks.results import Result, describe_samples, median
from etcd_common.api import constants as c
from kube_sandbox.testing import Sandbox, wait_for

log = logging.getLogger(__name__)

SIZE = 3
QUOTA_MIB = 256  # a few hundred MiB of history fill it
QUICK_QUOTA_MIB = 64
# History written again after the recovery, for the defragmentation figure: with bbolt's overhead
# (a database reaches the quota after about 0.8 of it is written) and the data in use, about two
# thirds of the quota: clear of NOSPACE and of the operator's quota-pressure rule (0.8 of it), so
# only the compaction makes it defragment.
REFILL_FRACTION = 0.5
# Issue 21: a member's defragmentation within 1.2x raw `etcdctl defrag` plus the drain.
DEFRAGMENT_RATIO_TARGET = 1.2
RECOVERY_TIMEOUT_SECONDS = 300.0
DEFRAGMENT_TIMEOUT_SECONDS = 300.0
DEFRAGMENT_METRIC = "etcd_operator_defragmentation_duration_seconds"
MIB = history_load.MIB


def maintenance_spec(quota_mib: int) -> dict[str, Any]:
    """No compaction of its own (history only grows), the quota, and defragmentation of any member
    with 1 MiB to reclaim (and half its database: the default threshold)."""
    return {"compaction": {"mode": "disabled"}, "backendQuota": f"{quota_mib}Mi",
            "defragmentation": {"minimumFreeSize": "1Mi"}}


@dataclass(frozen=True)
class PodView:
    """What the defragmentation figure reads off a member pod."""

    name: str
    serving: bool  # selected by the client service
    defragmented_at: str | None

    @classmethod
    def of(cls, pod: Any) -> PodView:
        labels = pod.metadata.labels or {}
        annotations = pod.metadata.annotations or {}
        return cls(pod.metadata.name, labels.get(c.LABEL_SERVING) == c.LABEL_SERVING_VALUE,
                   annotations.get(c.ANNOTATION_DEFRAGMENTED_AT))


@dataclass
class DefragmentTimeline:
    """When the benchmark's poll first saw each member pod drained (out of the client service)
    and then defragmented (its defragmented-at annotation changed from `before`)."""

    before: dict[str, str | None]  # defragmented-at of each member pod before the compaction
    drained: dict[str, float] = field(default_factory=dict)  # time.monotonic() by pod name
    done: dict[str, float] = field(default_factory=dict)

    def observe(self, pods: Sequence[PodView], now: float) -> bool:
        """Record what `pods` show at `now`; True once every pod of `before` is defragmented."""
        for pod in pods:
            if pod.name not in self.before:
                continue
            if pod.defragmented_at != self.before[pod.name]:
                self.done.setdefault(pod.name, now)
            elif not pod.serving:
                self.drained.setdefault(pod.name, now)
        return set(self.before) <= set(self.done)

    def member_seconds(self) -> tuple[float, ...]:
        """Drained -> defragmented per member seen both ways, by pod name."""
        return tuple(self.done[n] - self.drained[n] for n in sorted(self.done) if n in self.drained)


def measure_maintenance(sandbox: Sandbox, repeat: int, quota_mib: int = QUOTA_MIB) -> list[Result]:
    """Per run, the floor, then the operator: fill a fresh cluster with history until NOSPACE and
    time until it takes writes again; then write REFILL_FRACTION of the quota again, compact, and
    time each member's defragmentation."""
    quota = quota_mib * MIB
    refill = int(quota * REFILL_FRACTION)
    operator_runs: list[MaintenanceRun] = []
    request_seconds: list[float] = []
    floor_runs: list[MaintenanceRun] = []
    with bench_namespace(sandbox, "maintenance") as namespace:
        clusters = BenchClusters(sandbox, namespace)
        for run in range(repeat):
            floor_runs.append(maintenance_floor.measure_floor(quota, refill, SIZE))
            operated, request = _operator_run(sandbox, clusters, f"maint-{run}", quota, refill)
            operator_runs.append(operated)
            request_seconds.append(request)
            log.info("maintenance: no-space -> writable: operator %.2fs, floor %.2fs; defragment per member: "
                     "operator %s s (the request %.2fs), floor %s s", operated.no_space_seconds,
                     floor_runs[-1].no_space_seconds, _listed(operated.defragment_seconds), request,
                     _listed(floor_runs[-1].defragment_seconds))
    return [_no_space_result(quota_mib, operator_runs, floor_runs),
            *_defragment_results(operator_runs, request_seconds, floor_runs)]


def _operator_run(sandbox: Sandbox, clusters: BenchClusters, name: str, quota: int,
                  refill: int) -> tuple[MaintenanceRun, float]:
    """The operator's run; its figures and the mean of its defragment requests (its own metric)."""
    clusters.create(name, SIZE, maintenance_spec(quota // MIB))
    clusters.seconds_until(time.monotonic(), lambda: clusters.running_with_pods(name, SIZE),
                           f"{name} Running {SIZE}/{SIZE}")
    urls = [f"http://{p.status.pod_ip}:2379" for p in sorted(clusters.pods(name), key=lambda p: p.metadata.name)]
    writer = history_load.HistoryWriter(urls[0], history_load.keys_for(quota))
    refused_at = writer.fill_until_refused(4 * quota)
    refused_after = writer.written_bytes
    wait_for(lambda: _serving_member_takes_a_write(clusters, name), timeout=RECOVERY_TIMEOUT_SECONDS,
             interval=POLL_SECONDS, what=f"{clusters.namespace}/{name} writable again after NOSPACE")
    no_space = time.monotonic() - refused_at
    log.info("%s: writable %.2fs after NOSPACE (%.0f MiB written)", name, no_space, refused_after / MIB)
    writer.write(refill)
    sizes = tuple(history_load.db_size(url) for url in urls)
    requests_before = _defragment_requests(sandbox, clusters.namespace, name)
    timeline = DefragmentTimeline({pod.name: pod.defragmented_at for pod in _pod_views(clusters, name)})
    history_load.compact_all_history(urls[0])
    wait_for(lambda: timeline.observe(_pod_views(clusters, name), time.monotonic()),
             timeout=DEFRAGMENT_TIMEOUT_SECONDS, interval=POLL_SECONDS,
             what=f"{clusters.namespace}/{name}: every member defragmented after the compaction")
    requests_after = _defragment_requests(sandbox, clusters.namespace, name)
    clusters.delete(name)
    count = requests_after[1] - requests_before[1]
    if not count:
        log.warning("%s/%s: the operator's %s did not count the defragmentations", clusters.namespace, name,
                    DEFRAGMENT_METRIC)
    request = (requests_after[0] - requests_before[0]) / count if count else float("nan")
    return MaintenanceRun(no_space, refused_after, timeline.member_seconds(), sizes), request


def _pod_views(clusters: BenchClusters, name: str) -> list[PodView]:
    return [PodView.of(pod) for pod in clusters.pods(name) if not pod.metadata.deletion_timestamp]


def _serving_member_takes_a_write(clusters: BenchClusters, name: str) -> bool:
    """A write through the client service: to a member pod it selects (the sandbox resolves a
    service name to the IPs of the pods it selects)."""
    pods = [p for p in clusters.pods(name) if PodView.of(p).serving and p.status.pod_ip]
    return any(history_load.write_accepted(f"http://{p.status.pod_ip}:2379") for p in pods)


def _defragment_requests(sandbox: Sandbox, namespace: str, cluster: str) -> tuple[float, float]:
    """(sum, count) of the operator's defragmentation duration histogram for one cluster."""
    core: Any = k8s.CoreV1Api(sandbox.api_client())
    pods = [p for p in core.list_namespaced_pod(OPERATOR_NAMESPACE, label_selector=OPERATOR_SELECTOR).items
            if p.status.pod_ip and not p.metadata.deletion_timestamp]
    if len(pods) != 1:
        raise RuntimeError(f"expected one operator pod, found {len(pods)}")
    url = f"http://{pods[0].status.pod_ip}:{OPERATOR_METRICS_PORT}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    found = {"sum": 0.0, "count": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("namespace") == namespace and sample.labels.get("cluster") == cluster:
                for suffix in found:
                    if sample.name == f"{DEFRAGMENT_METRIC}_{suffix}":
                        found[suffix] = float(sample.value)
    return found["sum"], found["count"]


def _no_space_result(quota_mib: int, operator_runs: Sequence[MaintenanceRun],
                     floor_runs: Sequence[MaintenanceRun]) -> Result:
    operated = [r.no_space_seconds for r in operator_runs]
    floors = [r.no_space_seconds for r in floor_runs]
    note = (f"first write refused for NOSPACE -> a write accepted again, after "
            f"{_mib(r.refused_after_bytes for r in operator_runs)} MiB of history (floor "
            f"{_mib(r.refused_after_bytes for r in floor_runs)}); operator: noticing the alarm, compaction, "
            f"{SIZE} defragmentations one at a time, each drained, the leader's after a leadership move, disarm; "
            f"floor: etcdctl endpoint status, compaction --physical, defrag per endpoint, alarm disarm; "
            f"operator {describe_samples(operated)}; floor {describe_samples(floors)}")
    return Result.against_floor(f"no-space -> writable, size {SIZE} ({quota_mib} MiB quota)", "s",
                                median(operated), median(floors), target=None, note=note)


def _defragment_results(operator_runs: Sequence[MaintenanceRun], request_seconds: Sequence[float],
                        floor_runs: Sequence[MaintenanceRun]) -> list[Result]:
    members = [s for r in operator_runs for s in r.defragment_seconds]
    floors = [s for r in floor_runs for s in r.defragment_seconds]
    database = (f"{_mib(s for r in operator_runs for s in r.db_sizes)} MiB database (floor "
                f"{_mib(s for r in floor_runs for s in r.db_sizes)}), "
                f"{history_load.IN_USE_FRACTION * 100:.0f} % of the quota in use")
    drain = median(members) - median(request_seconds)
    request = Result.against_floor(
        "defragment one member: the request", "s", median(request_seconds), median(floors),
        target=DEFRAGMENT_RATIO_TARGET,
        note=(f"{database}; the operator's defragment request (its {DEFRAGMENT_METRIC}, mean per member) against "
              f"`etcdctl defrag` on one plain member's endpoint; issue 21's target, drain start -> done <= 1.2x "
              f"the floor + the drain, with everything else counted as the drain (next row: {drain:.2f} s); "
              f"operator {describe_samples(request_seconds)}; floor {describe_samples(floors)}"))
    whole = Result.against_floor(
        "defragment one member, drain included", "s", median(members), median(floors), target=None,
        note=(f"from the member pod leaving the client service (serving label removed) to defragmented-at on it, "
              f"polled every {POLL_SECONDS:g} s: the drain (the pass that finds it out of the service; the sandbox "
              f"has no EndpointSlices to wait for), the request, the pod patch that serves it again; leadership "
              f"moves are before it; {describe_samples(members)}"))
    return [request, whole]


def _mib(sizes: Iterable[int]) -> str:
    values = [s / MIB for s in sizes]
    return f"{median(values):.0f}" if values else "?"


def _listed(samples: Sequence[float]) -> str:
    return ", ".join(f"{s:.2f}" for s in samples)
