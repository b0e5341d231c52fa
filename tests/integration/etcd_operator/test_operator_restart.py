"""The operator may die at any instant, even between `member add` and creating the new member's
pod: the next operator finishes the job and never leaves a ghost (a member that never starts).

The window is made deterministic: either the operator is stopped and the test performs exactly
the `member add` AddMember does, or a ResourceQuota makes the operator's pod creation fail right
after its own `member add` and the operator is SIGKILLed in that state."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.etcd_operator.etcd_data import describe_members, member_ids, peer_url, started
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.etcd_operator.operator_deployment import (
    OPERATOR_CONTAINER,
    OPERATOR_NAMESPACE,
    forbidden_lines,
    operator_container_status,
    operator_logs,
    operator_stopped,
    running_operator_pod,
    wait_operator_leading,
)

# It stops, restarts or reconfigures the operator every other test relies on.
pytestmark = pytest.mark.alone

GHOST_SUFFIX = "ghost1"
QUOTA_NAME = "no-pods"


@pytest.fixture
def clusters(operator: Sandbox, namespace: str) -> Iterator[Clusters]:
    """As conftest's, but these tests restart the operator, whose log then starts over: compare
    the Forbidden lines themselves, not their count. The quota's 403s are expected."""
    before = set(forbidden_lines(operator_logs(operator)))
    yield Clusters(operator, namespace)
    new = [line for line in forbidden_lines(operator_logs(operator), allowed=("quota",)) if line not in before]
    assert not new, "operator made forbidden requests:\n" + "\n".join(new[-5:])


def _add_unstarted_learner(clusters: Clusters, cluster: str, member: str) -> dict[str, Any]:
    """What AddMember does before it creates the pod (retried while etcd calls itself unhealthy;
    a retry first checks whether an earlier attempt went through)."""
    url = peer_url(clusters, cluster, member)

    def added() -> dict[str, Any] | None:
        for m in clusters.member_list(cluster):
            if url in (m.get("peerURLs") or []):
                return m
        clusters.etcdctl(cluster, "member", "add", member, "--learner", f"--peer-urls={url}")
        return None
    return wait_for(added, timeout=60, what=f"member add {member} ({url})")


def _converged(clusters: Clusters, cluster: str, size: int) -> list[dict[str, Any]] | None:
    """The member list once it has `size` started voting members and nothing else."""
    members = clusters.member_list(cluster)
    if len(members) == size and all(started(m) and not m.get("isLearner") for m in members):
        return members
    return None


def _wait_converged(clusters: Clusters, cluster: str, size: int, timeout: float) -> list[dict[str, Any]]:
    last: list[str] = []

    def converged() -> list[dict[str, Any]] | None:
        members = clusters.member_list(cluster)
        last[:] = [describe_members(members)]
        return _converged(clusters, cluster, size)
    try:
        return wait_for(converged, timeout=timeout, what=f"{size} started voting members")
    except AssertionError as e:
        raise AssertionError(f"{e}\nmembers: {last}\nstatus: {clusters.status(cluster)}") from None


def test_member_added_while_the_operator_was_down_gets_its_pod(clusters: Clusters) -> None:
    name = "resume"
    ghost = f"{name}-{GHOST_SUFFIX}"
    clusters.create(etcd_cluster(name, size=3))
    clusters.wait_running(name, ready=3, timeout=180)
    before = member_ids(clusters, name)

    with operator_stopped(clusters.sandbox):
        added = _add_unstarted_learner(clusters, name, ghost)
        assert not started(added), f"{ghost} cannot have started without a pod: {added}"
        clusters.patch_spec(name, {"size": 4})

    members = _wait_converged(clusters, name, 4, timeout=180)
    by_name = {m["name"]: int(m["ID"]) for m in members}
    assert by_name.get(ghost) == int(added["ID"]), f"the interrupted add was not finished: {describe_members(members)}"
    assert all(by_name.get(m) == i for m, i in before.items()), describe_members(members)
    pod = clusters.core.read_namespaced_pod(ghost, clusters.namespace)
    assert pod.metadata.deletion_timestamp is None
    clusters.wait_running(name, ready=4, timeout=60)
    assert sorted(p.metadata.name for p in clusters.live_pods(name)) == sorted([*before, ghost])


def test_member_added_while_the_operator_was_down_does_not_linger_when_not_needed(clusters: Clusters) -> None:
    name = "linger"
    ghost = f"{name}-{GHOST_SUFFIX}"
    clusters.create(etcd_cluster(name, size=3))
    clusters.wait_running(name, ready=3, timeout=180)
    before = member_ids(clusters, name)

    with operator_stopped(clusters.sandbox):
        added = _add_unstarted_learner(clusters, name, ghost)
        assert not started(added), added

    # spec.size is still 3: the planner starts the added learner (finishing the add), then removes
    # it as not needed, then deletes its pod; what counts is the end state.
    members = _wait_converged(clusters, name, 3, timeout=120)
    assert {m["name"]: int(m["ID"]) for m in members} == before, describe_members(members)
    assert int(added["ID"]) not in {int(m["ID"]) for m in members}
    wait_for(lambda: sorted(p.metadata.name for p in clusters.pods(name)) == sorted(before),
             timeout=90, what=f"only the original member pods left (no pod of {ghost})")
    clusters.wait_running(name, ready=3, timeout=60)


def _block_pod_creation(core: k8s.CoreV1Api, namespace: str) -> None:
    """A quota of zero pods, with its status filled in by hand (the sandbox runs no quota
    controller): the apiserver then refuses every new pod in the namespace (403)."""
    core.create_namespaced_resource_quota(namespace, {"metadata": {"name": QUOTA_NAME}, "spec": {"hard": {"pods": "0"}}})
    core.patch_namespaced_resource_quota_status(
        QUOTA_NAME, namespace, {"status": {"hard": {"pods": "0"}, "used": {"pods": "0"}}})


def test_operator_sigkilled_between_member_add_and_pod_creation(clusters: Clusters) -> None:
    operator = clusters.sandbox
    namespace = clusters.namespace
    name = "killed"
    clusters.create(etcd_cluster(name, size=1))
    clusters.wait_running(name, ready=1, timeout=120)
    before = member_ids(clusters, name)

    _block_pod_creation(clusters.core, namespace)
    clusters.patch_spec(name, {"size": 2})

    def interrupted_add() -> dict[str, Any] | None:
        members = clusters.member_list(name)
        unstarted = [m for m in members if not started(m)]
        return unstarted[0] if len(members) == 2 and unstarted else None
    ghost = wait_for(interrupted_add, timeout=120, what="the operator's member add, with no pod to follow")
    wait_for(lambda: "exceeded quota" in operator_logs(operator), timeout=60,
             what="the operator failing to create the new member's pod")
    assert [p.metadata.name for p in clusters.pods(name)] == list(before)
    pod = running_operator_pod(operator)
    restarts = operator_container_status(pod).restart_count

    # Freeze first, so the dying operator cannot create the pod once the quota is gone; SIGKILL
    # ends a stopped process too.
    operator.faults.freeze_container(OPERATOR_NAMESPACE, pod.metadata.name, OPERATOR_CONTAINER)
    try:
        clusters.core.delete_namespaced_resource_quota(QUOTA_NAME, namespace)
    finally:
        operator.faults.crash_container(OPERATOR_NAMESPACE, pod.metadata.name, OPERATOR_CONTAINER)

    def restarted() -> Any:
        current = running_operator_pod(operator)
        return current if operator_container_status(current).restart_count > restarts else None
    wait_for(restarted, timeout=120, what="operator container restarted after SIGKILL")
    wait_operator_leading(operator)
    killed_log = operator_logs(operator, previous=True)
    assert "exceeded quota" in killed_log, "kubectl logs --previous did not return the killed operator's log"
    assert not forbidden_lines(killed_log, allowed=("quota",)), forbidden_lines(killed_log, allowed=("quota",))[-5:]

    members = _wait_converged(clusters, name, 2, timeout=180)
    assert {int(m["ID"]) for m in members} == {*before.values(), int(ghost["ID"])}, (
        f"the interrupted add was not finished: {describe_members(members)}")
    clusters.wait_running(name, ready=2, timeout=60)
    assert len(clusters.live_pods(name)) == 2
