"""Clusters after a quorum loss, as the quorum-recovery tests build them: a majority lost (etcd 3.5+:
no member list, survivors answering endpoint status), a recovery in progress, its seed member."""
from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import RECOVERY_SEEDING
from etcd_common.etcd.types import EndpointStatus
from etcd_operator.observed import MemberHealth, ObservedCluster, ObservedPVC, format_timestamp
from etcd_operator.spec import parse_etcd_cluster
from tests.unit.etcd_operator.etcd_cluster_builders import (
    NEW_MEMBER,
    PVC_SPEC,
    T0,
    healthy_cluster,
    make_member,
    make_pod,
    member_id,
    name,
    raw_cluster,
    replace_pod,
    without_pods,
    without_volumes,
)

FROM_SURVIVOR = {"recovery": {"quorumLoss": c.QUORUM_LOSS_FROM_SURVIVOR}}
# The etcd cluster ID the survivors answer for (their status header); a backup of this incarnation
# recorded it with the EtcdCluster's UID.
ETCD_CLUSTER_ID = 0xC1A57E4
# How lost_majority's lost members show: their pods being deleted on nodes deleted (proof that
# they are gone), gone with no trace of their node, being deleted on nodes that still exist
# (NotReady, tainted: no proof), or terminal.
GONE_NODE_DELETED, GONE_ABSENT, GONE_DELETING, GONE_TERMINAL = "node-deleted", "absent", "deleting", "terminal"


def recovering_cluster(observed: ObservedCluster, *, spec: dict[str, Any] | None = None, annotation: str | None = None,
                       recovery: dict[str, Any] | None = None) -> ObservedCluster:
    """The observation's cluster with spec fields, the one-off annotation and status.recovery."""
    current = observed.cluster.require_spec()
    raw_spec: dict[str, Any] = {"size": current.size, "version": str(current.version)}
    if current.uses_persistent_volumes:
        raw_spec["pod"] = {"persistentVolumeClaimSpec": PVC_SPEC}
    raw_spec.update(spec or {})
    status: dict[str, Any] = {"bootstrapped": True, "phase": "Failed"}
    if recovery is not None:
        status["recovery"] = recovery
    raw = raw_cluster(raw_spec, status=status)
    if annotation is not None:
        raw["metadata"]["annotations"] = {c.ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR: annotation}
    return dataclasses.replace(observed, cluster=parse_etcd_cluster(raw))


def answering_status(member: int, raft_index: int, revision: int) -> EndpointStatus:
    return EndpointStatus(member_id(member), 0, "3.6.16", raft_index=raft_index, revision=revision,
                          cluster_id=ETCD_CLUSTER_ID)


def lost_majority(count: int = 3, *, gone: tuple[int, ...] = (2, 3), answering: dict[int, tuple[int, int]] | None = None,
                  pvc: bool = False, spec: dict[str, Any] | None = FROM_SURVIVOR, annotation: str | None = None,
                  recovery: dict[str, Any] | None = None, gone_as: str = GONE_NODE_DELETED) -> ObservedCluster:
    """etcd 3.5+ after a quorum loss: no member list; the members of `answering` (index -> (raft
    index, revision); default: member 1 at 100/42) answer `endpoint status` with no leader and list
    all `count` voters locally; the members `gone` lost their pods (and on PVCs their claims), as
    `gone_as` says (default: being deleted on nodes that are deleted)."""
    observed = healthy_cluster(count, size=count, pvc=pvc)
    names = [name(i) for i in gone]
    observed = without_pods(observed, *names)
    if pvc:
        observed = without_volumes(observed, *names)
    if gone_as != GONE_ABSENT:
        fields: dict[str, Any] = {"phase": "Failed"} if gone_as == GONE_TERMINAL else {"deleting": True}
        pods = tuple(make_pod(observed.cluster, name(i), index=i, ready=False, node_name=f"node-{i}", **fields)
                     for i in gone)
        observed = dataclasses.replace(observed, pods=(*observed.pods, *pods), nodes_gone=frozenset(
            f"node-{i}" for i in gone) if gone_as == GONE_NODE_DELETED else frozenset())
    answering = answering if answering is not None else {1: (100, 42)}
    observed = dataclasses.replace(
        observed, local_members=observed.members, members=None, health={}, member_list_error="context deadline exceeded",
        endpoint_status={name(i): answering_status(i, index, rev) for i, (index, rev) in answering.items()},
    )
    return recovering_cluster(observed, spec=spec, annotation=annotation, recovery=recovery)


SEEDING = {"phase": RECOVERY_SEEDING, "survivor": name(1), "survivorRevision": 42, "survivorRaftIndex": 100,
           "lostMembers": [name(2), name(3)], "seedMember": NEW_MEMBER, "startedAt": format_timestamp(T0)}


def in_progress(*, pvc: bool = False, started_minutes_ago: float = 1.0, **recovery: Any) -> ObservedCluster:
    """A recovery started `started_minutes_ago`: the survivor's pod still there (drained), the old
    members' gone, no seed pod yet; the seed alone is asked, so nothing answers."""
    observed = lost_majority(pvc=pvc, recovery={**SEEDING, **recovery})
    observed = replace_pod(observed, name(1), serving=False)
    at = T0 + timedelta(minutes=started_minutes_ago)
    return dataclasses.replace(observed, endpoint_status={}, local_members=None, observed_at=at)


def with_seed(observed: ObservedCluster, *, serves: bool = True, revision: int = 42) -> ObservedCluster:
    seed_pod = make_pod(observed.cluster, NEW_MEMBER, index=9, state=c.INITIAL_CLUSTER_STATE_NEW, ready=serves)
    observed = dataclasses.replace(observed, pods=(*observed.pods, seed_pod))
    if observed.cluster.require_spec().uses_persistent_volumes:
        observed = dataclasses.replace(observed, pvcs=(*observed.pvcs, ObservedPVC(NEW_MEMBER, NEW_MEMBER)))
    if not serves:
        return observed
    seed = make_member(observed.cluster, NEW_MEMBER, 0x7777)
    return dataclasses.replace(
        observed, members=(seed,), health={NEW_MEMBER: MemberHealth(True)}, member_list_error=None,
        endpoint_status={NEW_MEMBER: EndpointStatus(0x7777, 0x7777, "3.6.16", raft_index=5, revision=revision)})
