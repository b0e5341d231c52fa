"""The operator's view of the world, built the way observing.py builds it: every pod, PVC and
service from the API (the control plane is always reachable from the operator); etcd only
through the members it can reach (its link to their node is up, their node is up, their pod is
live, the member trusts its client certificate). A member list comes from a member with a leader
(etcd 3.5+ serves it linearizably); without one, the members that answer give `endpoint status`
with no leader and their local member list. Alarms are parsed from the status errors as etcd
prints them: `memberID:<id> alarm:<kind> `, the ID left out when it is 0."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from etcd_common.api import constants as c
from etcd_common.etcd.alarms import CORRUPT
from etcd_common.etcd.types import EndpointStatus, HashKV, Member
from etcd_operator.observed import MemberHealth, ObservedCluster, ObservedPod, ObservedPVC
from etcd_operator.recovery_inputs import with_recovery_inputs
from tests.simulation.world import OPERATOR, T0, EtcdState, Pod, World


def at(world: World, seconds: int | None) -> object:
    return None if seconds is None else T0 + timedelta(seconds=seconds)


def observed_pod(world: World, pod: Pod) -> ObservedPod:
    return ObservedPod(
        name=pod.name, member_name=pod.name, phase="Running" if pod.node else "Pending", ready=pod.ready,
        deleting=pod.deleting_at is not None, ip=f"10.0.{pod.created_at % 250}.{len(pod.name)}" if pod.node else None,
        created_at=at(world, pod.created_at), image=pod.image, etcd_version=pod.version,  # type: ignore[arg-type]
        initial_cluster_state=pod.state, pod_policy_hash=pod.policy_hash, uid=pod.uid, serving=pod.serving,
        defragmented_at=at(world, pod.defragmented_at), defragment_failed_at=at(world, pod.defragment_failed_at),  # type: ignore[arg-type]
        deletion_deadline=at(world, pod.deleting_at),  # type: ignore[arg-type]
        node_name=pod.node, trusted_ca=pod.trusted_ca, secret_volumes=pod.secret_volumes,
        rejoins_on_data=pod.rejoins_on_data, initial_cluster=pod.initial_cluster,
        tls_mode="tls" if world.spec.tls.peer_tls else "plain",
        unready_since=None if pod.ready else at(world, pod.created_at),  # type: ignore[arg-type]
    )


def reachable(world: World, name: str) -> EtcdState | None:
    """The etcd cluster of the member the operator can talk to as `name` (None: it cannot)."""
    pod = world.pods.get(name)
    if pod is None or pod.deleting_at is not None or pod.node is None or not world.linked(OPERATOR, pod.node):
        return None
    state = world.etcd_of(name)
    if state is None:
        return None
    if world.secrets and pod.secret_volumes and not (world.trusts_clients(pod) and world.operator_trusts_servers()):
        return None  # TLS: the member refuses the operator's client certificate, or the operator its server's
    return state


def hash_kv(world: World, name: str, revision: int, cluster_id: int) -> HashKV | None:
    """`etcdctl endpoint hashkv --rev` on one member (a local call): None when it fails (not
    reachable, the revision compacted or in its future). Members with the same data (lineage)
    agree at every revision; a corrupted one differs at every revision."""
    data = world.data_of(name)
    state = reachable(world, name)
    if data is None or state is None or state.cluster_id != cluster_id or not data.compacted <= revision <= data.revision:
        return None
    return HashKV(hash=hash((data.lineage, revision)) & 0xFFFFFFFF, compact_revision=data.compacted,
                  hash_revision=revision)


def with_hash_kvs(world: World, observed: ObservedCluster) -> ObservedCluster:
    """observing._hash_kvs: only under CORRUPT, every voter that answered endpoint status, at the
    lowest revision any of them reports."""
    if not observed.alarmed(CORRUPT):
        return observed
    voters = [m for m in observed.voting_members if m.member_name in observed.endpoint_status]
    revision = min((observed.endpoint_status[m.member_name].revision for m in voters), default=0)
    if revision <= 0:
        return observed
    hashes = {m.member_name: answer for m in voters if (answer := hash_kv(world, m.member_name, revision, observed.cluster_id)) is not None}
    return dataclasses.replace(observed, hash_kvs=hashes, hash_kv_revision=revision)


class _Recovery:
    """What recovery_inputs.py reads from the API: the namespace's EtcdBackups, Nodes by name."""

    def __init__(self, world: World) -> None:
        self.world = world

    def backups(self, namespace: str) -> Sequence[Mapping[str, Any]]:
        return [b.raw for b in self.world.backups.values()]

    def node(self, name: str) -> Mapping[str, Any] | None:
        return {"metadata": {"name": name}} if self.world.node_exists(name) else None


def alarm_errors(state: EtcdState) -> tuple[str, ...]:
    return tuple(f"memberID:{member_id} alarm:{kind} " if member_id else f"alarm:{kind} "
                 for kind, member_id in state.alarms)


def status_of(world: World, name: str, state: EtcdState, leader_id: int) -> EndpointStatus:
    data = world.data_of(name)
    assert data is not None
    return EndpointStatus(state.members[name].id, leader_id, str(world.spec.version), raft_index=data.raft_index,
                          db_size=data.db_size, errors=alarm_errors(state), revision=data.revision,
                          db_size_in_use=data.in_use, cluster_id=state.cluster_id,
                          is_learner=state.members[name].learner)


def members_of(world: World, state: EtcdState) -> tuple[Member, ...]:
    members = []
    for record in state.members.values():
        started = record.started
        client = record.peer_url.replace(f":{c.PEER_PORT}", f":{c.CLIENT_PORT}")
        members.append(Member(record.id, record.name if started else "", (record.peer_url,),
                              (client,) if started else (), record.learner))
    return tuple(members)


def observe(world: World, name_suffix: str) -> ObservedCluster:
    spec = world.spec
    base = ObservedCluster(
        cluster=world.cluster,
        pods=tuple(observed_pod(world, pod) for pod in world.pods.values()),
        pvcs=tuple(ObservedPVC(p.name, p.name, deleting=p.deleting, uid=p.uid, leaving=p.leaving)
                   for p in world.pvcs.values()),
        services=frozenset(world.services), name_suffix=name_suffix, observed_at=world.observed_at,
        issued_secrets=dict(world.secrets) if spec.issued_tls is not None else {},
        member_list_error="no endpoints",
    )
    recovery = world.cluster.recorded.recovery
    asked = sorted(world.pods)
    if recovery is not None and recovery.in_progress:
        asked = [recovery.seed_member]  # observing.py asks only the seed while a recovery runs
    answering = {name: state for name in asked if (state := reachable(world, name)) is not None}
    with_leader = [name for name, state in answering.items() if name in world.quorum_group(state)]
    if with_leader:
        observed = _with_member_list(world, base, answering, answering[with_leader[0]], with_leader[0])
        observed = with_hash_kvs(world, observed)
    else:
        observed = _without_member_list(world, base, answering)
    lookups = _Recovery(world)  # recovery_inputs.py: backups and nodes only while a recovery may start
    return with_recovery_inputs(observed, lookups, lookups.node)


def _with_member_list(world: World, base: ObservedCluster, answering: dict[str, EtcdState], state: EtcdState,
                      responder: str) -> ObservedCluster:
    leader_id = state.members[state.leader].id if state.leader else 0
    group = world.quorum_group(state)
    ours = [name for name, s in answering.items() if s is state]
    health = {name: MemberHealth(name in group, None if name in group else "context deadline exceeded")
              for name in ours if not state.members[name].learner}
    statuses = {name: status_of(world, name, state, leader_id if name in group else 0) for name in ours}
    alarms = tuple(sorted({a for s in statuses.values() for a in s.alarms}))
    peer_views = {}
    unheard_learner = any(m.learner and m.name not in statuses for m in state.members.values())
    if any(not h.healthy for h in health.values()) or len(health) < len(state.voters()) or unheard_learner:
        for name in group:
            if name in health:
                peer_views[name] = frozenset(
                    m.id for m in state.members.values() if m.name != name and world.etcd_of(m.name) is state
                    and world.pods_linked(world.pods[name], world.pods[m.name]))
    compacted = None
    if any(kind == "NOSPACE" for kind, _ in state.alarms) and state.leader is not None:
        leader = world.data_of(state.leader)
        compacted = leader is not None and leader.compacted >= leader.revision
    return dataclasses.replace(
        base, members=members_of(world, state), member_list_error=None, health=health, endpoint_status=statuses,
        cluster_id=state.cluster_id, quorum_confirmed_by=responder, alarms=alarms, peer_views=peer_views,
        history_compacted=compacted)


def _without_member_list(world: World, base: ObservedCluster, answering: dict[str, EtcdState]) -> ObservedCluster:
    statuses = {name: status_of(world, name, state, 0) for name, state in answering.items()}
    local = None
    if statuses:
        ahead = max(statuses, key=lambda n: (statuses[n].raft_index, n))
        local = members_of(world, answering[ahead])
    return dataclasses.replace(base, endpoint_status=statuses, local_members=local,
                               member_list_error="context deadline exceeded",
                               alarms=tuple(sorted({a for s in statuses.values() for a in s.alarms})))
