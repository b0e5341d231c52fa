"""Carries out the action the planner chose: Kubernetes writes and etcd membership changes.

Every step is idempotent, because a pass may repeat one whose answer was lost: an object that
already exists counts as created, a pod or member already gone counts as deleted.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import EtcdCluster
from etcd_common.etcd.access import EtcdAccess
from etcd_common.etcd.etcdctl import Etcdctl
from etcd_operator import actions as a
from etcd_operator import failpoints as fp
from etcd_operator.adoption import PEER_SERVICE_PATCH
from etcd_operator.manifests import (
    build_disruption_budget,
    build_member_pod,
    build_member_pvc,
    build_service,
    client_service_selector,
    member_client_url,
)
from etcd_operator.observed import ObservedCluster
from kube_adapter.errors import AlreadyExists
from kube_adapter.resources import ResourceClient
from operator_runtime.cache import ObjectCache

log = logging.getLogger(__name__)

# etcd refuses `member add` ("unhealthy cluster") from a member that has not been connected to a
# quorum of voters for its HealthInterval (5 s): a member promoted a moment ago always would. Its
# pod is that young (creationTimestamp has whole seconds, hence the extra second), so an add is
# sent to older voters when there are any; the client picks among its endpoints at random.
ADD_VIA_MEMBERS_OLDER_THAN_SECONDS = 6.0


@dataclass(frozen=True)
class ActionExecutor:
    """Writes go to the API and, once accepted, straight into the watch caches: the next pass
    must see what this one created even before the watch event arrives (or it would, say,
    bootstrap a second seed)."""

    pods: ResourceClient
    services: ResourceClient
    pvcs: ResourceClient
    etcd: EtcdAccess
    pod_cache: ObjectCache
    service_cache: ObjectCache
    pvc_cache: ObjectCache
    pdbs: ResourceClient | None = None
    pdb_cache: ObjectCache = field(default_factory=ObjectCache)
    # Tests only: die just before/after each membership effect (see failpoints.py).
    failpoints: fp.Failpoints = field(default_factory=fp.Failpoints)

    def execute(self, action: a.Action, observed: ObservedCluster) -> None:
        cluster = observed.cluster
        ns = cluster.namespace
        if isinstance(action, a.CreateServices):
            for name in action.names:
                self._create(self.service_cache, lambda: self.services.create(ns, build_service(cluster, name)))
        elif isinstance(action, a.PublishNotReadyAddresses):
            self.service_cache.upsert(self.services.patch(ns, action.service_name, PEER_SERVICE_PATCH))
        elif isinstance(action, a.UpdateClientSelector):
            patch = {"spec": {"selector": client_service_selector(cluster.name)}}
            self.service_cache.upsert(self.services.patch(ns, action.service_name, patch))
        elif isinstance(action, a.SetServing):
            value = c.LABEL_SERVING_VALUE if action.serving else None  # None: merge patch removes it
            metadata: dict[str, Any] = {"labels": {c.LABEL_SERVING: value},
                                        "annotations": {c.ANNOTATION_DRAINED_AT: action.at or None}}
            if action.pod_uid:
                metadata["uid"] = action.pod_uid  # a precondition: never a newer pod of that name
            if action.serving:
                self.pod_cache.upsert(self.pods.patch(ns, action.pod_name, {"metadata": metadata}))
            else:
                with self.failpoints.around(fp.DRAIN, ns):
                    self.pod_cache.upsert(self.pods.patch(ns, action.pod_name, {"metadata": metadata}))
        elif isinstance(action, a.SetDisruptionBudget):
            assert self.pdbs is not None, "no PodDisruptionBudget client"
            pdbs = self.pdbs
            if action.create:
                body = build_disruption_budget(cluster, action.min_available)
                self._create(self.pdb_cache, lambda: pdbs.create(ns, body))
            else:
                self.pdb_cache.upsert(pdbs.patch(ns, action.name, {"spec": {"minAvailable": action.min_available}}))
        elif isinstance(action, a.CreateSeedMember):
            self._create_member_pod(cluster, action.member_name, "new", action.initial_cluster, observed)
        elif isinstance(action, a.CreateMemberPod):
            self._create_member_pod(cluster, action.member_name, "existing", action.initial_cluster, observed)
        elif isinstance(action, (a.DeletePod, a.UpgradeMember)):
            # The UID precondition: only the pod the pass saw, never a newer one with its name.
            with self.failpoints.around(fp.POD_DELETE, ns):
                self.pods.delete(ns, action.pod_name, uid_precondition=action.pod_uid or None)
        elif isinstance(action, a.DeletePVC):
            self.pvcs.delete(ns, action.pvc_name, uid_precondition=action.pvc_uid or None)
        elif isinstance(action, a.AddMember):
            # member add first: a crash before the pod exists leaves an unstarted member, which the
            # next pass finishes with CreateMemberPod (never a ghost).
            with self.failpoints.around(fp.MEMBER_ADD, ns):
                self._etcd(observed, settled_first=True).member_add(action.member_name, [action.peer_url],
                                                                   learner=action.as_learner)
            self._create_member_pod(cluster, action.member_name, "existing", action.initial_cluster, observed)
        elif isinstance(action, a.PromoteMember):
            with self.failpoints.around(fp.PROMOTE, ns):
                self._etcd(observed).member_promote(action.member_id)
        elif isinstance(action, a.RemoveMember):
            with self.failpoints.around(fp.MEMBER_REMOVE, ns):
                self._etcd(observed, exclude=action.member_name).member_remove(action.member_id)
            pod = observed.pod(action.member_name)
            if pod is not None and not pod.deleting:
                # A removed member's etcd exits and would crash-loop in its pod; until the pod is
                # gone, every probe that reaches it waits out a timeout. (If we die before this,
                # a later pass deletes the orphan.)
                with self.failpoints.around(fp.POD_DELETE, ns):
                    self.pods.delete(ns, pod.name, uid_precondition=pod.uid or None)
        elif isinstance(action, a.MoveLeader):
            # The leader must be among the endpoints, healthy or not (a stuck leader may still
            # serve move-leader); etcdctl asks each for its status and sends the move to the leader.
            with self.failpoints.around(fp.MOVE_LEADER, ns):
                self._etcd(observed, include=action.from_member_name).move_leader(action.to_member_id)
        elif action.has_effect:
            raise NotImplementedError(f"no executor for {type(action).__name__}")

    def _create_member_pod(self, cluster: EtcdCluster, member: str, state: Literal["new", "existing"],
                           initial_cluster: a.InitialCluster, observed: ObservedCluster) -> None:
        if cluster.require_spec().uses_persistent_volumes:
            self._create(self.pvc_cache, lambda: self.pvcs.create(cluster.namespace, build_member_pvc(cluster, member)))
        pod = build_member_pod(cluster, member, state=state, initial_cluster=initial_cluster,
                               ipv6=observed.ip_family == "IPv6")
        with self.failpoints.around(fp.POD_CREATE, cluster.namespace):
            self._create(self.pod_cache, lambda: self.pods.create(cluster.namespace, pod))

    def _etcd(self, observed: ObservedCluster, exclude: str | None = None, include: str | None = None,
              settled_first: bool = False) -> Etcdctl:
        """etcdctl against every healthy voting member (but `exclude`), so any live one can answer;
        an unhealthy one would only make a call wait out its timeout. Learners are left out: they
        refuse membership calls ("rpc not supported for learner"). `settled_first`: only those
        whose pods are older than ADD_VIA_MEMBERS_OLDER_THAN_SECONDS, if there are any."""
        cluster = observed.cluster
        voters = [m for m in observed.healthy_voters if m.started] or [
            m for m in observed.voting_members if m.started]
        names = [m.member_name for m in voters if m.member_name != exclude] or [m.member_name for m in voters]
        if settled_first:
            names = [n for n in names if _pod_older_than(observed, n, ADD_VIA_MEMBERS_OLDER_THAN_SECONDS)] or names
        if include is not None and include not in names:
            names.append(include)
        return self.etcd.client(cluster, [member_client_url(cluster, n) for n in names])

    @staticmethod
    def _create(cache: ObjectCache, create: Callable[[], dict[str, Any]]) -> None:
        try:
            cache.upsert(create())
        except AlreadyExists:
            log.info("already exists; an earlier pass created it")


def _pod_older_than(observed: ObservedCluster, member: str, seconds: float) -> bool:
    pod = observed.pod(member)
    age = observed.pod_age_seconds(pod) if pod is not None else None
    return age is not None and age >= seconds
