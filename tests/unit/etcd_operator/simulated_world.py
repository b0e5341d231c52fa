"""A small simulated world for driving the planner in a loop: pods start instantly, etcd membership
follows the actions, and each step's observation is built from the world's state."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from etcd_common.api.etcd_cluster import EtcdCluster
from etcd_common.api.versions import EtcdVersion
from etcd_common.etcd.types import EndpointStatus, Member
from etcd_operator import actions
from etcd_operator.manifests import member_peer_url, pod_policy_hash, service_names
from etcd_operator.observed import (
    MemberHealth,
    ObservedCluster,
    ObservedPod,
    ObservedPVC,
)
from tests.unit.etcd_operator.etcd_cluster_builders import PVC_SPEC, T0, make_cluster


@dataclass
class SimMember:
    id: int
    name: str
    peer_url: str
    learner: bool
    started: bool = False


@dataclass
class SimPod:
    name: str
    image: str
    version: Any
    policy_hash: str
    state: str
    created_at: Any
    serving: bool = True  # labelled for the client service


@dataclass
class World:
    cluster: EtcdCluster
    services: set[str] = field(default_factory=set)
    pods: dict[str, SimPod] = field(default_factory=dict)
    members: dict[str, SimMember] = field(default_factory=dict)
    pvcs: set[str] = field(default_factory=set)
    leaving: set[str] = field(default_factory=set)  # PVCs StopMember marked
    leader: str | None = None
    bootstrapped: bool = False
    clock: int = 0
    next_id: int = 0x100
    history: list[actions.Action] = field(default_factory=list)

    # --- the cluster's own behaviour between passes
    def settle(self) -> None:
        """Pods start; a member whose pod runs is started; the seed forms the cluster."""
        for pod in self.pods.values():
            member = self.members.get(pod.name)
            if member is None and pod.state == "new" and not self.members:
                self.members[pod.name] = SimMember(self._new_id(), pod.name, member_peer_url(self.cluster, pod.name),
                                                   learner=False)
                member = self.members[pod.name]
            if member is not None:
                member.started = True
        if self.leader not in self.members or self.members[self.leader].learner or self.leader not in self.pods:
            voters = [m.name for m in self.members.values() if not m.learner and m.name in self.pods]
            self.leader = sorted(voters)[0] if voters else None
        if any(m.started for m in self.members.values()):
            self.bootstrapped = True

    def _new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def observe(self) -> ObservedCluster:
        self.clock += 1
        recorded = dataclasses.replace(self.cluster.recorded, bootstrapped=self.bootstrapped)
        cluster = dataclasses.replace(self.cluster, recorded=recorded)
        reachable = [m for m in self.members.values() if m.name in self.pods and m.started]
        members = None
        if reachable:
            members = tuple(
                Member(m.id, m.name if m.started else "", (m.peer_url,),
                               (m.peer_url.replace(":2380", ":2379"),) if m.started else (), m.learner)
                for m in self.members.values()
            )
        leader_id = self.members[self.leader].id if self.leader in self.members else 0
        healthy = {m.name for m in reachable if not m.learner}
        return ObservedCluster(
            cluster=cluster,
            pods=tuple(
                ObservedPod(p.name, p.name, phase="Running", ready=p.name in healthy, ip="127.1.0.1",
                            created_at=p.created_at, image=p.image, etcd_version=p.version,
                            initial_cluster_state=p.state, pod_policy_hash=p.policy_hash, serving=p.serving)
                for p in self.pods.values()
            ),
            pvcs=tuple(ObservedPVC(name, name, leaving=name in self.leaving) for name in self.pvcs),
            services=frozenset(self.services),
            members=members,
            member_list_error=None if members is not None else "no endpoints",
            health={m.name: MemberHealth(m.name in healthy) for m in reachable},
            endpoint_status={m.name: EndpointStatus(m.id, leader_id, str(self.spec.version), raft_index=100)
                             for m in reachable},
            name_suffix=f"s{self.clock:04d}",
            observed_at=T0 + timedelta(minutes=self.clock),
        )

    @property
    def spec(self) -> Any:
        return self.cluster.require_spec()

    def create_pod(self, name: str, state: str) -> None:
        if self.spec.uses_persistent_volumes:
            self.pvcs.add(name)
        self.pods[name] = SimPod(name, self.spec.image, self.spec.version, pod_policy_hash(self.spec), state,
                                 T0 + timedelta(minutes=self.clock))

    # --- executing actions
    def execute(self, action: actions.Action, *, crash_after_member_add: bool = False) -> None:
        self.history.append(action)
        if isinstance(action, actions.CreateServices):
            self.services.update(action.names)
        elif isinstance(action, actions.CreateSeedMember):
            self.create_pod(action.member_name, "new")
        elif isinstance(action, actions.CreateMemberPod):
            self.create_pod(action.member_name, "existing")
        elif isinstance(action, actions.AddMember):
            assert not any(m.learner for m in self.members.values()), "etcd allows one learner"
            self.members[action.member_name] = SimMember(self._new_id(), action.member_name, action.peer_url,
                                                         learner=action.as_learner)
            if not crash_after_member_add:
                self.create_pod(action.member_name, "existing")
        elif isinstance(action, actions.PromoteMember):
            self.members[action.member_name].learner = False
        elif isinstance(action, actions.RemoveMember):
            assert action.member_name != self.leader, "removed the leader"
            if action.purpose != "replace" and action.member_name in self.pods:
                assert not self.pods[action.member_name].serving, f"removed before it was drained: {action}"
            del self.members[action.member_name]
        elif isinstance(action, actions.SetServing):
            self.pods[action.pod_name].serving = action.serving
        elif isinstance(action, actions.MoveLeader):
            assert self.leader == action.from_member_name
            self.leader = action.to_member_name
        elif isinstance(action, actions.UpgradeMember):
            assert not self.pods[action.pod_name].serving, f"restarted before it was drained: {action}"
            self._hand_over_if_leading(action.member_name)  # what etcd does when it stops gracefully
            if action.in_place:
                pod = self.pods[action.pod_name]
                pod.image, pod.version = action.image, EtcdVersion.parse(action.etcd_version)
            else:
                del self.pods[action.pod_name]
        elif isinstance(action, actions.StopMember):  # the pod goes, then the member (acting.py)
            assert not self.pods[action.pod_name].serving, f"stopped before it was drained: {action}"
            self._hand_over_if_leading(action.member_name)
            if action.pvc_name:
                self.leaving.add(action.pvc_name)
            del self.pods[action.pod_name]
            del self.members[action.member_name]
        elif isinstance(action, actions.DeletePod):
            del self.pods[action.pod_name]
        elif isinstance(action, actions.DeletePVC):
            self.pvcs.discard(action.pvc_name)
            self.leaving.discard(action.pvc_name)
        elif isinstance(action, actions.ClearLeavingMark):
            self.leaving.discard(action.pvc_name)
        self.check_invariants()

    def _hand_over_if_leading(self, member: str) -> None:
        if self.leader == member:
            others = sorted(m.name for m in self.members.values() if not m.learner and m.name in self.pods
                            and m.name != member)
            assert others, f"{member} stops as the only voter"
            self.leader = others[0]

    def check_invariants(self) -> None:
        voters = [m for m in self.members.values() if not m.learner]
        healthy = [m for m in voters if m.name in self.pods and m.started]
        if self.bootstrapped and voters:
            # Pods recreated in this pass start in settle(); count them as coming back.
            coming_back = [m for m in voters if m.name in self.pods]
            assert len(coming_back) >= len(voters) // 2 + 1, f"quorum lost: {self.history[-1]}"
        assert sum(m.learner for m in self.members.values()) <= 1
        del healthy


def converged_state(world: World) -> tuple[int, set[str], bool]:
    names = set(world.members)
    assert names == set(world.pods), "every member has a pod, every pod is a member"
    if world.spec.uses_persistent_volumes:
        assert world.pvcs == names
    assert not any(m.learner for m in world.members.values())
    assert world.services == set(service_names(world.cluster.name))
    images = {pod.image for pod in world.pods.values()}
    return len(names), images, world.leader in names


def new_world(spec: dict[str, Any]) -> World:
    return World(cluster=make_cluster(spec, bootstrapped=False))


def resize(world: World, **spec: Any) -> World:
    raw = {"size": world.spec.size, "version": str(world.spec.version)}
    if world.spec.uses_persistent_volumes:
        raw["pod"] = {"persistentVolumeClaimSpec": PVC_SPEC}
    raw.update(spec)
    cluster = make_cluster(raw, bootstrapped=True)
    world.cluster = dataclasses.replace(cluster, recorded=world.cluster.recorded)
    return world
