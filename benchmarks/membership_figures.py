"""Figures about membership changes: bring-up, scaling, replacing a deleted member. Each operator
run is timed from the user's action (create, patch, pod delete) until the status says it is done,
and interleaved with its floor (benchmarks.floor) so both see the same machine."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from benchmarks import floor
from benchmarks.clusters import ETCD_VERSION, BenchClusters, Status
from benchmarks.environment import bench_namespace
from benchmarks.pod_floor import pod_launcher
from benchmarks.results import Result, TargetOn, describe_samples, median
from kube_sandbox.testing import Sandbox

log = logging.getLogger(__name__)

# Targets of issue "Speed and scale": each figure within 1.15x its floor; a shrink and the
# replacement of a deleted member within half a second of theirs.
RATIO_TARGET = 1.15
EXCESS_TARGET_SECONDS = 0.5
CHEAP_RUNS = 5  # a size-1 bring-up takes about a second: always take the median of at least 5


def _compare(figure: str, operator_samples: Sequence[float], floor_samples: Sequence[float], *,
             target: float | None, target_on: TargetOn = "ratio") -> Result:
    note = f"operator {describe_samples(operator_samples)}; floor {describe_samples(floor_samples)}"
    log.info("%s: %s", figure, note)
    return Result.against_floor(figure, "s", median(operator_samples), median(floor_samples), target=target,
                                target_on=target_on, note=note)


def measure_bring_up(sandbox: Sandbox, sizes: Sequence[int], repeat: int) -> list[Result]:
    """EtcdCluster created -> Running with readyCount == size; floor: raw seed + learner adds."""
    results = []
    with bench_namespace(sandbox, "bring-up") as namespace:
        clusters = BenchClusters(sandbox, namespace)
        for size in sizes:
            operator_samples: list[float] = []
            floor_samples: list[float] = []
            for run in range(max(repeat, CHEAP_RUNS) if size == 1 else repeat):
                floor_samples.append(floor.measure_bring_up(size))
                name = f"up{size}-{run}"
                started = time.monotonic()
                clusters.create(name, size)
                operator_samples.append(clusters.seconds_until(
                    started, lambda: clusters.running(name, size), f"{name} Running {size}/{size}"))
                log.info("bring-up %d: operator %.2fs, floor %.2fs", size, operator_samples[-1], floor_samples[-1])
                clusters.delete(name)
            results.append(_compare(f"bring-up size {size}", operator_samples, floor_samples, target=RATIO_TARGET))
    return results


def measure_scaling(sandbox: Sandbox, repeat: int, small: int = 3, large: int = 5) -> list[Result]:
    """spec.size small -> large -> small on a settled cluster, until Running with no surplus pods;
    floor: raw learner adds / member removes (+ process exit) on a settled raw cluster. Growing
    is also compared with the same raw steps whose members run as pods (benchmarks.pod_floor):
    each added member's pod start is then in the floor as in the operator's figure; that is the
    floor its target is checked against (the raw-process one is shown beside it)."""
    up_operator: list[float] = []
    up_floor: list[float] = []
    up_pod_floor: list[float] = []
    down_operator: list[float] = []
    down_floor: list[float] = []
    with bench_namespace(sandbox, "scale") as namespace:
        clusters = BenchClusters(sandbox, namespace)
        for run in range(repeat):
            grow, shrink = floor.measure_scale_round_trip(small, large)
            up_floor.append(grow)
            down_floor.append(shrink)
            up_pod_floor.append(floor.measure_scale(
                small, large, ETCD_VERSION, launch=pod_launcher(clusters.core, namespace, ETCD_VERSION)))
            name = f"scale-{run}"
            clusters.create(name, small)
            clusters.seconds_until(time.monotonic(), lambda: clusters.running_with_pods(name, small),
                                   f"{name} Running {small}/{small}")
            for target_size, samples in ((large, up_operator), (small, down_operator)):
                floor.wait_settled_since(time.monotonic())
                started = time.monotonic()
                generation = clusters.patch_size(name, target_size)
                samples.append(clusters.seconds_until(
                    started, _bind(clusters.running_with_pods, name, target_size, generation),
                    f"{name} Running {target_size}/{target_size} with {target_size} pods"))
            log.info("scale %d->%d: operator %.2fs, floor %.2fs (members as pods: %.2fs); %d->%d: operator %.2fs, "
                     "floor %.2fs", small, large, up_operator[-1], up_floor[-1], up_pod_floor[-1], large, small,
                     down_operator[-1], down_floor[-1])
            clusters.delete(name)
    return [_compare(f"scale {small}->{large}", up_operator, up_pod_floor, target=RATIO_TARGET),
            _compare(f"scale {small}->{large}, raw-process floor", up_operator, up_floor, target=None),
            _compare(f"scale {large}->{small}", down_operator, down_floor, target=EXCESS_TARGET_SECONDS,
                     target_on="excess")]


def measure_recovery(sandbox: Sandbox, repeat: int, size: int = 3) -> list[Result]:
    """Delete a follower's pod in a settled Running cluster -> Running size/size again with a new
    member; floor: a raw follower's death, `member remove`, learner add, start, promote."""
    operator_samples: list[float] = []
    floor_samples: list[float] = []
    with bench_namespace(sandbox, "recovery") as namespace:
        clusters = BenchClusters(sandbox, namespace)
        for run in range(repeat):
            floor_samples.append(floor.measure_replace_member(size))
            name = f"recover-{run}"
            clusters.create(name, size)
            clusters.seconds_until(time.monotonic(), lambda: clusters.running_with_pods(name, size),
                                   f"{name} Running {size}/{size}")
            floor.wait_settled_since(time.monotonic())
            status = clusters.running(name, size) or {}
            followers = [p for p in clusters.pods(name) if p.metadata.name != status.get("leader")]
            victim = max(followers, key=lambda p: p.metadata.creation_timestamp)  # newest, as the floor picks
            started = time.monotonic()
            clusters.delete_pod(victim.metadata.name)

            def replaced() -> Status | None:
                status = clusters.running(name, size)
                pods = clusters.pods(name)
                names = {p.metadata.name for p in pods}
                done = (status is not None and len(pods) == size and victim.metadata.uid not in
                        {p.metadata.uid for p in pods} and set(status["members"]["ready"]) == names)
                return status if done else None

            operator_samples.append(clusters.seconds_until(started, replaced, f"{name} member replaced"))
            log.info("recovery: operator %.2fs, floor %.2fs", operator_samples[-1], floor_samples[-1])
            clusters.delete(name)
    return [_compare(f"recover deleted member ({size})", operator_samples, floor_samples,
                     target=EXCESS_TARGET_SECONDS, target_on="excess")]


def _bind(condition: Callable[[str, int, int], Status | None], name: str, size: int,
          generation: int) -> Callable[[], Status | None]:
    return lambda: condition(name, size, generation)
