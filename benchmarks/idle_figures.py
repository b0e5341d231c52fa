"""Figures about idle clusters: Kubernetes API requests per second per idle cluster (apiserver's
own counter, minus a window with the operator scaled to zero) and the operator's RSS and threads."""
from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any, cast

from benchmarks.apiserver_requests import RequestRate, measure_request_rate
from benchmarks.clusters import GROUP, PLURAL, VERSION, BenchClusters
from benchmarks.environment import OPERATOR_NAMESPACE, OperatorDeployment, bench_namespace
from benchmarks.process_status import ProcessStatus, read_process_status
from benchmarks.results import Result
from kube_sandbox.testing import Sandbox

log = logging.getLogger(__name__)

IDLE_REQUESTS_TARGET_PER_SECOND = 0.05  # per cluster (issue "Speed and scale")
IDLE_CLUSTER_SIZE = 1
CREATE_BATCH_SIZE = 5
FLEET_RUNNING_TIMEOUT_SECONDS = 180.0


class IdleFleet:
    """Size-1 EtcdClusters in one namespace, grown in batches, each batch Running before the next."""

    def __init__(self, clusters: BenchClusters) -> None:
        self.clusters = clusters
        self.names: list[str] = []

    def grow_to(self, count: int) -> None:
        while len(self.names) < count:
            batch = [f"idle-{i}" for i in range(len(self.names), min(count, len(self.names) + CREATE_BATCH_SIZE))]
            for name in batch:
                self.clusters.create(name, IDLE_CLUSTER_SIZE)
            self.names.extend(batch)
            self.wait_running(batch)
        log.info("%d idle clusters Running", len(self.names))

    def wait_running(self, names: Sequence[str] | None = None) -> None:
        for name in names or self.names:
            self.clusters.seconds_until(time.monotonic(), lambda: self.clusters.running(name, IDLE_CLUSTER_SIZE),
                                        f"{name} Running", timeout=FLEET_RUNNING_TIMEOUT_SECONDS)


def measure_idle_fleet(sandbox: Sandbox, operator: OperatorDeployment, *, requests_at: int | None,
                       window_seconds: float, resources_at: Sequence[int]) -> list[Result]:
    """Grow one fleet of idle clusters; measure API requests at `requests_at` clusters (if given)
    and the operator's RSS and threads at each count in `resources_at`."""
    results: list[Result] = []
    counts = sorted(set(resources_at) | ({requests_at} if requests_at else set()))
    with bench_namespace(sandbox, "idle") as namespace:
        clusters = BenchClusters(sandbox, namespace)
        fleet = IdleFleet(clusters)
        before = read_process_status(operator.pid())
        before_clusters = _all_clusters(clusters)
        log.info("operator with %d clusters: RSS %.1f MiB, %d threads", before_clusters, before.rss_mib,
                 before.threads)
        for count in counts:
            fleet.grow_to(count)
            if count in resources_at:
                results.extend(_resources(operator, count, _all_clusters(clusters), before, before_clusters))
            if count == requests_at:
                results.extend(_idle_requests(sandbox, operator, fleet, window_seconds, _all_clusters(clusters)))
    return results


def _all_clusters(clusters: BenchClusters) -> int:
    """EtcdClusters in every namespace: the operator supervises all of them, not only ours."""
    listed = cast(dict[str, Any], clusters.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL))
    return len(listed.get("items", []))


def _resources(operator: OperatorDeployment, count: int, supervised: int, before: ProcessStatus,
               before_clusters: int) -> list[Result]:
    status = read_process_status(operator.pid())
    note = (f"floor = the same operator process before the fleet, supervising {before_clusters} clusters; "
            f"now {supervised} clusters in all namespaces")
    log.info("operator with %d clusters: RSS %.1f MiB, %d threads", supervised, status.rss_mib, status.threads)
    return [
        Result.against_floor(f"operator RSS, {count} idle clusters", "MiB", status.rss_mib, before.rss_mib,
                             target=None, note=note),
        Result.against_floor(f"operator threads, {count} idle clusters", "threads", status.threads,
                             before.threads, target=None,
                             note=f"one supervisor thread per cluster by design; {note}"),
    ]


def _objects_elsewhere(clusters: BenchClusters) -> dict[str, str]:
    """resourceVersion of every EtcdCluster, pod and namespace outside our namespace (the operator's
    own pods aside): if any changes during the windows, someone else was busy in the sandbox."""
    versions = {}
    listed = cast(dict[str, Any], clusters.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL))
    for item in listed.get("items", []):
        meta = item["metadata"]
        versions[f"etcdcluster {meta['namespace']}/{meta['name']}"] = meta["resourceVersion"]
    pods: list[Any] = clusters.core.list_pod_for_all_namespaces().items
    for pod in pods:
        versions[f"pod {pod.metadata.namespace}/{pod.metadata.name}"] = pod.metadata.resource_version
    namespaces: list[Any] = clusters.core.list_namespace().items
    for namespace in namespaces:
        versions[f"namespace {namespace.metadata.name}"] = namespace.metadata.resource_version
    return {key: version for key, version in versions.items()
            if f" {clusters.namespace}" not in key and f" {OPERATOR_NAMESPACE}/" not in key}


def _changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(key for key in before.keys() | after.keys() if before.get(key) != after.get(key))


def _idle_requests(sandbox: Sandbox, operator: OperatorDeployment, fleet: IdleFleet, window_seconds: float,
                   supervised: int) -> list[Result]:
    elsewhere = _objects_elsewhere(fleet.clusters)
    log.info("idle window with the operator: %.0fs", window_seconds)
    with_operator = measure_request_rate(sandbox.config, window_seconds)
    operator.scale(0)
    try:
        log.info("idle window with the operator scaled to 0: %.0fs", window_seconds)
        baseline = measure_request_rate(sandbox.config, window_seconds)
    finally:
        operator.scale(1)
    changed = _changes(elsewhere, _objects_elsewhere(fleet.clusters))
    fleet.wait_running()
    per_cluster = max(with_operator.per_second - baseline.per_second, 0.0) / supervised
    _log_rate("with operator", with_operator)
    _log_rate("baseline", baseline)
    share = with_operator.excess_over(baseline, top=4)
    log.info("the operator's share, req/s by kind: %s", share)
    note = (f"({with_operator.per_second:.3f} - {baseline.per_second:.3f} baseline req/s) / {supervised} "
            f"clusters supervised (all namespaces), {window_seconds:.0f}s windows; floor = apiserver req/s "
            f"(all clients) with the operator scaled to 0; the operator's share by kind (req/s): {share}")
    if changed:
        note += (f"; UNRELIABLE: {len(changed)} objects outside the benchmark changed during the windows "
                 f"(e.g. {', '.join(changed[:3])}): run on a quiet sandbox")
        log.warning("other activity in the sandbox during the idle windows: %s", ", ".join(changed[:10]))
    return [Result(f"idle API req/s per cluster ({len(fleet.names)} clusters)", "req/s per cluster", per_cluster,
                   floor=baseline.per_second, ratio=None, target=IDLE_REQUESTS_TARGET_PER_SECOND,
                   target_on="value", met=per_cluster <= IDLE_REQUESTS_TARGET_PER_SECOND, note=note)]


def _log_rate(what: str, rate: RequestRate) -> None:
    log.info("%s: %d requests in %.1fs (%.3f/s): %s", what, rate.total, rate.seconds, rate.per_second,
             rate.breakdown())
