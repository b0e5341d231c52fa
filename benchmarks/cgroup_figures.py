"""What putting a pod in its own cgroups costs (`--only pod-cgroups`): the process kubelet's
placement of one container (its groups made with limits, joined by the wrapper shell, the command
exec'd) less a plain exec of the same command, against the start of a bare pod in the same
sandbox (created -> its container running). Target: at most a tenth of a pod start."""
from __future__ import annotations

import subprocess
import time
import uuid
from dataclasses import replace
from typing import Any, cast

from kubernetes import client as k8s

from benchmarks.environment import bench_namespace
from benchmarks.results import Result, median
from kube_sandbox.kubelet.cgroups import PodCgroups, container_limits, join_argv, machine_layout, remove_leftovers
from kube_sandbox.testing import Sandbox

PLACEMENTS = 40
POD_STARTS = 5
POLL_SECONDS = 0.02
POD_START_TIMEOUT_SECONDS = 60.0
BENCH_GROUP = "kube-sandbox-bench"  # not any sandbox's own group
LIMITS = {"resources": {"limits": {"memory": "64Mi", "cpu": "1"}}}
TARGET_SHARE = 0.10


def placement_seconds() -> tuple[float, float]:
    """(median exec of /bin/true, median placement + exec of it), each over PLACEMENTS runs."""
    layout = machine_layout()
    if layout is None:
        raise RuntimeError("no hybrid cgroup layout writable here: pods run without cgroups")
    layout = replace(layout, group=BENCH_GROUP)
    plain, placed = [], []
    try:
        for _ in range(PLACEMENTS):
            started = time.perf_counter()
            subprocess.run(["/bin/true"], check=True)
            plain.append(time.perf_counter() - started)
            pod = PodCgroups(layout, str(uuid.uuid4()))
            started = time.perf_counter()
            subprocess.run(join_argv(pod.prepare("main", container_limits(LIMITS)), ["/bin/true"]), check=True)
            placed.append(time.perf_counter() - started)
            pod.remove()
    finally:
        remove_leftovers(layout)
    return median(plain), median(placed)


def _bare_pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"], **LIMITS}]}}


def pod_start_seconds(core: k8s.CoreV1Api, namespace: str) -> float:
    """Median, over POD_STARTS bare pods, of create -> its container running (polled)."""
    samples = []
    for index in range(POD_STARTS):
        name = f"start-{index}"
        started = time.perf_counter()
        core.create_namespaced_pod(namespace, cast(k8s.V1Pod, _bare_pod(name)))
        deadline = time.monotonic() + POD_START_TIMEOUT_SECONDS
        while True:
            status = core.read_namespaced_pod_status(name, namespace).status
            statuses = (status.container_statuses if status is not None else None) or []
            if statuses and statuses[0].state and statuses[0].state.running:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"bare pod {namespace}/{name} not running after {POD_START_TIMEOUT_SECONDS:.0f}s")
            time.sleep(POLL_SECONDS)  # polling a condition with a deadline
        samples.append(time.perf_counter() - started)
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    return median(samples)


def measure_pod_cgroups(sandbox: Sandbox) -> list[Result]:
    plain, placed = placement_seconds()
    with bench_namespace(sandbox, "pod-cgroups") as namespace:
        pod_start = pod_start_seconds(k8s.CoreV1Api(sandbox.api_client()), namespace)
    cost = max(placed - plain, 0.0)
    return [Result.against_floor(
        "cgroup placement per container", "ms", cost * 1000, pod_start * 1000, target=TARGET_SHARE,
        note=f"placed exec {placed * 1000:.1f} ms - plain exec {plain * 1000:.1f} ms (medians of {PLACEMENTS}); "
             f"floor: a bare pod's start, median of {POD_STARTS}")]
