"""The fleet figure: for each count (10, 50, 100 by default) a fleet of exactly that many size-1
EtcdClusters, created at once from none and deleted (down to their pods) before the next count. At
each count: seconds from the first create until every cluster says Running; then, idle, the
operator's CPU seconds per minute (its own process and every child it reaped, such as etcdctl, from
/proc), its RSS, the worst lag of a scheduled re-check (the operator's own
etcd_operator_recheck_lag_max_seconds), and its API requests per second per cluster (apiserver's
counter minus one window with the operator scaled to 0, taken with the largest fleet running)."""
from __future__ import annotations

import logging
import os
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from prometheus_client.parser import text_string_to_metric_families

from benchmarks.apiserver_requests import RequestRate, measure_request_rate
from benchmarks.clusters import GROUP, PLURAL, VERSION, BenchClusters
from benchmarks.environment import ETCD_POD_SELECTOR, OPERATOR_NAMESPACE, OperatorDeployment, bench_namespace
from benchmarks.process_status import read_process_status
from benchmarks.results import Result
from kube_sandbox.testing import Sandbox, WaitTimeout, wait_for

log = logging.getLogger(__name__)

FLEET_CLUSTER_SIZE = 1
ALL_RUNNING_TIMEOUT_SECONDS = 600.0
ALL_RUNNING_POLL_SECONDS = 0.5
ALL_GONE_TIMEOUT_SECONDS = 300.0
ALL_GONE_POLL_SECONDS = 0.5
# After the last cluster says Running, let first passes, status writes and events finish before
# the idle window (the operator's first re-checks come one resync period after its first pass).
SETTLE_SECONDS = 15.0
OPERATOR_METRICS_PORT = 8080  # deploy/operator.yaml: containerPort "http"
LAG_METRIC = "etcd_operator_recheck_lag_max_seconds"
RESYNC_SECONDS = 10.0  # the operator's default --resync-seconds (deploy/operator.yaml sets none)
# Targets (issue "Speed and scale", for 100 idle clusters).
CPU_PERCENT_TARGET = 5.0  # of one core, child processes included
RSS_TARGET_MIB = 250.0
LAG_TARGET_SECONDS = 2 * RESYNC_SECONDS  # no re-check later than 2x its (shortest) interval
REQUESTS_TARGET_PER_SECOND = 0.05  # per cluster
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuSample:
    at: float  # time.monotonic()
    seconds: float  # user + system CPU of the process, its threads and its reaped children


def read_cpu_seconds(pid: int) -> float:
    """utime + stime + cutime + cstime of `pid` (/proc/<pid>/stat), plus those of its live
    children (a child still running, such as an etcdctl mid-call, is not in cutime yet)."""
    total = _own_and_reaped(pid)
    for child in _children(pid):
        total += _own_and_reaped(child)
    return total


def _own_and_reaped(pid: int) -> float:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0  # exited meanwhile: its time is now in its parent's cutime
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) ": field 3 onwards
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    return (utime + stime + cutime + cstime) / CLOCK_TICKS


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:
            continue
    return found


def sample_cpu(pid: int) -> CpuSample:
    return CpuSample(time.monotonic(), read_cpu_seconds(pid))


def cpu_seconds_per_minute(before: CpuSample, after: CpuSample) -> float:
    return (after.seconds - before.seconds) / (after.at - before.at) * 60.0


def operator_metric(operator: OperatorDeployment, name: str) -> float | None:
    """A sample of the leading operator pod's own /metrics."""
    pod_name = operator.wait_leading()
    pod: Any = operator.core.read_namespaced_pod(pod_name, OPERATOR_NAMESPACE)
    with urllib.request.urlopen(f"http://{pod.status.pod_ip}:{OPERATOR_METRICS_PORT}/metrics", timeout=10) as r:
        text = r.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    return None


def fleet_names(count: int) -> list[str]:
    """The clusters of the fleet of `count`. Each count has names of its own, so nothing left of an
    earlier fleet (a service still being garbage-collected, say) is taken for one of them."""
    return [f"fleet{count}-{i}" for i in range(count)]


def not_running(names: Sequence[str], listed: Sequence[Mapping[str, Any]]) -> list[str]:
    """Those of `names` whose EtcdCluster in `listed` (list items) is missing or does not say Running
    with its one member ready."""
    running = {item["metadata"]["name"] for item in listed
               if (item.get("status") or {}).get("phase") == "Running"
               and (item.get("status") or {}).get("readyCount") == FLEET_CLUSTER_SIZE}
    return [name for name in names if name not in running]


def wait_until_none(left: Callable[[], list[str]], *, timeout: float, interval: float, what: str) -> None:
    """Poll `left` until it lists nothing; on timeout, fail naming (up to 10 of) what it still listed."""
    seen: list[str] = []

    def none_left() -> bool:
        seen[:] = left()
        return not seen

    try:
        wait_for(none_left, timeout=timeout, interval=interval, what=what)
    except WaitTimeout as e:
        raise WaitTimeout(f"{e}; {len(seen)} still: {', '.join(seen[:10])}") from e


class Fleet:
    """`count` size-1 EtcdClusters in the figure's namespace, created all at once and deleted all at once."""

    def __init__(self, clusters: BenchClusters, count: int) -> None:
        self.clusters = clusters
        self.names = fleet_names(count)

    def create(self) -> float:
        """Create every cluster at once; seconds from the first create until every one says Running."""
        started = time.monotonic()
        for name in self.names:
            self.clusters.create(name, FLEET_CLUSTER_SIZE)
        self.wait_all_running()
        seconds = time.monotonic() - started
        log.info("%d clusters created at once; all Running after %.1fs", len(self.names), seconds)
        return seconds

    def wait_all_running(self) -> None:
        wait_until_none(self.not_running, timeout=ALL_RUNNING_TIMEOUT_SECONDS, interval=ALL_RUNNING_POLL_SECONDS,
                        what=f"{len(self.names)} fleet clusters Running")

    def not_running(self) -> list[str]:
        return not_running(self.names, self._listed())

    def delete(self) -> None:
        """Delete every cluster at once (one request: BenchClusters.delete would wait for each one's
        pods in turn) and wait until neither they nor their pods are left."""
        started = time.monotonic()
        self.clusters.custom.delete_collection_namespaced_custom_object(GROUP, VERSION, self.clusters.namespace,
                                                                         PLURAL)
        wait_until_none(self.left, timeout=ALL_GONE_TIMEOUT_SECONDS, interval=ALL_GONE_POLL_SECONDS,
                        what=f"{len(self.names)} fleet clusters and their pods gone")
        log.info("%d clusters deleted at once; they and their pods gone after %.1fs", len(self.names),
                 time.monotonic() - started)

    def left(self) -> list[str]:
        """EtcdClusters and etcd pods (terminating ones included) still in the namespace."""
        pods: list[Any] = self.clusters.core.list_namespaced_pod(self.clusters.namespace,
                                                                 label_selector=ETCD_POD_SELECTOR).items
        return ([f"EtcdCluster {item['metadata']['name']}" for item in self._listed()]
                + [f"pod {pod.metadata.name}" for pod in pods])

    def _listed(self) -> list[dict[str, Any]]:
        listed = cast(dict[str, Any], self.clusters.custom.list_namespaced_custom_object(
            GROUP, VERSION, self.clusters.namespace, PLURAL))
        return cast(list[dict[str, Any]], listed.get("items", []))


@dataclass(frozen=True)
class IdleWindow:
    count: int
    supervised: int
    cpu_seconds_per_minute: float
    rss_mib: float
    worst_lag_seconds: float | None
    requests: RequestRate


def measure_fleet(sandbox: Sandbox, operator: OperatorDeployment, counts: Sequence[int],
                  window_seconds: float) -> list[Result]:
    """For each count, smallest first: a fleet of that many clusters created at once, timed until all
    Running, settled, measured idle, then deleted. The request baseline (operator scaled to 0) is
    taken while the largest fleet runs, before it is deleted."""
    ordered = sorted(set(counts))
    if not ordered:
        raise ValueError("the fleet figure needs at least one cluster count")
    results: list[Result] = []
    windows: list[IdleWindow] = []
    baseline: RequestRate | None = None
    with bench_namespace(sandbox, "fleet") as namespace:
        clusters = BenchClusters(sandbox, namespace)
        for count in ordered:
            fleet = Fleet(clusters, count)
            seconds = fleet.create()
            results.append(Result.alone(
                f"fleet: {count} clusters all Running", "s", seconds,
                note=f"{count} size-1 clusters created at once, none before them in the namespace (each count "
                     f"is a fleet of its own); from the first create until every status says Running 1/1"))
            time.sleep(SETTLE_SECONDS)  # ageing the fleet into its idle state is the scenario itself
            windows.append(_idle_window(sandbox, operator, clusters, count, window_seconds))
            if count == ordered[-1]:
                baseline = _baseline_requests(sandbox, operator, fleet, window_seconds)
            fleet.delete()
    assert baseline is not None  # taken at the last (largest) count
    for window in windows:
        results.extend(_window_results(window, baseline, window_seconds))
    return results


def _idle_window(sandbox: Sandbox, operator: OperatorDeployment, clusters: BenchClusters, count: int,
                 window_seconds: float) -> IdleWindow:
    pid = operator.pid()
    before = sample_cpu(pid)
    requests = measure_request_rate(sandbox.config, window_seconds)
    after = sample_cpu(pid)
    window = IdleWindow(
        count=count,
        supervised=_all_clusters(clusters),
        cpu_seconds_per_minute=cpu_seconds_per_minute(before, after),
        rss_mib=read_process_status(pid).rss_mib,
        worst_lag_seconds=operator_metric(operator, LAG_METRIC),
        requests=requests,
    )
    log.info("fleet of %d idle: CPU %.2f s/min, RSS %.1f MiB, worst re-check lag %s s, apiserver %.3f req/s",
             count, window.cpu_seconds_per_minute, window.rss_mib, window.worst_lag_seconds,
             window.requests.per_second)
    return window


def _baseline_requests(sandbox: Sandbox, operator: OperatorDeployment, fleet: Fleet,
                       window_seconds: float) -> RequestRate:
    """apiserver requests/s of everyone but the operator, with `fleet` (the largest) running."""
    operator.scale(0)
    try:
        log.info("idle window with the operator scaled to 0: %.0fs", window_seconds)
        baseline = measure_request_rate(sandbox.config, window_seconds)
    finally:
        operator.scale(1)
    fleet.wait_all_running()
    return baseline


def _all_clusters(clusters: BenchClusters) -> int:
    listed = cast(dict[str, Any], clusters.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL))
    return len(listed.get("items", []))


def _window_results(window: IdleWindow, baseline: RequestRate, window_seconds: float) -> list[Result]:
    n = window.count
    per_cluster = max(window.requests.per_second - baseline.per_second, 0.0) / window.supervised
    cpu_percent = window.cpu_seconds_per_minute / 60.0 * 100.0
    lag = window.worst_lag_seconds
    lag_results = [] if lag is None else [
        Result.alone(f"fleet: worst re-check lag, {n} clusters", "s", lag, target=LAG_TARGET_SECONDS,
                     note="etcd_operator_recheck_lag_max_seconds: the latest any scheduled re-check started since "
                          "the operator started (the smaller fleets before this one included); target 2x the "
                          f"{RESYNC_SECONDS:g}s resync period")]
    return [
        Result.alone(f"fleet: operator CPU, {n} idle clusters", "s/min", window.cpu_seconds_per_minute,
                     target=CPU_PERCENT_TARGET * 0.6,
                     note=f"{cpu_percent:.2f}% of one core over a {window_seconds:.0f}s window, its threads and "
                          f"child processes included (/proc utime+stime+cutime+cstime); target {CPU_PERCENT_TARGET:g}% "
                          f"of a core = {CPU_PERCENT_TARGET * 0.6:g} s/min"),
        Result.alone(f"fleet: operator RSS, {n} idle clusters", "MiB", window.rss_mib, target=RSS_TARGET_MIB),
        *lag_results,
        Result(f"fleet: idle API req/s per cluster ({n} clusters)", "req/s per cluster", per_cluster,
               floor=baseline.per_second, ratio=None, target=REQUESTS_TARGET_PER_SECOND, target_on="value",
               met=per_cluster <= REQUESTS_TARGET_PER_SECOND,
               note=f"({window.requests.per_second:.3f} - {baseline.per_second:.3f} baseline req/s) / "
                    f"{window.supervised} clusters supervised; baseline: the operator scaled to 0 with the "
                    f"largest fleet running"),
    ]
