"""Leader election with two operator replicas: exactly one acts (the Lease names it; the other
reconciles nothing), a leader that hangs keeps the lease until it expires and then the standby
takes over and acts, and a leader that is deleted hands the lease over without waiting for expiry.

Failover bounds come from the operator's own lease timing (etcd_operator/cli.py), not from
guesses: a standby polls the lease every retry period (jittered), and only takes a lease it has
seen unchanged for a whole lease duration."""
from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client as k8s

from kube_adapter.leadership import ACQUIRE_RETRY_JITTER
from kube_sandbox.testing import Sandbox, wait_for
from operator_runtime.running import LeaseTiming
from tests.integration.etcd_operator.etcd_data import member_ids
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.etcd_operator.operator_deployment import (
    OPERATOR_CONTAINER,
    OPERATOR_DEPLOYMENT,
    OPERATOR_NAMESPACE,
    START_TIMEOUT_SECONDS,
    operator_container_status,
    operator_pod_logs,
    operator_pods,
    pod_metric,
    pod_metric_samples,
    pod_ready,
    running_operator_pod,
)
from tests.sandbox_sharing import require_alone

# It stops, restarts or reconfigures the operator every other test relies on.
pytestmark = pytest.mark.alone

LEASE_NAME = "etcd-operator"  # --lease-name default, in the operator's own namespace
LEASE_DURATION_SECONDS = LeaseTiming().duration_seconds  # every operator's timing
LEASE_RETRY_PERIOD_SECONDS = LeaseTiming().retry_period_seconds
BECAME_LEADER = "became leader"
CONTROLLER_STARTED = "controller watching EtcdClusters"
# Time for a few API requests and a process to be scheduled on a loaded 2-core machine: added
# once to each bound, never a bound by itself.
API_SLACK_SECONDS = float(LEASE_RETRY_PERIOD_SECONDS)
# Wall clocks of two processes on one machine; only NTP slewing could separate them.
CLOCK_SLACK_SECONDS = 0.5
# The longest gap between two looks at the lease by a standby.
STANDBY_POLL_SECONDS = LEASE_RETRY_PERIOD_SECONDS * ACQUIRE_RETRY_JITTER
# A hung leader: the standby first sees its last renewal within one poll, waits a lease
# duration from then, and notices the expiry at its next poll.
HUNG_LEADER_FAILOVER_SECONDS = LEASE_DURATION_SECONDS + 2 * STANDBY_POLL_SECONDS + API_SLACK_SECONDS
# A deleted leader releases the lease on SIGTERM: the standby takes it at its next poll.
RELEASED_LEASE_FAILOVER_SECONDS = STANDBY_POLL_SECONDS + API_SLACK_SECONDS
CLUSTER = "elected"
CLUSTER_SIZE = 3


def _lease(sandbox: Sandbox) -> Any:
    return k8s.CoordinationV1Api(sandbox.api_client()).read_namespaced_lease(LEASE_NAME, OPERATOR_NAMESPACE)


def _holder(sandbox: Sandbox) -> str:
    return str(_lease(sandbox).spec.holder_identity or "")


def _live_operator_pods(sandbox: Sandbox) -> list[Any]:
    return [p for p in operator_pods(sandbox) if p.metadata.deletion_timestamp is None]


def _reconciles(pod: Any) -> float:
    return sum(pod_metric_samples(pod, "etcd_operator_reconcile_duration_seconds_count", {}))


def _membership_changes(pod: Any, namespace: str, kind: str | None = None) -> float:
    labels = {"namespace": namespace, "cluster": CLUSTER, **({"kind": kind} if kind else {})}
    return sum(pod_metric_samples(pod, "etcd_operator_membership_changes_total", labels))


def _scale(sandbox: Sandbox, replicas: int) -> None:
    require_alone(f"scaling the etcd operator to {replicas}")
    sandbox.kubectl("-n", OPERATOR_NAMESPACE, "scale", f"deployment/{OPERATOR_DEPLOYMENT}", f"--replicas={replicas}")


@dataclass
class Replicas:
    """The operator Deployment at two replicas; remembers frozen pods so teardown can end them."""

    sandbox: Sandbox
    frozen: set[str] = field(default_factory=set)

    def ready_pods(self, count: int, timeout: float = START_TIMEOUT_SECONDS) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            live = _live_operator_pods(self.sandbox)
            ok = len(live) == count and all(pod_ready(p) and p.status.pod_ip for p in live)
            return {p.metadata.name: p for p in live} if ok else None
        return wait_for(ready, timeout=timeout, what=f"{count} ready operator pods")

    def leader_and_standby(self) -> tuple[Any, Any]:
        """The two ready pods once one of them holds the lease: (leader, standby)."""
        def settled() -> tuple[Any, Any] | None:
            pods = self.ready_pods(2)
            holder = _holder(self.sandbox)
            if holder not in pods or BECAME_LEADER not in operator_pod_logs(self.sandbox, holder):
                return None
            (standby,) = [p for name, p in pods.items() if name != holder]
            return pods[holder], standby
        return wait_for(settled, timeout=START_TIMEOUT_SECONDS, what="two ready operator pods, one leading")

    def freeze(self, pod: str) -> None:
        self.frozen.add(pod)
        self.sandbox.faults.freeze_container(OPERATOR_NAMESPACE, pod, OPERATOR_CONTAINER)

    def kill(self, pod: str) -> None:
        """SIGKILL (ends a frozen process too); the kubelet restarts the container in place."""
        self.sandbox.faults.crash_container(OPERATOR_NAMESPACE, pod, OPERATOR_CONTAINER)
        self.frozen.discard(pod)

    def restore_single_leader(self) -> None:
        for pod in list(self.frozen):
            self.kill(pod)  # a frozen pod must not be the one replica left
        _scale(self.sandbox, 1)

        def one_leading() -> Any:
            pod = running_operator_pod(self.sandbox)
            leading = _holder(self.sandbox) == pod.metadata.name
            return pod if leading and pod_metric(pod, "etcd_operator_is_leader", {}) == 1 else None
        wait_for(one_leading, timeout=START_TIMEOUT_SECONDS + HUNG_LEADER_FAILOVER_SECONDS,
                 what="one ready operator pod, holding the lease")


@pytest.fixture
def replicas(operator: Sandbox) -> Iterator[Replicas]:
    """Two operator replicas for the test; one again afterwards, leading (other tests use
    `running_operator_pod`), even when the test fails."""
    handle = Replicas(operator)
    _scale(operator, 2)
    try:
        yield handle
    finally:
        handle.restore_single_leader()


def _assert_leads(sandbox: Sandbox, pod: Any) -> None:
    name = pod.metadata.name
    assert _holder(sandbox) == name
    assert pod_metric(pod, "etcd_operator_is_leader", {}) == 1, f"{name} holds the lease but says it does not lead"
    assert BECAME_LEADER in operator_pod_logs(sandbox, name)


def _assert_stands_by(sandbox: Sandbox, pod: Any, namespace: str) -> None:
    """`pod` campaigns but has not acted: no controller, no reconcile pass, no membership change,
    not a log line about the test's cluster."""
    name = pod.metadata.name
    log = operator_pod_logs(sandbox, name)
    assert "campaigning for lease" in log, f"{name} is not campaigning:\n{log[-2000:]}"
    for line in (BECAME_LEADER, CONTROLLER_STARTED, f"{namespace}/{CLUSTER}"):
        assert line not in log, f"standby {name} logged {line!r}:\n{log[-2000:]}"
    assert pod_metric(pod, "etcd_operator_is_leader", {}) == 0
    assert pod_metric(pod, "etcd_operator_clusters_managed", {}) == 0
    assert _reconciles(pod) == 0, f"standby {name} ran reconcile passes"
    assert _membership_changes(pod, namespace) == 0, f"standby {name} changed membership"


@dataclass(frozen=True)
class Takeover:
    seconds: float  # from the start of the wait until the lease was seen with its new holder
    last_held: Any  # the last lease record the old holder wrote, as seen during the wait
    lease: Any  # the first record of the new holder

    @property
    def holder(self) -> str:
        return str(self.lease.spec.holder_identity)


def _wait_takeover(sandbox: Sandbox, old: str, timeout: float) -> Takeover:
    """Wait until another pod than `old` holds the lease (a released lease has no holder)."""
    started = time.monotonic()
    last_held: list[Any] = []

    def taken() -> Any:
        lease = _lease(sandbox)
        if lease.spec.holder_identity == old:
            last_held[:] = [lease]
        return lease if lease.spec.holder_identity not in (None, "", old) else None
    lease = wait_for(taken, timeout=timeout, what=f"lease {OPERATOR_NAMESPACE}/{LEASE_NAME} taken from {old}",
                     interval=0.1)
    return Takeover(time.monotonic() - started, last_held[0] if last_held else None, lease)


def test_one_replica_leads_and_the_standby_takes_over(replicas: Replicas, clusters: Clusters) -> None:
    sandbox = clusters.sandbox
    ns = clusters.namespace

    # Two replicas: exactly one leads, the other only campaigns.
    leader, standby = replicas.leader_and_standby()
    leader_name, standby_name = leader.metadata.name, standby.metadata.name
    _assert_leads(sandbox, leader)
    _assert_stands_by(sandbox, standby, ns)

    # A cluster comes up: every membership change is the leader's.
    clusters.create(etcd_cluster(CLUSTER, size=CLUSTER_SIZE))
    clusters.wait_running(CLUSTER, ready=CLUSTER_SIZE, timeout=240)
    assert _membership_changes(leader, ns, "seed") == 1
    assert _membership_changes(leader, ns, "add") >= CLUSTER_SIZE - 1
    assert _membership_changes(leader, ns, "promote") >= CLUSTER_SIZE - 1
    assert CONTROLLER_STARTED in operator_pod_logs(sandbox, leader_name)
    _assert_stands_by(sandbox, standby, ns)

    # The leader hangs (SIGSTOP: it can neither renew nor release): the standby waits out the
    # lease, no less, then takes over.
    replicas.freeze(leader_name)
    takeover = _wait_takeover(sandbox, leader_name, timeout=HUNG_LEADER_FAILOVER_SECONDS)
    assert takeover.holder == standby_name
    assert takeover.last_held is not None, "never saw the frozen leader's lease"
    unrenewed = (takeover.lease.spec.acquire_time - takeover.last_held.spec.renew_time).total_seconds()
    print(f"\nhung leader {leader_name}: {takeover.holder} took over after {takeover.seconds:.1f}s, "
          f"{unrenewed:.1f}s after the last renewal (bound {HUNG_LEADER_FAILOVER_SECONDS:.0f}s)")
    assert unrenewed >= LEASE_DURATION_SECONDS - CLOCK_SLACK_SECONDS, (
        f"{standby_name} took the lease {unrenewed:.1f}s after its last renewal, before it expired")
    assert takeover.lease.spec.lease_transitions == takeover.last_held.spec.lease_transitions + 1

    # The hung leader dies; it restarts in the same pod, as a standby.
    restarts = operator_container_status(leader).restart_count
    replicas.kill(leader_name)

    def restarted() -> Any:
        pod = next(p for p in _live_operator_pods(sandbox) if p.metadata.name == leader_name)
        return pod if operator_container_status(pod).restart_count > restarts and pod_ready(pod) else None
    old_leader = wait_for(restarted, timeout=START_TIMEOUT_SECONDS, what=f"{leader_name} restarted and ready")
    new_leader = next(p for p in _live_operator_pods(sandbox) if p.metadata.name == standby_name)
    wait_for(lambda: "campaigning for lease" in operator_pod_logs(sandbox, leader_name), timeout=60,
             what=f"restarted {leader_name} campaigning")
    _assert_leads(sandbox, new_leader)
    _assert_stands_by(sandbox, old_leader, ns)

    # The new leader acts: a deleted member is replaced by a new one.
    wait_for(lambda: pod_metric(new_leader, "etcd_operator_clusters_managed", {}), timeout=60,
             what=f"{standby_name} supervising clusters")
    before = member_ids(clusters, CLUSTER)
    victim = sorted(before)[0]
    clusters.core.delete_namespaced_pod(victim, ns)

    def replaced() -> dict[str, int] | None:
        members = member_ids(clusters, CLUSTER)
        return members if len(members) == CLUSTER_SIZE and victim not in members else None
    after = wait_for(replaced, timeout=180, what=f"{victim} replaced by a new member")
    clusters.wait_running(CLUSTER, ready=CLUSTER_SIZE, timeout=120)
    assert set(after) - set(before), f"no new member: {after}"
    assert _membership_changes(new_leader, ns) > 0, f"{standby_name} made no membership change"
    _assert_stands_by(sandbox, old_leader, ns)

    # The new leader is deleted (SIGTERM): it stops its controller, then releases the lease, so
    # a standby takes over at its next poll instead of after a lease duration: the restarted old
    # leader, or the pod the Deployment starts in place of the deleted one (it campaigns at once).
    sandbox.kubectl("-n", OPERATOR_NAMESPACE, "delete", "pod", standby_name, "--wait=false")
    takeover = _wait_takeover(sandbox, standby_name, timeout=LEASE_DURATION_SECONDS)
    print(f"deleted leader {standby_name}: {takeover.holder} took over after {takeover.seconds:.1f}s "
          f"(bound {RELEASED_LEASE_FAILOVER_SECONDS:.0f}s)")
    assert takeover.seconds <= RELEASED_LEASE_FAILOVER_SECONDS, (
        f"{takeover.holder} took {takeover.seconds:.1f}s to take a lease released on SIGTERM "
        f"(a standby polls every {STANDBY_POLL_SECONDS:.0f}s at most)")
    pods = replicas.ready_pods(2)
    assert takeover.holder in pods, f"{takeover.holder} leads but is not a ready operator pod: {sorted(pods)}"
    successor = pods[takeover.holder]
    wait_for(lambda: pod_metric(successor, "etcd_operator_clusters_managed", {}), timeout=60,
             what=f"{takeover.holder} supervising clusters")
    _assert_leads(sandbox, successor)
    (other,) = [p for name, p in pods.items() if name != takeover.holder]
    _assert_stands_by(sandbox, other, ns)
    clusters.wait_running(CLUSTER, ready=CLUSTER_SIZE, timeout=60)
