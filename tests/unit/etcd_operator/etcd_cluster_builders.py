"""Builders of EtcdCluster objects and observations for the decision-layer unit tests.

`healthy_cluster()` is a converged cluster; the modifiers return changed copies, so each test
case reads as "a healthy cluster, but ...".
"""
from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import EtcdCluster
from etcd_common.api.versions import EtcdVersion
from etcd_common.etcd.types import EndpointStatus, HashKV, Member
from etcd_operator.manifests import member_peer_url, pod_policy_hash
from etcd_operator.observed import (
    TLS_MODE_PLAIN,
    TLS_MODE_TLS,
    MemberHealth,
    ObservedCluster,
    ObservedPod,
    ObservedPVC,
    version_from_image,
)
from etcd_operator.spec import parse_etcd_cluster

CLUSTER = "example"
NAMESPACE = "default"
UID = "0b5f1c1e-uid"
NEW_SUFFIX = "zz9zz"
NEW_MEMBER = f"{CLUSTER}-{NEW_SUFFIX}"
T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
PVC_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


def name(index: int) -> str:
    """Member names example-mem01, example-mem02, ... (5-character suffix, like real ones)."""
    return f"{CLUSTER}-mem{index:02d}"


def member_id(index: int) -> int:
    return 0x1000 + index


def raw_cluster(spec: dict[str, Any] | None = None, *, status: dict[str, Any] | None = None,
                cluster_name: str = CLUSTER) -> dict[str, Any]:
    return {
        "apiVersion": c.API_GROUP_VERSION,
        "kind": c.KIND,
        "metadata": {"name": cluster_name, "namespace": NAMESPACE, "uid": UID, "generation": 4},
        "spec": {"size": 3, "version": "3.6.16", **(spec or {})},
        "status": status if status is not None else {"bootstrapped": True},
    }


def make_cluster(spec: dict[str, Any] | None = None, *, bootstrapped: bool = True,
                 status: dict[str, Any] | None = None) -> EtcdCluster:
    return parse_etcd_cluster(raw_cluster(spec, status=status if status is not None else {"bootstrapped": bootstrapped}))


def make_pod(cluster: EtcdCluster, member: str, *, index: int = 1, version: str = "3.6.16", ready: bool = True,
             state: str = c.INITIAL_CLUSTER_STATE_EXISTING, **fields: Any) -> ObservedPod:
    spec = cluster.require_spec()
    parsed_version = EtcdVersion.parse(version)
    defaults: dict[str, Any] = {
        "phase": "Running",
        "ready": ready,
        "ip": f"127.1.0.{index}",
        "created_at": T0 + timedelta(minutes=index),
        "image": f"{spec.repository}:v{version}",
        "etcd_version": parsed_version,
        "initial_cluster_state": state,
        "pod_policy_hash": pod_policy_hash(spec),
        # As parse_pod reads it from the flags the spec gives (tls_transition.py).
        "tls_mode": TLS_MODE_TLS if spec.tls.peer_tls else TLS_MODE_PLAIN,
    }
    defaults.update(fields)
    return ObservedPod(name=member, member_name=member, **defaults)


def make_member(cluster: EtcdCluster, member: str, identifier: int, *, learner: bool = False,
                started: bool = True) -> Member:
    peer = member_peer_url(cluster, member)
    client = peer.replace(f":{c.PEER_PORT}", f":{c.CLIENT_PORT}")
    return Member(
        id=identifier,
        name=member if started else "",
        peer_urls=(peer,),
        client_urls=(client,) if started else (),
        is_learner=learner,
    )


def healthy_cluster(count: int = 3, *, size: int = 3, version: str = "3.6.16", leader: int = 1,
                    spec: dict[str, Any] | None = None, pvc: bool = False) -> ObservedCluster:
    """`count` healthy voting members example-mem01.. at `version`, example-mem<leader> leading."""
    spec_fields: dict[str, Any] = {"size": size, "version": version, **(spec or {})}
    if pvc:
        spec_fields.setdefault("pod", {})["persistentVolumeClaimSpec"] = PVC_SPEC
    cluster = make_cluster(spec_fields)
    indexes = range(1, count + 1)
    return ObservedCluster(
        cluster=cluster,
        pods=tuple(make_pod(cluster, name(i), index=i, version=version) for i in indexes),
        pvcs=tuple(ObservedPVC(name(i), name(i)) for i in indexes) if pvc else (),
        services=frozenset({CLUSTER, f"{CLUSTER}-client"}),
        members=tuple(make_member(cluster, name(i), member_id(i)) for i in indexes),
        health={name(i): MemberHealth(True) for i in indexes},
        endpoint_status={
            name(i): EndpointStatus(member_id(i), member_id(leader), version, raft_index=100) for i in indexes
        },
        name_suffix=NEW_SUFFIX,
        observed_at=T0 + timedelta(hours=1),
    )


# --- modifiers: each returns a changed copy


def with_spec(observed: ObservedCluster, **spec: Any) -> ObservedCluster:
    """Same observation, EtcdCluster spec fields replaced (pods keep what they run)."""
    current = observed.cluster
    raw_spec: dict[str, Any] = {"size": current.require_spec().size, "version": str(current.require_spec().version)}
    if current.require_spec().uses_persistent_volumes:
        raw_spec["pod"] = {"persistentVolumeClaimSpec": PVC_SPEC}
    raw_spec.update(spec)
    status = {"bootstrapped": current.recorded.bootstrapped}
    cluster = parse_etcd_cluster(raw_cluster(raw_spec, status=status))
    return dataclasses.replace(observed, cluster=cluster)


def with_cluster(observed: ObservedCluster, cluster: EtcdCluster) -> ObservedCluster:
    return dataclasses.replace(observed, cluster=cluster)


def without_pods(observed: ObservedCluster, *members: str) -> ObservedCluster:
    return dataclasses.replace(observed, pods=tuple(p for p in observed.pods if p.member_name not in members))


def without_members(observed: ObservedCluster, *members: str) -> ObservedCluster:
    return dataclasses.replace(
        observed,
        members=tuple(m for m in observed.members or () if m.member_name not in members),
        health={k: v for k, v in observed.health.items() if k not in members},
        endpoint_status={k: v for k, v in observed.endpoint_status.items() if k not in members},
    )


def without_volumes(observed: ObservedCluster, *members: str) -> ObservedCluster:
    return dataclasses.replace(observed, pvcs=tuple(v for v in observed.pvcs if v.member_name not in members))


def unhealthy(observed: ObservedCluster, *members: str, error: str = "context deadline exceeded") -> ObservedCluster:
    health = dict(observed.health)
    for member in members:
        health[member] = MemberHealth(False, error)
    return dataclasses.replace(observed, health=health)


def replace_pod(observed: ObservedCluster, member: str, **fields: Any) -> ObservedCluster:
    """The member's pod with `fields` changed; a new image brings its version, as parse_pod does."""
    if "image" in fields and "etcd_version" not in fields:
        fields["etcd_version"] = version_from_image(fields["image"])
    return dataclasses.replace(
        observed,
        pods=tuple(dataclasses.replace(p, **fields) if p.member_name == member else p for p in observed.pods),
    )


def with_hash_kvs(observed: ObservedCluster, hashes: dict[int, int], *, revision: int = 5000,
                  compacted: dict[int, int] | None = None) -> ObservedCluster:
    """Members' keyspace hashes at `revision` (member index -> hash; a member left out did not
    answer), each compacted at revision 100 unless `compacted` says otherwise."""
    answers = {name(i): HashKV(hash=h, compact_revision=(compacted or {}).get(i, 100), hash_revision=revision)
               for i, h in hashes.items()}
    statuses = {member: dataclasses.replace(status, revision=revision)
                for member, status in observed.endpoint_status.items()}
    return dataclasses.replace(observed, hash_kvs=answers, hash_kv_revision=revision, endpoint_status=statuses)


def add_pod(observed: ObservedCluster, pod: ObservedPod) -> ObservedCluster:
    return dataclasses.replace(observed, pods=(*observed.pods, pod))


def add_member(observed: ObservedCluster, member: Member, *, healthy: bool = True,
               raft_index: int | None = 100) -> ObservedCluster:
    leader_id = observed.leader_id or 0
    health = dict(observed.health)
    statuses = dict(observed.endpoint_status)
    health[member.member_name] = MemberHealth(healthy, None if healthy else "unhealthy")
    if raft_index is not None:
        statuses[member.member_name] = EndpointStatus(member.id, leader_id, "3.6.16", raft_index=raft_index)
    return dataclasses.replace(observed, members=(*(observed.members or ()), member), health=health,
                               endpoint_status=statuses)


def member_list_unavailable(observed: ObservedCluster, error: str = "context deadline exceeded") -> ObservedCluster:
    return dataclasses.replace(observed, members=None, health={}, endpoint_status={}, member_list_error=error)


def leaderless(observed: ObservedCluster, *members: str) -> ObservedCluster:
    """No member list (etcd 3.5 needs quorum for one); `members` answer `endpoint status` with no leader."""
    statuses = {m: EndpointStatus(0x1000 + i, 0, "3.6.16", raft_index=100) for i, m in enumerate(members, 1)}
    return dataclasses.replace(member_list_unavailable(observed), endpoint_status=statuses)


def nothing_yet(*, bootstrapped: bool = False, spec: dict[str, Any] | None = None) -> ObservedCluster:
    """A freshly created EtcdCluster: no pods, services present, no member answers."""
    return ObservedCluster(
        cluster=make_cluster(spec, bootstrapped=bootstrapped),
        services=frozenset({CLUSTER, f"{CLUSTER}-client"}),
        name_suffix=NEW_SUFFIX,
        member_list_error="no endpoints",
    )


def plan_through_drain(observed: ObservedCluster) -> Any:
    """plan_next_action, past the drain that precedes a removal, restart or defragmentation (planning.py,
    "Draining"): a SetServing(false) is applied to the observation (the client service then no
    longer lists the pod) and planning goes on; the action then must take that very member away."""
    from etcd_operator import actions
    from etcd_operator.planning import plan_next_action

    action = plan_next_action(observed)
    if not (isinstance(action, actions.SetServing) and not action.serving):
        return action
    drained = replace_pod(observed, action.pod_name, serving=False)
    after = plan_next_action(drained)
    leaving = after.from_member_name if isinstance(after, actions.MoveLeader) else getattr(after, "member_name", None)
    assert isinstance(after, (actions.RemoveMember, actions.StopMember, actions.UpgradeMember, actions.Defragment,
                              actions.MoveLeader)) \
        and leaving == action.pod_name, f"drained {action.pod_name}, then planned {after}"
    return after


def issued_secret(cluster: EtcdCluster, role: str, data: dict[str, str], *, owner_uid: str = UID) -> dict[str, Any]:
    """A Secret of spec.TLS.issued as the operator writes it (owned by the cluster)."""
    from etcd_common.api.issued_tls import issued_secret_names

    names = dataclasses.asdict(issued_secret_names(cluster.name))
    return {"metadata": {"name": names[role], "namespace": cluster.namespace, "resourceVersion": "7",
                         "ownerReferences": [{"kind": c.KIND, "name": cluster.name, "uid": owner_uid}]},
            "data": data}


def with_issued_certificates(observed: ObservedCluster, *, now: datetime | None = None,
                             validity_seconds: int | None = None) -> ObservedCluster:
    """The observation with every spec.TLS.issued Secret present and valid (issued at `now`,
    default the observation's time) and the cluster's spec.TLS set to issued."""
    from etcd_operator.tls import certificates as certs

    if observed.cluster.require_spec().issued_tls is None:
        observed = with_spec(observed, TLS={"issued": {}})
    issued = observed.cluster.require_spec().issued_tls
    assert issued is not None
    at = now or observed.observed_at or T0
    identity = certs.identity_of(observed)
    ca = certs.issue_ca(identity, at, issued.ca_validity_seconds)
    secrets: dict[str, Any] = {"ca": issued_secret(observed.cluster, "ca", certs.secret_data("ca", ca, ca))}
    for role in certs.LEAF_ROLES:
        pair = certs.issue_leaf(ca, identity, role, at, validity_seconds or issued.validity_seconds)
        secrets[role] = issued_secret(observed.cluster, role, certs.secret_data(role, pair, ca))
    # Its member pods run with the issued peer and server Secrets mounted (as manifests.py mounts them).
    mounted = frozenset(identity.secret_name(role) for role in ("peer", "server"))
    pods = tuple(dataclasses.replace(pod, secret_volumes=pod.secret_volumes | mounted) for pod in observed.pods)
    return dataclasses.replace(observed, issued_secrets=secrets, pods=pods)
