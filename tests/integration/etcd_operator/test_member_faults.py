"""Member faults under continuous writes through the client Service: partitions, frozen
processes, memory and disk.

The sandbox cuts pods off from each other by their cgroups (kube_sandbox/kubelet/partitions.py):
the kubelet still reaches every pod, as in a real partition, and so do the tests' own clients.
Each test checks that the cluster converges after healing with the members it had (nothing
replaced for a partition), that member list = pods, and that every acknowledged write is readable.
The operator cut-off tests cut the shared operator's pod, so they run alone.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from kube_sandbox.binaries import newest_etcd_version
from kube_sandbox.control_api import ControlApiError
from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.etcd_operator.convergence import (
    IMAGE,
    assert_no_write_lost,
    drive,
    wait_converged,
    writes_flow,
    writing,
)
from tests.integration.etcd_operator.etcd_data import member_url
from tests.integration.etcd_operator.operator_clusters import DEFAULT_VERSION, Clusters, etcd_cluster
from tests.integration.etcd_operator.operator_deployment import (
    OPERATOR_NAMESPACE,
    operator_env,
    running_operator_pod,
)
from tests.integration.etcd_operator.status_history import conditions

pytestmark = [pytest.mark.failure_injection]

OLD, NEW = newest_etcd_version("3.5"), newest_etcd_version("3.6")
ETCD_CONTAINER = "etcd"
UNHEALTHY_TIMEOUT_SECONDS = 10
UNREADY_SECONDS = 60  # the readiness probe needs 3 failures 5 s apart; the Service then drops the pod


@pytest.fixture
def clusters(operator: Sandbox, namespace: str) -> Iterator[Clusters]:
    yield Clusters(operator, namespace)


@contextmanager
def cut(clusters: Clusters, sources: list[str], targets: list[str], *, one_way: bool = False,
        sources_namespace: str = "") -> Iterator[str]:
    """The member pods `sources` cut from `targets` inside the block, healed after it."""
    namespace = clusters.namespace
    cut_id = clusters.sandbox.faults.partition([(sources_namespace or namespace, p) for p in sources],
                                               [(namespace, p) for p in targets], one_way=one_way)
    try:
        yield cut_id
    finally:
        clusters.sandbox.faults.heal(cut_id)


@contextmanager
def frozen(clusters: Clusters, name: str, pod: str) -> Iterator[None]:
    """`pod`'s etcd stopped (SIGSTOP) inside the block, thawed after it unless its pod is gone."""
    faults = clusters.sandbox.faults
    faults.freeze_container(clusters.namespace, pod, ETCD_CONTAINER)
    try:
        yield
    finally:
        try:
            faults.thaw_container(clusters.namespace, pod, ETCD_CONTAINER)
        except ControlApiError:
            if any(p.metadata.name == pod for p in clusters.pods(name)):
                raise


def voter_count(clusters: Clusters, name: str, skip: str) -> int:
    """Members as the cluster's other members list them (a frozen or cut-off `skip` would hang the call)."""
    urls = [member_url(clusters, name, p.metadata.name) for p in clusters.live_pods(name) if p.metadata.name != skip]
    result = clusters.sandbox.etcdctl(urls, "member", "list", "-w", "json")
    assert result.returncode == 0, result.stderr
    return len(json.loads(result.stdout).get("members") or [])


def started_cluster(clusters: Clusters, name: str, version: str = DEFAULT_VERSION, **spec: Any) -> dict[str, Any]:
    clusters.create(etcd_cluster(name, size=3, version=version, **spec))
    status = clusters.wait_running(name, ready=3, timeout=240)
    assert status.get("leader"), status
    return status


def pod_uids(clusters: Clusters, name: str) -> dict[str, str]:
    return {p.metadata.name: p.metadata.uid for p in clusters.live_pods(name)}


def unready(clusters: Clusters, name: str, member: str, what: str) -> None:
    clusters.wait_status(name, lambda s: member in (s.get("members") or {}).get("unready", []), what,
                         timeout=UNREADY_SECONDS)


def test_the_leader_cut_off_from_its_followers_then_healed(clusters: Clusters) -> None:
    """The followers elect a new leader and go on taking writes; once healed the old leader rejoins
    as a follower: the same three members, nothing replaced, nothing lost."""
    name = "cutleader"
    status = started_cluster(clusters, name)
    leader, followers = status["leader"], sorted(m for m in status["members"]["ready"] if m != status["leader"])
    before = pod_uids(clusters, name)
    with writing(clusters, name) as writer:
        with cut(clusters, [leader], followers):
            clusters.wait_status(name, lambda s: s.get("leader") in followers, "a new leader among the followers",
                                 timeout=UNREADY_SECONDS)
            unready(clusters, name, leader, f"the cut-off {leader} reported unready")
            writes_flow(writer, f"with {leader} cut off")
        wait_converged(clusters, name, 3, DEFAULT_VERSION, "3 members after healing")
        writes_flow(writer, "after healing")
    assert pod_uids(clusters, name) == before, "a member was replaced for a partition"
    assert_no_write_lost(clusters, name, writer)


def test_a_follower_cut_off_one_way_then_healed(clusters: Clusters) -> None:
    """What one follower sends to the others is dropped (one way): the others go on with a quorum;
    it is reported unready, not replaced, and catches up once healed."""
    name = "oneway"
    status = started_cluster(clusters, name)
    follower = sorted(m for m in status["members"]["ready"] if m != status["leader"])[0]
    others = sorted(m for m in status["members"]["ready"] if m != follower)
    before = pod_uids(clusters, name)
    with writing(clusters, name) as writer:
        with cut(clusters, [follower], others, one_way=True):
            unready(clusters, name, follower, f"{follower} reported unready")
            writes_flow(writer, f"with {follower} cut off one way")
            assert conditions(clusters.status(name)).get("Available", ("",))[0] == "True"
        wait_converged(clusters, name, 3, DEFAULT_VERSION, "3 members after healing")
    assert pod_uids(clusters, name) == before, "a member was replaced for a partition"
    assert_no_write_lost(clusters, name, writer)


def test_a_partition_during_a_scale_up_holds_it_until_healed(clusters: Clusters) -> None:
    """A follower cut off from the others as 3 -> 5 starts: no member is added while one is cut off
    (changes wait for a healthy cluster); once healed the resize finishes with that member kept."""
    name = "cutscale"
    status = started_cluster(clusters, name)
    follower = sorted(m for m in status["members"]["ready"] if m != status["leader"])[0]
    others = sorted(m for m in status["members"]["ready"] if m != follower)
    with writing(clusters, name) as writer:
        with cut(clusters, [follower], others):
            clusters.patch_spec(name, {"size": 5})
            unready(clusters, name, follower, f"{follower} reported unready")
            writes_flow(writer, f"with {follower} cut off")
            # Asked of the members that are not cut off (the cut one is still in the client Service).
            assert voter_count(clusters, name, skip=follower) <= 4, "the cluster grew by more than one member"
        wait_converged(clusters, name, 5, DEFAULT_VERSION, "size 5 after healing")
        assert follower in {m["name"] for m in clusters.member_list(name)}, "the cut-off follower was replaced"
        writes_flow(writer, "after the resize")
    assert_no_write_lost(clusters, name, writer)


def test_a_partition_during_an_upgrade_holds_it_until_healed(clusters: Clusters) -> None:
    """3.5 -> 3.6 in place: once the first member runs 3.6, a member still on 3.5 is cut off from the
    others; the upgrade waits for it and finishes after healing, nothing lost."""
    name = "cutupgrade"
    started_cluster(clusters, name, version=OLD)
    with writing(clusters, name) as writer:
        clusters.patch_spec(name, {"version": NEW})

        def an_old_member_once_one_is_new() -> str | None:
            pods = clusters.live_pods(name)
            old = sorted(p.metadata.name for p in pods if p.spec.containers[0].image == IMAGE.format(OLD))
            return old[0] if old and len(old) < len(pods) else None

        member = wait_for(an_old_member_once_one_is_new, timeout=180, what="the first member upgraded")
        assert isinstance(member, str)
        others = sorted(p.metadata.name for p in clusters.live_pods(name) if p.metadata.name != member)
        with cut(clusters, [member], others):
            unready(clusters, name, member, f"the cut-off {member} reported unready")
            writes_flow(writer, f"with {member} cut off during the upgrade")
        wait_converged(clusters, name, 3, NEW, f"{NEW} after healing")
    assert_no_write_lost(clusters, name, writer)


def test_a_member_oomkilled_at_every_start(clusters: Clusters) -> None:
    """A member whose etcd is OOMKilled at each start: reported with the kubelet's reason and what
    to change, the others serve every write; once it has memory again it rejoins, nothing lost."""
    name = "oom"
    status = started_cluster(clusters, name)
    follower = sorted(m for m in status["members"]["ready"] if m != status["leader"])[0]
    faults = clusters.sandbox.faults
    with writing(clusters, name) as writer:
        faults.cap_memory(clusters.namespace, follower, ETCD_CONTAINER, 8 << 20)
        try:
            faults.crash_container(clusters.namespace, follower, ETCD_CONTAINER)  # its next start is capped
            reported = clusters.wait_status(
                name, lambda s: "OOMKilled" in (s.get("message") or "") and follower in (s.get("message") or ""),
                f"{follower} reported OOMKilled", timeout=120)
            assert "spec.pod.resources.limits.memory" in reported["message"], reported["message"]
            assert conditions(reported).get("MemberStartBlocked", ("",))[0] == "True", reported
            writes_flow(writer, f"while {follower} is OOMKilled")
        finally:
            faults.cap_memory(clusters.namespace, follower, ETCD_CONTAINER, None)
        wait_converged(clusters, name, 3, DEFAULT_VERSION, "3 members once it has memory again")
    assert_no_write_lost(clusters, name, writer)


def test_a_slow_disk_member_during_a_scale_up(clusters: Clusters) -> None:
    """A follower whose disk takes 20 writes a second while 3 -> 5: the resize completes
    (health-gated, it only lags), nothing lost."""
    name = "slowdisk"
    status = started_cluster(clusters, name)
    follower = sorted(m for m in status["members"]["ready"] if m != status["leader"])[0]
    faults = clusters.sandbox.faults
    with writing(clusters, name) as writer:
        faults.slow_disk(clusters.namespace, follower, write_iops=20)
        try:
            drive(clusters, name, writer, {"size": 5}, 5, DEFAULT_VERSION)
        finally:
            if any(p.metadata.name == follower for p in clusters.live_pods(name)):
                faults.slow_disk(clusters.namespace, follower)
    assert_no_write_lost(clusters, name, writer)


def test_frozen_follower_during_a_scale_up_holds_it_until_thawed(clusters: Clusters) -> None:
    """A SIGSTOPped follower (its port open, nothing answered): reported unready, no member added
    while it is frozen (every change waits for a healthy cluster), and once thawed the resize
    finishes with the same member."""
    name = "frozen"
    clusters.create(etcd_cluster(name, size=3))
    status = clusters.wait_running(name, ready=3, timeout=240)
    follower = sorted(m for m in status["members"]["ready"] if m != status["leader"])[0]
    with writing(clusters, name) as writer:
        with frozen(clusters, name, follower):
            clusters.patch_spec(name, {"size": 5})
            clusters.wait_status(name, lambda s: follower in (s.get("members") or {}).get("unready", []),
                                 f"{follower} reported unready", timeout=90)
            writes_flow(writer, f"while {follower} is frozen")
            assert voter_count(clusters, name, skip=follower) == 3, "a member was added while one was frozen"
        wait_converged(clusters, name, 5, DEFAULT_VERSION, "size 5 after the thaw")
        assert follower in {m["name"] for m in clusters.member_list(name)}, "the thawed follower was replaced"
        drive(clusters, name, writer, {"size": 3}, 3, DEFAULT_VERSION)
    assert_no_write_lost(clusters, name, writer)


def test_frozen_leader_during_a_scale_down_is_the_member_removed(clusters: Clusters) -> None:
    """The leader SIGSTOPped as 5 -> 3 starts: the others elect a new leader, the operator removes
    the frozen member first (unhealthy before healthy), its pod goes, and the cluster converges."""
    name = "frozenlead"
    clusters.create(etcd_cluster(name, size=3))
    clusters.wait_running(name, ready=3, timeout=240)
    with writing(clusters, name) as writer:
        drive(clusters, name, writer, {"size": 5}, 5, DEFAULT_VERSION)
        leader = clusters.wait_running(name, ready=5, timeout=60)["leader"]
        assert leader, "no leader reported"
        with frozen(clusters, name, leader):
            clusters.patch_spec(name, {"size": 3})
            wait_converged(clusters, name, 3, DEFAULT_VERSION, "size 3 with the leader frozen")
        assert leader not in {m["name"] for m in clusters.member_list(name)}, "the frozen leader was kept"
        writes_flow(writer, "after the scale-down")
    assert_no_write_lost(clusters, name, writer)


@pytest.mark.alone
def test_the_operator_cut_off_from_members_their_peers_see_healthy(clusters: Clusters) -> None:
    """The operator cut off from one member, then from a majority, while the members reach each
    other: nothing replaced (even past a 10-s unhealthy-member timeout), the cluster reported
    available, never QuorumLost; converged and complete after healing."""
    name = "cutoperator"
    sandbox = clusters.sandbox
    with operator_env(sandbox, UNHEALTHY_MEMBER_TIMEOUT_SECONDS=str(UNHEALTHY_TIMEOUT_SECONDS)):
        status = started_cluster(clusters, name)
        operator_pod = running_operator_pod(sandbox).metadata.name
        leader = status["leader"]
        followers = sorted(m for m in status["members"]["ready"] if m != leader)
        before = pod_uids(clusters, name)
        with writing(clusters, name) as writer:
            with cut(clusters, [operator_pod], [followers[0]], sources_namespace=OPERATOR_NAMESPACE):
                unready(clusters, name, followers[0], f"{followers[0]} unreachable from the operator")
                # Its peers' metrics show it connected: the operator's blindness, not the member's fault.
                degraded = clusters.wait_status(
                    name, lambda s: conditions(s).get("Degraded", ("", ""))[1] == "MembersUnreachableFromOperator",
                    "degraded: a member unreachable from the operator only", timeout=UNREADY_SECONDS)
                assert f"seen connected by peers: {followers[0]}" in str(degraded.get("conditions")), degraded
                # Past twice the unhealthy-member timeout: the pod is Ready (the kubelet reaches it), so
                # nothing is replaced for the operator's own blindness.
                clusters.wait_status(name, lambda s: _degraded_seconds(s) > 2 * UNHEALTHY_TIMEOUT_SECONDS,
                                     f"degraded for twice the {UNHEALTHY_TIMEOUT_SECONDS}-s timeout", timeout=60)
                with cut(clusters, [operator_pod], [followers[1]], sources_namespace=OPERATOR_NAMESPACE):
                    reported = clusters.wait_status(
                        name, lambda s: conditions(s).get("Available", ("", ""))[1] == "MembersUnreachableFromOperator",
                        "available, members unreachable from the operator", timeout=UNREADY_SECONDS)
                    assert reported.get("phase") == "Running", reported
                    writes_flow(writer, "with the operator cut off from a majority")
                assert pod_uids(clusters, name) == before, "a member was replaced for the operator's partition"
            wait_converged(clusters, name, 3, DEFAULT_VERSION, "3 members after healing")
        assert pod_uids(clusters, name) == before, "a member was replaced for the operator's partition"
        assert not [e for e in clusters.events(name) if e.reason == "QuorumLost"], "QuorumLost raised for a partition"
        assert_no_write_lost(clusters, name, writer)


def _degraded_seconds(status: dict[str, Any]) -> float:
    """How long the status has said Degraded (0 when it does not)."""
    for condition in status.get("conditions") or []:
        if condition["type"] == "Degraded" and condition.get("status") == "True":
            since = datetime.fromisoformat(condition["lastTransitionTime"].replace("Z", "+00:00"))
            return (datetime.now(UTC) - since).total_seconds()
    return 0.0
