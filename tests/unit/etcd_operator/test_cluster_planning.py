"""plan_next_action, table-driven: one observation in, the one expected action out."""
from __future__ import annotations

import copy
import dataclasses
import importlib
import pkgutil
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import ModuleType
from typing import Any

import pytest

import etcd_operator.planning
from etcd_common.etcd.types import EndpointStatus
from etcd_operator import actions
from etcd_operator.observed import STOP_MARGIN_SECONDS, MemberHealth, ObservedCluster, ObservedPVC, version_from_image
from etcd_operator.planning import plan_next_action
from etcd_operator.planning.findings import MEMBERS_LOST_REASON
from tests.unit.etcd_operator.etcd_cluster_builders import (
    CLUSTER,
    NEW_MEMBER,
    PVC_SPEC,
    T0,
    add_member,
    add_pod,
    healthy_cluster,
    leaderless,
    make_member,
    make_pod,
    member_id,
    member_list_unavailable,
    name,
    nothing_yet,
    plan_through_drain,
    replace_pod,
    unhealthy,
    with_spec,
    without_members,
    without_pods,
    without_volumes,
)

NEW_PEER_URL = f"http://{NEW_MEMBER}.{CLUSTER}.default.svc:2380"


@dataclass(frozen=True)
class Expect:
    action_type: type
    fields: dict[str, Any] = field(default_factory=dict)
    says: str = ""  # a phrase describe() must contain


def expect(action_type: type, says: str = "", **fields: Any) -> Expect:
    return Expect(action_type, fields, says)


# --- observations used by several cases


def _learner_joining(*, raft_index: int | None, size: int = 4, started: bool = True,
                     **pod_fields: Any) -> ObservedCluster:
    """3 voters plus NEW_MEMBER added as a learner whose pod exists (running, unless `pod_fields`
    say otherwise)."""
    observed = healthy_cluster(3, size=size)
    learner = make_member(observed.cluster, NEW_MEMBER, 0x9999, learner=True, started=started)
    observed = add_member(observed, learner, healthy=False, raft_index=raft_index)
    return add_pod(observed, make_pod(observed.cluster, NEW_MEMBER, index=9, ready=False, **pod_fields))


def _surge_upgrade_learner() -> ObservedCluster:
    """emptyDir upgrade 3.4 -> 3.5 in progress: 3 outdated voters and a caught-up 3.5 learner."""
    observed = with_spec(healthy_cluster(3, version="3.5.35"), version="3.6.16")
    learner = make_member(observed.cluster, NEW_MEMBER, 0x9999, learner=True)
    observed = add_member(observed, learner, healthy=False, raft_index=100)
    return add_pod(observed, make_pod(observed.cluster, NEW_MEMBER, index=9, version="3.6.16"))


def _surge_upgrade_promoted() -> ObservedCluster:
    observed = _surge_upgrade_learner()
    members = tuple(dataclasses.replace(m, is_learner=False) for m in observed.members or ())
    health = {**observed.health, NEW_MEMBER: MemberHealth(True)}
    return dataclasses.replace(observed, members=members, health=health)


def _ghost_member() -> ObservedCluster:
    """`member add` succeeded, then the operator died before creating the pod."""
    observed = healthy_cluster(3, size=4)
    ghost = make_member(observed.cluster, NEW_MEMBER, 0x9999, learner=True, started=False)
    return add_member(observed, ghost, healthy=False, raft_index=None)


def _foreign_unstarted_member() -> ObservedCluster:
    observed = healthy_cluster(3)
    foreign = dataclasses.replace(
        make_member(observed.cluster, NEW_MEMBER, 0x9999, started=False), peer_urls=("http://10.0.0.9:2380",)
    )
    return add_member(observed, foreign, healthy=False, raft_index=None)


def _orphan_pod(age: timedelta) -> ObservedCluster:
    observed = healthy_cluster(3)
    assert observed.observed_at is not None
    pod = make_pod(observed.cluster, name(7), index=7, created_at=observed.observed_at - age)
    return add_pod(observed, pod)


def _quorum_lost_with_orphan() -> ObservedCluster:
    observed = unhealthy(healthy_cluster(3), name(2), name(3))
    return add_pod(observed, make_pod(observed.cluster, name(7), index=7, created_at=T0))


def _leader_unknown(observed: ObservedCluster) -> ObservedCluster:
    return dataclasses.replace(observed, endpoint_status={})


def _pvc_all_pods_gone() -> ObservedCluster:
    observed = healthy_cluster(3, pvc=True)
    return member_list_unavailable(without_pods(observed, name(1), name(2), name(3)))


NO_NODE = "0/3 nodes are available: 3 node(s) had untolerated taint {dedicated: etcd}."


def _seed_pod(**fields: Any) -> ObservedCluster:
    observed = nothing_yet()
    pod = make_pod(observed.cluster, NEW_MEMBER, ready=False, state="new", **fields)
    return add_pod(observed, pod)


def _interrupted_seed_with_volume() -> ObservedCluster:
    observed = nothing_yet(spec={"pod": {"persistentVolumeClaimSpec": PVC_SPEC}})
    return dataclasses.replace(observed, pvcs=(ObservedPVC(name(4), name(4)),))


def _pods_run(observed: ObservedCluster, image: str) -> ObservedCluster:
    """Every pod runs `image` (no version annotation, as on pods of the CoreOS operator)."""
    pods = tuple(dataclasses.replace(pod, image=image, etcd_version=version_from_image(image)) for pod in observed.pods)
    return dataclasses.replace(observed, pods=pods)


def _tls_spec() -> dict[str, Any]:
    return {"TLS": {"static": {"member": {"peerSecret": "peer"}}}}


CASES = [
    # 1. paused wins over everything, even an invalid spec
    pytest.param(with_spec(healthy_cluster(), paused=True, size=5), expect(actions.Pause), id="paused"),
    pytest.param(with_spec(healthy_cluster(), paused=True, version="3.3.0"), expect(actions.Pause),
                 id="paused-beats-invalid-spec"),
    # 2. spec problems the schema cannot catch
    pytest.param(with_spec(healthy_cluster(), version="3.3.25"), expect(actions.RejectSpec, "not supported"),
                 id="unsupported-version"),
    pytest.param(with_spec(healthy_cluster(), pod={"labels": {"app": "mine"}}), expect(actions.RejectSpec, "app"),
                 id="reserved-label"),
    pytest.param(with_spec(healthy_cluster(), version="3.5.35"), expect(actions.RejectSpec, "downgrade"),
                 id="minor-downgrade"),
    pytest.param(_pods_run(healthy_cluster(3), "quay.io/coreos/etcd:v3.4.23"),
                 expect(actions.RejectSpec, "skips a minor version"), id="skipped-minor"),
    pytest.param(with_spec(healthy_cluster(), **_tls_spec()), expect(actions.RejectSpec, "peerSecret"),
                 id="tls-switched-on-running-cluster"),
    # 3. services
    pytest.param(dataclasses.replace(healthy_cluster(), services=frozenset({CLUSTER})),
                 expect(actions.CreateServices, names=(f"{CLUSTER}-client",)), id="client-service-missing"),
    pytest.param(dataclasses.replace(nothing_yet(), services=frozenset()),
                 expect(actions.CreateServices, names=(CLUSTER, f"{CLUSTER}-client")), id="services-before-seed"),
    # 4-5. no member list: bootstrap (4: a seed whose image the spec has since fixed)
    pytest.param(nothing_yet(), expect(actions.CreateSeedMember, member_name=NEW_MEMBER, peer_url=NEW_PEER_URL),
                 id="seed"),
    pytest.param(_seed_pod(phase="Pending"), expect(actions.Wait, "etcd not reachable yet"),
                 id="seed-starting-no-second-seed"),
    pytest.param(_seed_pod(waiting_reason="CrashLoopBackOff", restart_count=3), expect(actions.Wait, "CrashLoopBackOff"),
                 id="seed-crashlooping-waits"),
    pytest.param(_seed_pod(waiting_reason="ErrImagePull", image="quay.io/coreos/etcd:v3.6.99"),
                 expect(actions.DeletePod, "cannot be pulled", pod_name=NEW_MEMBER), id="seed-image-fixed-in-spec"),
    pytest.param(_seed_pod(waiting_reason="ErrImagePull"), expect(actions.Wait, "ErrImagePull"),
                 id="seed-image-unpullable-waits-for-spec-fix"),
    pytest.param(_seed_pod(phase="Pending", unschedulable_message=NO_NODE, pod_policy_hash="before-a-toleration"),
                 expect(actions.DeletePod, "no node fits it", pod_name=NEW_MEMBER), id="seed-unschedulable-spec-fixed"),
    pytest.param(_seed_pod(phase="Pending", unschedulable_message=NO_NODE), expect(actions.Wait),
                 id="seed-unschedulable-waits-for-spec-fix"),
    pytest.param(_seed_pod(phase="Pending", unschedulable_message=NO_NODE, restart_count=1,
                           pod_policy_hash="before-a-toleration"), expect(actions.Wait),
                 id="seed-that-ran-is-not-deleted-for-a-policy-change"),
    pytest.param(_seed_pod(phase="Failed"), expect(actions.DeletePod, "Failed", pod_name=NEW_MEMBER),
                 id="failed-seed-replaced"),
    pytest.param(_seed_pod(deleting=True), expect(actions.Wait, "terminating"), id="seed-terminating"),
    pytest.param(_interrupted_seed_with_volume(), expect(actions.CreateSeedMember, member_name=name(4)),
                 id="seed-reuses-interrupted-volume"),
    # 5. no member list: everything gone, or quorum lost
    pytest.param(member_list_unavailable(without_pods(healthy_cluster(1, size=1), name(1))),
                 expect(actions.ReportMembersLost, MEMBERS_LOST_REASON), id="single-member-emptydir-lost"),
    pytest.param(member_list_unavailable(without_pods(healthy_cluster(3), name(1), name(2), name(3))),
                 expect(actions.ReportMembersLost, MEMBERS_LOST_REASON), id="all-members-emptydir-lost"),
    pytest.param(_pvc_all_pods_gone(), expect(actions.CreateMemberPod, member_name=name(1)),
                 id="pvc-members-restart-on-volumes"),
    pytest.param(member_list_unavailable(healthy_cluster(3)), expect(actions.Wait, "context deadline exceeded"),
                 id="etcd-unreachable-pods-exist"),
    pytest.param(leaderless(healthy_cluster(3), name(1)),
                 expect(actions.ReportQuorumLoss, "know no leader", healthy_voters=0, voters=3),
                 id="quorum-lost-seen-without-member-list"),
    # 6. members without pods (a dead one is replaced by rule 9; 10: the pod of a removed member)
    pytest.param(_ghost_member(), expect(
        actions.CreateMemberPod, "interrupted add", member_name=NEW_MEMBER,
        initial_cluster=(
            (name(1), f"http://{name(1)}.{CLUSTER}.default.svc:2380"),
            (name(2), f"http://{name(2)}.{CLUSTER}.default.svc:2380"),
            (name(3), f"http://{name(3)}.{CLUSTER}.default.svc:2380"),
            (NEW_MEMBER, NEW_PEER_URL),
        )), id="ghost-member-gets-its-pod"),
    pytest.param(_foreign_unstarted_member(), expect(actions.RemoveMember, purpose="replace", member_id=0x9999),
                 id="foreign-unstarted-member-removed"),
    pytest.param(without_pods(healthy_cluster(3), name(2)),
                 expect(actions.RemoveMember, "data", member_name=name(2), purpose="replace"),
                 id="dead-member-emptydir-removed"),
    pytest.param(without_pods(healthy_cluster(3, pvc=True), name(2)),
                 expect(actions.CreateMemberPod, "volume", member_name=name(2)), id="dead-member-pvc-recreated"),
    pytest.param(without_volumes(without_pods(healthy_cluster(3, pvc=True), name(2)), name(2)),
                 expect(actions.RemoveMember, member_name=name(2), purpose="replace"),
                 id="dead-member-volume-gone-removed"),
    pytest.param(unhealthy(without_pods(healthy_cluster(3), name(2), name(3)), name(2), name(3)),
                 expect(actions.ReportQuorumLoss, "restore from backup", healthy_voters=1, voters=3),
                 id="two-of-three-pods-gone-quorum-lost"),
    pytest.param(without_members(healthy_cluster(3, size=2), name(3)),
                 expect(actions.DeletePod, "not a member", pod_name=name(3)), id="pod-of-removed-member-deleted"),
    # 8. no quorum: nothing destructive
    pytest.param(unhealthy(healthy_cluster(3), name(2), name(3)),
                 expect(actions.ReportQuorumLoss, healthy_voters=1, voters=3, unhealthy=(name(2), name(3))),
                 id="quorum-lost"),
    pytest.param(_quorum_lost_with_orphan(), expect(actions.ReportQuorumLoss), id="quorum-lost-deletes-nothing"),
    pytest.param(unhealthy(healthy_cluster(1, size=3), name(1)), expect(actions.ReportQuorumLoss),
                 id="single-member-unhealthy"),
    # 7, 9, 11, 13. failed, crashing and terminating member pods
    pytest.param(unhealthy(replace_pod(healthy_cluster(3), name(2), ready=False, waiting_reason="CrashLoopBackOff",
                                       restart_count=4), name(2)),
                 expect(actions.Wait, "CrashLoopBackOff"), id="crashloop-restarts-in-place"),
    pytest.param(unhealthy(replace_pod(healthy_cluster(3), name(2), phase="Failed", ready=False), name(2)),
                 expect(actions.DeletePod, "Failed", pod_name=name(2)), id="failed-pod-emptydir-deleted"),
    pytest.param(unhealthy(replace_pod(replace_pod(healthy_cluster(3, pvc=True), name(2), phase="Failed"),
                                       name(3), phase="Failed"), name(2), name(3)),
                 expect(actions.DeletePod, pod_name=name(2)), id="failed-pods-on-volumes-recreated-without-quorum"),
    # A deleted emptyDir pod's member is dead at once (its data goes with the pod); on a volume it
    # waits for the pod to go, then restarts on the volume.
    # An emptyDir member whose pod is being deleted shuts down gracefully (its clients move with
    # their requests finished) and is removed once the pod is gone, or once its grace period (the
    # deletionTimestamp) and a margin are over: its node is gone, say.
    pytest.param(replace_pod(healthy_cluster(3), name(2), deleting=True, deletion_deadline=T0 + timedelta(hours=1)),
                 expect(actions.Wait, "terminating"), id="member-pod-terminating-emptydir-shuts-down-first"),
    pytest.param(unhealthy(replace_pod(healthy_cluster(3), name(2), deleting=True,
                                       deletion_deadline=T0 + timedelta(hours=1) - timedelta(seconds=STOP_MARGIN_SECONDS)),
                           name(2)),
                 expect(actions.RemoveMember, "data", member_name=name(2), purpose="replace"),
                 id="member-pod-terminating-emptydir-past-its-grace-replaced"),
    # Past its grace period yet serving (its node cut off from the control plane, the pod marked
    # deleted by taint eviction): no proof it is dead, so it is waited for, never replaced.
    pytest.param(replace_pod(healthy_cluster(3), name(2), deleting=True,
                             deletion_deadline=T0 + timedelta(hours=1) - timedelta(seconds=STOP_MARGIN_SECONDS)),
                 expect(actions.Wait, "still serves"),
                 id="member-pod-terminating-emptydir-past-its-grace-but-healthy-waits"),
    pytest.param(dataclasses.replace(
                     unhealthy(replace_pod(healthy_cluster(3), name(2), deleting=True,
                                           deletion_deadline=T0 + timedelta(hours=1)
                                           - timedelta(seconds=STOP_MARGIN_SECONDS)), name(2)),
                     peer_views={name(1): frozenset({member_id(2), member_id(3)})}),
                 expect(actions.Wait, "still serves"),
                 id="member-pod-terminating-emptydir-past-its-grace-seen-by-its-peers-waits"),
    pytest.param(replace_pod(healthy_cluster(3), name(2), deleting=False, pod_policy_hash=None),
                 expect(actions.NoOp), id="member-pod-without-hash-converged"),
    pytest.param(replace_pod(healthy_cluster(3, pvc=True), name(2), deleting=True), expect(actions.Wait, "terminating"),
                 id="member-pod-terminating-on-volume-waits"),
    pytest.param(unhealthy(replace_pod(replace_pod(healthy_cluster(3), name(2), deleting=True), name(3), deleting=True),
                           name(2), name(3)),
                 expect(actions.ReportQuorumLoss), id="two-member-pods-terminating-no-quorum"),
    # 10. orphans
    pytest.param(_orphan_pod(timedelta(minutes=5)), expect(actions.DeletePod, "not a member", pod_name=name(7)),
                 id="orphan-pod-deleted"),
    pytest.param(_orphan_pod(timedelta(seconds=2)), expect(actions.NoOp), id="young-orphan-pod-spared"),
    pytest.param(dataclasses.replace(healthy_cluster(3, pvc=True), pvcs=(
        *healthy_cluster(3, pvc=True).pvcs, ObservedPVC(name(7), name(7)))),
        expect(actions.DeletePVC, pvc_name=name(7)), id="orphan-pvc-deleted"),
    # 12. learners
    pytest.param(_learner_joining(raft_index=None, started=False, phase="Pending", ip=None),
                 expect(actions.Wait, "starting"), id="learner-pod-starting"),
    pytest.param(_learner_joining(raft_index=None, started=False, deleting=True),
                 expect(actions.Wait, "terminating"), id="learner-pod-terminating"),
    # etcd may list a learner's name before the learner serves clients: without its own status
    # (it serves none yet) it is not promoted; a voter serving no client would count as unhealthy.
    pytest.param(_learner_joining(raft_index=None), expect(actions.Wait, "serves no client"),
                 id="learner-listed-but-not-serving-waits"),
    pytest.param(_learner_joining(raft_index=10), expect(actions.Wait, "catching up"), id="learner-catching-up"),
    pytest.param(_learner_joining(raft_index=95), expect(actions.PromoteMember, member_name=NEW_MEMBER,
                                                         member_id=0x9999), id="learner-promoted"),
    pytest.param(unhealthy(_learner_joining(raft_index=100), name(2)), expect(actions.Wait, "recover"),
                 id="learner-waits-for-healthy-voters"),
    pytest.param(_learner_joining(raft_index=10, size=3),
                 expect(actions.RemoveMember, member_name=NEW_MEMBER, purpose="scale"), id="learner-unneeded-removed"),
    pytest.param(_surge_upgrade_learner(), expect(actions.PromoteMember, member_name=NEW_MEMBER),
                 id="upgrade-learner-kept-and-promoted"),
    # 14. scale up (13: not while a member is unhealthy)
    pytest.param(healthy_cluster(1, size=3), expect(
        actions.AddMember, member_name=NEW_MEMBER, peer_url=NEW_PEER_URL, as_learner=True, purpose="scale",
        initial_cluster=((name(1), f"http://{name(1)}.{CLUSTER}.default.svc:2380"), (NEW_MEMBER, NEW_PEER_URL))),
        id="scale-up-from-seed"),
    pytest.param(healthy_cluster(3, size=5), expect(actions.AddMember, member_name=NEW_MEMBER), id="scale-up"),
    pytest.param(unhealthy(healthy_cluster(3, size=5), name(3)), expect(actions.Wait, name(3)),
                 id="scale-up-waits-for-health"),
    pytest.param(dataclasses.replace(healthy_cluster(3, size=5), name_suffix="mem02"), expect(actions.Wait, "taken"),
                 id="generated-name-collision"),
    # 15. scale down
    # A healthy member leaving is stopped first (StopMember), removed once its pod is gone (rule 9).
    pytest.param(healthy_cluster(5, size=3), expect(actions.StopMember, "5 members", member_name=name(5)),
                 id="scale-down-stops-newest-non-leader-first"),
    pytest.param(without_pods(healthy_cluster(5, size=3), name(5)),
                 expect(actions.RemoveMember, member_name=name(5), purpose="replace"),
                 id="scale-down-removes-the-stopped-member"),
    pytest.param(healthy_cluster(5, size=3, leader=5), expect(actions.StopMember, member_name=name(4)),
                 id="scale-down-stops-a-follower-before-the-leader"),
    pytest.param(healthy_cluster(2, size=1, leader=2), expect(actions.RemoveMember, member_name=name(1)),
                 id="scale-down-spares-leader"),
    pytest.param(unhealthy(healthy_cluster(4, size=3), name(2)), expect(actions.RemoveMember, member_name=name(2)),
                 id="scale-down-unhealthy-first"),
    pytest.param(replace_pod(healthy_cluster(2, size=1, leader=1), name(1), image="quay.io/coreos/etcd:v3.6.0"),
                 expect(actions.MoveLeader, from_member_name=name(1), to_member_name=name(2)),
                 id="scale-down-outdated-leader-moves-leadership-first"),
    pytest.param(_leader_unknown(healthy_cluster(5, size=3)), expect(actions.Wait, "leader not known"),
                 id="scale-down-needs-known-leader"),
    # 16. upgrades (4: a pod whose old image cannot be pulled)
    pytest.param(with_spec(healthy_cluster(3, version="3.5.35", pvc=True), version="3.6.16"),
                 expect(actions.UpgradeMember, "3.5.35", member_name=name(2)), id="upgrade-pvc-oldest-follower"),
    pytest.param(replace_pod(replace_pod(with_spec(healthy_cluster(3, version="3.5.35", pvc=True), version="3.6.16"),
                                         name(2), image="quay.io/coreos/etcd:v3.6.16"),
                             name(3), image="quay.io/coreos/etcd:v3.6.16"),
                 expect(actions.UpgradeMember, "in its pod", member_name=name(1), in_place=True),
                 id="upgrade-leader-last-in-place"),
    # 1 or 2 voters on PVCs: a restart in place would stop writes, so a new member joins first.
    pytest.param(with_spec(healthy_cluster(1, size=1, version="3.5.35", pvc=True), version="3.6.16"),
                 expect(actions.AddMember, "less than a quorum", purpose="upgrade"), id="upgrade-single-member-pvc"),
    pytest.param(with_spec(healthy_cluster(2, size=2, version="3.5.35", pvc=True), version="3.6.16"),
                 expect(actions.AddMember, "1 of 2 voting members", purpose="upgrade"), id="upgrade-two-members-pvc"),
    # emptyDir: the image changes in the running pod; the member keeps its name, address and data.
    pytest.param(with_spec(healthy_cluster(3, version="3.5.35"), version="3.6.16"),
                 expect(actions.UpgradeMember, "in its pod", member_name=name(2), in_place=True,
                        image="quay.io/coreos/etcd:v3.6.16", etcd_version="3.6.16"),
                 id="upgrade-emptydir-in-place"),
    pytest.param(replace_pod(with_spec(healthy_cluster(3, version="3.5.35"), version="3.6.16"), name(2),
                             image="quay.io/coreos/etcd:v3.6.16", restart_count=0, restarted_from_count=0,
                             restarted_at=T0 + timedelta(hours=1) - timedelta(seconds=2)),
                 expect(actions.Wait, "restarts on its new image"), id="upgrade-in-place-waits-for-the-restart"),
    pytest.param(replace_pod(with_spec(healthy_cluster(3, version="3.5.35"), version="3.6.16"), name(2),
                             image="quay.io/coreos/etcd:v3.6.16", restart_count=1, restarted_from_count=0,
                             restarted_at=T0 + timedelta(hours=1) - timedelta(seconds=2)),
                 expect(actions.UpgradeMember, member_name=name(3), in_place=True),
                 id="upgrade-in-place-restarted-goes-on"),
    pytest.param(_surge_upgrade_promoted(), expect(actions.StopMember, member_name=name(3)),
                 id="upgrade-emptydir-then-stops-outdated"),
    pytest.param(unhealthy(with_spec(healthy_cluster(3, version="3.5.35", pvc=True), version="3.6.16"), name(3)),
                 expect(actions.Wait, name(3)), id="upgrade-waits-for-health"),
    pytest.param(with_spec(healthy_cluster(3, version="3.6.16", pvc=True), version="3.6.0"),
                 expect(actions.UpgradeMember), id="patch-downgrade-allowed"),
    pytest.param(with_spec(healthy_cluster(3, pvc=True), pod={"persistentVolumeClaimSpec": PVC_SPEC,
                                                              "resources": {"limits": {"memory": "1Gi"}}}),
                 expect(actions.UpgradeMember, "spec.pod"), id="pod-policy-change-rolls"),
    pytest.param(with_spec(replace_pod(healthy_cluster(3), name(1), pod_policy_hash=None),
                           pod={"resources": {"limits": {"memory": "1Gi"}}}),
                 expect(actions.AddMember, purpose="upgrade"), id="pod-policy-change-rolls-emptydir"),
    pytest.param(replace_pod(healthy_cluster(3), name(1), pod_policy_hash=None), expect(actions.NoOp),
                 id="pod-without-policy-hash-left-alone"),
    pytest.param(replace_pod(with_spec(healthy_cluster(3), version="3.6.17"), name(2),
                             image="quay.io/coreos/etcd:v3.6.16", waiting_reason="ErrImagePull", restart_count=0,
                             ready=False),
                 expect(actions.DeletePod, "cannot be pulled", pod_name=name(2)),
                 id="unpullable-old-image-recreated"),
    # 17. converged
    pytest.param(healthy_cluster(3), expect(actions.NoOp, "3 healthy"), id="converged"),
    pytest.param(healthy_cluster(1, size=1), expect(actions.NoOp), id="converged-single"),
]


@pytest.mark.parametrize("observed, expected", CASES)
def test_plan_next_action(observed: ObservedCluster, expected: Expect) -> None:
    action = plan_through_drain(observed)
    assert isinstance(action, expected.action_type), action
    for key, value in expected.fields.items():
        assert getattr(action, key) == value, (key, action)
    assert expected.says in action.describe(), action.describe()


class _NoClock(datetime):
    @classmethod
    def now(cls, tz: Any = None) -> Any:
        raise AssertionError("the planner read the clock: time must come in the observation")

    @classmethod
    def utcnow(cls) -> Any:
        raise AssertionError("the planner read the clock: time must come in the observation")


def _planning_modules() -> list[ModuleType]:
    """Every module of the planner package (each rule group reads time only from the observation)."""
    return [importlib.import_module(f"etcd_operator.planning.{info.name}")
            for info in pkgutil.iter_modules(etcd_operator.planning.__path__)]


@pytest.mark.parametrize("observed, expected", CASES)
def test_plan_depends_only_on_the_observation(observed: ObservedCluster, expected: Expect,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Pure: no clock, no randomness of its own, nothing kept between calls, the observation left
    as it was. An equal observation rebuilt from scratch gets the same plan, also after the
    planner already saw a different one."""
    before = copy.deepcopy(observed)
    for module in _planning_modules():
        if hasattr(module, "datetime"):
            monkeypatch.setattr(module, "datetime", _NoClock)
    monkeypatch.setattr(secrets, "choice", lambda seq: (_ for _ in ()).throw(AssertionError("randomness")))
    first = plan_next_action(observed)
    plan_next_action(nothing_yet())  # anything remembered from this would change the next plan
    assert plan_next_action(copy.deepcopy(before)) == first
    assert observed == before, "the planner changed its input"


def test_learner_progress_falls_back_to_voters_without_leader_status() -> None:
    observed = _learner_joining(raft_index=95)
    statuses = dict(observed.endpoint_status)
    del statuses[name(1)]  # the leader's own status did not answer
    statuses[name(2)] = EndpointStatus(member_id(2), member_id(1), "3.6.16", raft_index=1000)
    action = plan_next_action(dataclasses.replace(observed, endpoint_status=statuses))
    assert isinstance(action, actions.Wait) and "catching up" in action.reason
