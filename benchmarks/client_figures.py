"""The client-view figure: what etcd's own load checker (`etcdctl check perf --load=s` through the
client service, tests/check_perf.py) sees while the operator makes each change, one checker run
per change: the slowest request and the errors, beside how long the change took. The floor is the
same checker on the same cluster with nothing changing, in the same run."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from benchmarks.clusters import GROUP, PLURAL, VERSION, BenchClusters
from benchmarks.environment import bench_namespace
from benchmarks.results import Result
from kube_sandbox.binaries import newest_etcd_version
from kube_sandbox.testing import Sandbox, wait_for
from tests.check_perf import CheckPerfRun

log = logging.getLogger(__name__)

NAME = "client-view"
OLD, NEW = newest_etcd_version("3.5"), newest_etcd_version("3.6")
CHANGE_TIMEOUT_SECONDS = 50.0  # each change must end inside its checker's 60 s


@dataclass(frozen=True)
class ChangeSeen:
    label: str
    seconds: float
    slowest: float | None
    errors: int
    leader_changes: int
    passed: bool


def measure_client_view(sandbox: Sandbox) -> list[Result]:
    """A 3-member emptyDir cluster on 3.5: the floor, then upgrade to 3.6, a pod-spec restart, 3 -> 5,
    5 -> 3, a deleted member, each under a checker run of its own."""
    with bench_namespace(sandbox, "client-view") as namespace:
        clusters = BenchClusters(sandbox, namespace)
        clusters.create(NAME, 3, {"version": OLD})
        wait_for(lambda: clusters.running_with_pods(NAME, 3), timeout=180, interval=0.5, what="3 members")
        endpoint = f"http://{NAME}-client.{namespace}.svc:2379"
        floor_run = CheckPerfRun(sandbox, [endpoint], "/bench-floor/")
        floor_run.start()
        floor = floor_run.finish()
        log.info("client view, nothing changing: %s", floor.summary())
        seen = [_under_load(sandbox, clusters, endpoint, label, change)
                for label, change in _changes(clusters)]
    results = []
    for change in seen:
        note = (f"{change.label} took {change.seconds:.1f}s; {change.errors} failed requests, "
                f"{change.leader_changes} leader change(s); check perf {'PASS' if change.passed else 'FAIL'}")
        results.append(Result.against_floor(f"client view: slowest request during {change.label}", "s",
                                            change.slowest if change.slowest is not None else float("nan"),
                                            floor.slowest_seconds or 0.0, target=0.5, target_on="value",
                                            note=note))
    return results


def _changes(clusters: BenchClusters) -> list[tuple[str, Callable[[], None]]]:
    def patch(spec: dict[str, Any]) -> None:
        clusters.custom.patch_namespaced_custom_object(GROUP, VERSION, clusters.namespace, PLURAL, NAME,
                                                       {"spec": spec})

    def upgrade() -> None:
        patch({"version": NEW})
        wait_for(lambda: _settled(clusters, 3, lambda pods: all(p.spec.containers[0].image.endswith(NEW)
                                                                 for p in pods)),
                 timeout=CHANGE_TIMEOUT_SECONDS, interval=0.2, what="upgraded")

    def pod_spec() -> None:
        patch({"pod": {"annotations": {"bench/revision": "1"}}})
        wait_for(lambda: _settled(clusters, 3, lambda pods: all(
            (p.metadata.annotations or {}).get("bench/revision") == "1" for p in pods)),
            timeout=CHANGE_TIMEOUT_SECONDS, interval=0.2, what="restarted for the pod-spec change")

    def scale(size: int) -> None:
        patch({"size": size})
        wait_for(lambda: _settled(clusters, size), timeout=CHANGE_TIMEOUT_SECONDS, interval=0.2,
                 what=f"scaled to {size}")

    def delete_member() -> None:
        victim = sorted(p.metadata.name for p in clusters.pods(NAME))[0]
        clusters.delete_pod(victim)
        wait_for(lambda: _settled(clusters, 3, lambda pods: victim not in {p.metadata.name for p in pods}),
                 timeout=CHANGE_TIMEOUT_SECONDS, interval=0.2, what=f"{victim} replaced")

    return [(f"upgrade {OLD} -> {NEW}", upgrade), ("pod-spec restart", pod_spec), ("scale 3->5", lambda: scale(5)),
            ("scale 5->3", lambda: scale(3)), ("deleted member", delete_member)]


def _settled(clusters: BenchClusters, size: int, pods_ok: Callable[[list[Any]], bool] | None = None) -> bool:
    status = cast(dict[str, Any], clusters.get(NAME).get("status") or {})
    pods = clusters.pods(NAME)
    return (clusters.running_with_pods(NAME, size) is not None
            and all((p.metadata.labels or {}).get("etcd.database.coreos.com/serving") == "true" for p in pods)
            and not status.get("targetVersion") and (pods_ok is None or pods_ok(pods)))


def _under_load(sandbox: Sandbox, clusters: BenchClusters, endpoint: str, label: str,
                change: Callable[[], None]) -> ChangeSeen:
    run = CheckPerfRun(sandbox, [endpoint], f"/bench-{len(label)}-{int(time.time())}/")
    run.start()
    started = time.monotonic()
    change()
    seconds = time.monotonic() - started
    result = run.finish()
    log.info("client view, %s (%.1fs): %s; %d leader change(s)", label, seconds, result.summary(),
             run.leader_changes)
    return ChangeSeen(label, seconds, result.slowest_seconds, sum(result.errors.values()), run.leader_changes,
                      result.passed)
