"""Carries out the action the planner chose: Kubernetes writes and etcd membership changes.

Every step is idempotent, because a pass may repeat one whose answer was lost: an object that
already exists counts as created, a pod or member already gone counts as deleted.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import EtcdCluster
from etcd_common.api.issued_tls import (
    CA_CERT_KEY,
    CA_KEY_KEY,
    NEXT_CA_CERT_KEY,
    NEXT_CA_KEY_KEY,
    PREVIOUS_CA_CERT_KEY,
)
from etcd_common.api.restore_source import DEFAULT_FETCH_IMAGE
from etcd_common.etcd import etcdctl as ctl
from etcd_common.etcd.access import EtcdAccess
from etcd_common.etcd.etcdctl import Etcdctl
from etcd_operator import actions as a
from etcd_operator import failpoints as fp
from etcd_operator.adoption import PEER_SERVICE_PATCH
from etcd_operator.manifests import (
    build_disruption_budget,
    build_member_pod,
    build_member_pvc,
    build_recovery_seed_pod,
    build_service,
    client_service_selector,
    cluster_labels,
    member_client_url,
    owner_reference,
)
from etcd_operator.metrics import OperatorMetrics
from etcd_operator.observed import ObservedCluster, format_timestamp
from etcd_operator.tls import cert_manager
from etcd_operator.tls import certificates as certs
from kube_adapter.errors import AlreadyExists, NotFound
from kube_adapter.resources import ResourceClient
from operator_runtime import actions as runtime
from operator_runtime.actions import Effect
from operator_runtime.cached_client import CachedClient

log = logging.getLogger(__name__)

# etcd refuses `member add` ("unhealthy cluster") from a member that has not been connected to a
# quorum of voters for its HealthInterval (5 s): a member promoted a moment ago always would. Its
# pod is that young (creationTimestamp has whole seconds, hence the extra second), so an add is
# sent to older voters when there are any; the client picks among its endpoints at random.
ADD_VIA_MEMBERS_OLDER_THAN_SECONDS = 6.0
# A defragmentation rewrites the database file; slow disks manage ~10 MB/s.
DEFRAGMENT_BASE_TIMEOUT_SECONDS = 60.0
DEFRAGMENT_BYTES_PER_SECOND = 10 * 1000 * 1000
# StopMember waits this long for the stopped member's pod to go before removing the member (etcd
# finishes its clients' requests, at most its 7 s request timeout; it takes about a second).
STOP_WAIT_SECONDS = 15.0
STOP_POLL_SECONDS = 0.2


@dataclass(frozen=True)
class ActionExecutor(runtime.ActionExecutor[ObservedCluster, None]):
    """Writes go to the API through write-through clients (`CachedClient`): once accepted, they
    are in the watch caches, and the next pass sees what this one created even before the watch
    event arrives (or it would, say, bootstrap a second seed). `execute` (the runtime's) hands
    each kind of action to its own method (`_EFFECTS`)."""

    pods: CachedClient
    services: CachedClient
    pvcs: CachedClient
    etcd: EtcdAccess
    pdbs: CachedClient | None = None
    metrics: OperatorMetrics | None = None  # maintenance results and durations
    secrets: ResourceClient | None = None  # spec.TLS.issued: the certificates' Secrets (not watched)
    certificates: ResourceClient | None = None  # spec.TLS.certManager: its cert-manager Certificates
    # The image a quorum-loss recovery's seed fetches a backup with (`etcd-restore-seed`).
    fetch_image: str = DEFAULT_FETCH_IMAGE
    # Tests only: die just before/after each membership effect (see failpoints.py).
    failpoints: fp.Failpoints = field(default_factory=fp.Failpoints)

    def effects(self) -> Mapping[type[Any], Effect[ObservedCluster, None]]:
        return _EFFECTS

    # --- Kubernetes objects

    def _create_services(self, action: a.CreateServices, observed: ObservedCluster) -> None:
        cluster = observed.cluster
        for name in action.names:
            self._create(self.services, cluster.namespace, build_service(cluster, name))

    def _publish_not_ready_addresses(self, action: a.PublishNotReadyAddresses, observed: ObservedCluster) -> None:
        self.services.patch(observed.cluster.namespace, action.service_name, PEER_SERVICE_PATCH)

    def _update_client_selector(self, action: a.UpdateClientSelector, observed: ObservedCluster) -> None:
        cluster = observed.cluster
        patch = {"spec": {"selector": client_service_selector(cluster.name)}}
        self.services.patch(cluster.namespace, action.service_name, patch)

    def _set_serving(self, action: a.SetServing, observed: ObservedCluster) -> None:
        ns = observed.cluster.namespace
        value = c.LABEL_SERVING_VALUE if action.serving else None  # None: merge patch removes it
        metadata: dict[str, Any] = {"labels": {c.LABEL_SERVING: value},
                                    "annotations": {c.ANNOTATION_DRAINED_AT: action.at or None}}
        if action.pod_uid:
            metadata["uid"] = action.pod_uid  # a precondition: never a newer pod of that name
        if action.serving:
            self.pods.patch(ns, action.pod_name, {"metadata": metadata})
        else:
            with self.failpoints.around(fp.DRAIN, ns):
                self.pods.patch(ns, action.pod_name, {"metadata": metadata})

    def _set_disruption_budget(self, action: a.SetDisruptionBudget, observed: ObservedCluster) -> None:
        assert self.pdbs is not None, "no PodDisruptionBudget client"
        cluster = observed.cluster
        if action.create:
            self._create(self.pdbs, cluster.namespace, build_disruption_budget(cluster, action.min_available))
        else:
            self.pdbs.patch(cluster.namespace, action.name, {"spec": {"minAvailable": action.min_available}})

    def _create_seed_member(self, action: a.CreateSeedMember, observed: ObservedCluster) -> None:
        self._create_member_pod(observed.cluster, action.member_name, "new", action.initial_cluster, observed)

    def _create_restored_members(self, action: a.CreateRestoredMembers, observed: ObservedCluster) -> None:
        cluster = observed.cluster
        spec = cluster.require_spec()
        assert spec.restore is not None, "CreateRestoredMembers for a cluster without spec.restore"
        for index, (member, _) in enumerate(action.initial_cluster):
            if member not in action.create:
                continue
            own_copy = dataclasses.replace(spec, restore=spec.restore.for_member(index))
            self._create_member_pod(dataclasses.replace(cluster, spec=own_copy), member, "new",
                                    action.initial_cluster, observed)

    def _create_recovery_seed(self, action: a.CreateRecoverySeed, observed: ObservedCluster) -> None:
        cluster = observed.cluster
        if cluster.require_spec().uses_persistent_volumes:
            self._create(self.pvcs, cluster.namespace, build_member_pvc(cluster, action.member_name))
        backup = (dataclasses.replace(action.restore, fetch_image=self.fetch_image)
                  if action.restore is not None else None)
        pod = build_recovery_seed_pod(cluster, action.member_name, survivor_client_url=action.survivor_client_url,
                                      token=action.cluster_token, ipv6=observed.ip_family == "IPv6", backup=backup)
        with self.failpoints.around(fp.POD_CREATE, cluster.namespace):
            self._create(self.pods, cluster.namespace, pod)

    def _create_existing_member_pod(self, action: a.CreateMemberPod, observed: ObservedCluster) -> None:
        cluster = observed.cluster
        if action.tls_bridge is not None:
            cluster = dataclasses.replace(cluster, spec=dataclasses.replace(cluster.require_spec(),
                                                                            tls_bridge=action.tls_bridge))
        learner = any(m.member_name == action.member_name for m in observed.learners)
        self._create_member_pod(cluster, action.member_name, "existing", action.initial_cluster, observed,
                                serving=not learner)

    def _delete_pod(self, action: a.DeletePod | a.UpgradeMember, observed: ObservedCluster) -> None:
        ns = observed.cluster.namespace
        # The UID precondition: only the pod the pass saw, never a newer one with its name.
        with self.failpoints.around(fp.POD_DELETE, ns):
            self.pods.delete(ns, action.pod_name, uid_precondition=action.pod_uid or None)

    def _upgrade_member(self, action: a.UpgradeMember, observed: ObservedCluster) -> None:
        if not action.in_place:
            if action.peer_url:
                # Its peers dial it at the new URL from now on; it listens there once its pod is
                # back (the pod goes next, drained already), so it is away no longer than a restart.
                self._etcd(observed, exclude=action.member_name).member_update(action.member_id, [action.peer_url])
            self._delete_pod(action, observed)
            return
        ns = observed.cluster.namespace
        # One JSON patch, so the annotations that say "restart pending" and the image change apply
        # together or not at all (an operator killed between two patches left a restart that never
        # came, waited for until RESTART_WAIT_SECONDS). In-place upgrades are planned only for pods
        # with the operator's pod-policy hash annotation, so the annotations map exists.
        annotations = {
            c.ANNOTATION_ETCD_VERSION: action.etcd_version,
            c.ANNOTATION_RESTARTED_AT: format_timestamp(datetime.now(UTC)),
            c.ANNOTATION_RESTARTED_FROM_COUNT: str(action.restart_count),
        }
        pod = observed.pod(action.member_name)
        container = f"/spec/containers/{action.container_index}"
        operations: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": action.pod_uid}]
        if pod is not None and pod.image:
            operations.append({"op": "test", "path": f"{container}/image", "value": pod.image})
        operations += [{"op": "add", "path": f"/metadata/annotations/{_json_pointer_token(key)}", "value": value}
                       for key, value in annotations.items()]
        operations.append({"op": "replace", "path": f"{container}/image", "value": action.image})
        with self.failpoints.around(fp.IMAGE_CHANGE, ns):
            self.pods.patch_json(ns, action.pod_name, operations)

    def _stop_member(self, action: a.StopMember, observed: ObservedCluster) -> None:
        ns = observed.cluster.namespace
        if action.pvc_name:
            # Before the pod goes: `member_pods.restart_members_without_pods` must not restart the member on its volume meanwhile.
            leaving = {c.ANNOTATION_LEAVING_AT: format_timestamp(datetime.now(UTC))}
            self.pvcs.patch(ns, action.pvc_name, {"metadata": {"annotations": leaving}})
        with self.failpoints.around(fp.POD_DELETE, ns):
            self.pods.delete(ns, action.pod_name, uid_precondition=action.pod_uid or None)
        if not self._wait_until_gone(ns, action.pod_name, action.pod_uid):
            log.info("pod %s/%s still stopping after %.0fs; a later pass removes its member", ns, action.pod_name,
                     STOP_WAIT_SECONDS)
            return
        with self.failpoints.around(fp.MEMBER_REMOVE, ns):
            self._etcd(observed, exclude=action.member_name).member_remove(action.member_id)

    def _wait_until_gone(self, namespace: str, pod_name: str, pod_uid: str) -> bool:
        """Whether the pod (that very one) is gone within STOP_WAIT_SECONDS: its containers have
        stopped and the kubelet has deleted it."""
        deadline = time.monotonic() + STOP_WAIT_SECONDS
        while True:
            try:
                pod = self.pods.fetch(namespace, pod_name)
            except NotFound:
                return True
            if pod_uid and (pod.get("metadata") or {}).get("uid") != pod_uid:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(STOP_POLL_SECONDS)

    def _clear_leaving_mark(self, action: a.ClearLeavingMark, observed: ObservedCluster) -> None:
        self.pvcs.patch(observed.cluster.namespace, action.pvc_name,
                        {"metadata": {"annotations": {c.ANNOTATION_LEAVING_AT: None}}})

    def _delete_pvc(self, action: a.DeletePVC, observed: ObservedCluster) -> None:
        self.pvcs.delete(observed.cluster.namespace, action.pvc_name, uid_precondition=action.pvc_uid or None)

    # --- etcd membership

    def _add_member(self, action: a.AddMember, observed: ObservedCluster) -> None:
        cluster = observed.cluster
        # member add first: a crash before the pod exists leaves an unstarted member, which the
        # next pass finishes with CreateMemberPod (never a ghost).
        with self.failpoints.around(fp.MEMBER_ADD, cluster.namespace):
            self._etcd(observed, settled_first=True).member_add(action.member_name, [action.peer_url],
                                                               learner=action.as_learner)
        self._create_member_pod(cluster, action.member_name, "existing", action.initial_cluster, observed,
                                serving=not action.as_learner)

    def _promote_member(self, action: a.PromoteMember, observed: ObservedCluster) -> None:
        with self.failpoints.around(fp.PROMOTE, observed.cluster.namespace):
            self._etcd(observed).member_promote(action.member_id)

    def _remove_member(self, action: a.RemoveMember, observed: ObservedCluster) -> None:
        ns = observed.cluster.namespace
        with self.failpoints.around(fp.MEMBER_REMOVE, ns):
            self._etcd(observed, exclude=action.member_name).member_remove(action.member_id)
        pod = observed.pod(action.member_name)
        if pod is not None and not pod.deleting:
            # A removed member's etcd exits and would crash-loop in its pod; until the pod is
            # gone, every probe that reaches it waits out a timeout. (If we die before this,
            # a later pass deletes the orphan.)
            with self.failpoints.around(fp.POD_DELETE, ns):
                self.pods.delete(ns, pod.name, uid_precondition=pod.uid or None)

    def _move_leader(self, action: a.MoveLeader, observed: ObservedCluster) -> None:
        # The leader must be among the endpoints, healthy or not (a stuck leader may still
        # serve move-leader); etcdctl asks each for its status and sends the move to the leader.
        with self.failpoints.around(fp.MOVE_LEADER, observed.cluster.namespace):
            self._etcd(observed, include=action.from_member_name).move_leader(action.to_member_id)

    # --- maintenance

    def _defragment(self, action: a.Defragment, observed: ObservedCluster) -> None:
        """Defragment, then record the outcome on the pod and send clients to it again (it was
        drained first); a failure is raised after that, for status and the retry."""
        cluster = observed.cluster
        started = time.monotonic()
        error: ctl.EtcdctlError | None = None
        try:
            self.etcd.maintenance(cluster).defragment(member_client_url(cluster, action.member_name),
                                                      timeout_seconds=defragment_timeout_seconds(action.db_size))
        except ctl.EtcdctlError as e:
            error = e
        if self.metrics is not None:
            self.metrics.observe_defragmentation(cluster.namespace, cluster.name, time.monotonic() - started,
                                                 ok=error is None)
        when = observed.observed_at or datetime.now(UTC)
        at = format_timestamp(when)
        recorded = c.ANNOTATION_DEFRAGMENTED_AT if error is None else c.ANNOTATION_DEFRAGMENT_FAILED_AT
        metadata: dict[str, Any] = {"labels": {c.LABEL_SERVING: c.LABEL_SERVING_VALUE},
                                    "annotations": {recorded: at, c.ANNOTATION_DRAINED_AT: None}}
        if error is not None and defragment_may_go_on(error):
            # etcd goes on rewriting the file after we stop waiting: the member stays drained. It
            # fails the health check meanwhile (its reads wait for the rewrite), and the planner
            # serves a drained member again only once it is healthy or the cluster converged.
            metadata = {"annotations": {recorded: at}}
        if action.pod_uid:
            metadata["uid"] = action.pod_uid
        self.pods.patch(cluster.namespace, action.pod_name, {"metadata": metadata})
        if error is not None:
            raise error

    def _compact_history(self, action: a.CompactHistory, observed: ObservedCluster) -> None:
        cluster = observed.cluster
        try:
            self.etcd.maintenance(cluster).compact(self._any_member_url(observed), action.revision)
        except ctl.EtcdctlError:
            if self.metrics is not None:
                self.metrics.count_compaction(cluster.namespace, cluster.name, ok=False)
            raise
        if self.metrics is not None:
            self.metrics.count_compaction(cluster.namespace, cluster.name, ok=True)

    def _disarm_alarm(self, action: a.DisarmAlarm, observed: ObservedCluster) -> None:
        cluster = observed.cluster
        ok = False
        try:
            self.etcd.maintenance(cluster).disarm(self._any_member_url(observed), action.alarm)
            ok = True
        finally:
            if self.metrics is not None:
                self.metrics.observe_alarm_recovery(cluster.namespace, cluster.name, action.alarm.kind,
                                                    action.raised_for_seconds, ok=ok)

    def _any_member_url(self, observed: ObservedCluster) -> str:
        """A healthy voting member's client URL (cluster-wide calls: any member serves them)."""
        cluster = observed.cluster
        voters = observed.healthy_voters or observed.voting_members
        return member_client_url(cluster, sorted(m.member_name for m in voters)[0])

    # --- helpers

    def _create_member_pod(self, cluster: EtcdCluster, member: str, state: Literal["new", "existing"],
                           initial_cluster: a.InitialCluster, observed: ObservedCluster,
                           serving: bool = True) -> None:
        """`serving=False` for a learner: its pod joins the client service once promoted (planning/draining.py,
        "Draining")."""
        if cluster.require_spec().uses_persistent_volumes:
            self._create(self.pvcs, cluster.namespace, build_member_pvc(cluster, member))
        pod = build_member_pod(cluster, member, state=state, initial_cluster=initial_cluster,
                               ipv6=observed.ip_family == "IPv6", serving=serving)
        if cluster.require_spec().issued_tls is not None:
            # The CAs its etcd will trust (read once, at start): a CA rotation rolls pods trusting less.
            pod["metadata"].setdefault("annotations", {})[c.ANNOTATION_TRUSTED_CA] = \
                certs.mounted_trust_fingerprint(observed.issued_secrets)
        with self.failpoints.around(fp.POD_CREATE, cluster.namespace):
            self._create(self.pods, cluster.namespace, pod)

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

    # --- spec.TLS.issued (tls/certificates.py)

    def _issue_certificates(self, action: a.IssueCertificates, observed: ObservedCluster) -> None:
        """Write each Secret of `action.roles`: the CA first (a new CA, then every leaf with it),
        created with the cluster as owner, or replaced (a merge patch of all keys, against the
        resourceVersion the pass read, so a concurrent writer is never overwritten blindly)."""
        assert self.secrets is not None, "no Secret client"
        spec = observed.cluster.require_spec()
        assert spec.issued_tls is not None, "IssueCertificates for a cluster without spec.TLS.issued"
        issued = spec.issued_tls
        identity = certs.identity_of(observed)
        now = datetime.now(UTC)
        ca_secret = observed.issued_secrets.get("ca")
        roles: tuple[certs.Role, ...] = tuple(r for r in certs.ROLES if r in action.roles)
        if "ca" in roles or ca_secret is None:
            ca = certs.issue_ca(identity, now, issued.ca_validity_seconds)
            roles = certs.ROLES
            trust = ca.cert_pem
        else:
            ca = certs.ca_from_secret(ca_secret)
            trust = certs.trust_bundle(ca_secret)  # a CA rotation's other CA stays trusted
        for role in roles:
            pair = ca if role == "ca" else certs.issue_leaf(ca, identity, role, now, issued.validity_seconds)
            self._write_secret(observed, identity.secret_name(role), certs.secret_data(role, pair, ca, trust),
                               observed.issued_secrets.get(role))

    def _adopt_ca(self, action: a.AdoptCA, observed: ObservedCluster) -> None:
        """The kept CA Secret gets this cluster as owner (against the resourceVersion the pass read)."""
        assert self.secrets is not None, "no Secret client"
        existing = observed.issued_secrets.get("ca") or {}
        version = (existing.get("metadata") or {}).get("resourceVersion")
        self.secrets.patch(observed.cluster.namespace, action.secret_name, {"metadata": {
            "resourceVersion": version, "ownerReferences": [owner_reference(observed.cluster)]}})

    # --- spec.TLS.issued CA rotation (tls/ca_rotation.py)

    def _publish_ca_trust(self, action: a.PublishCATrust, observed: ObservedCluster) -> None:
        """Write only the CA file of the leaf Secrets of `action.roles`: the CAs trusted now."""
        trust = certs.trust_bundle(observed.issued_secrets.get("ca"))
        identity = certs.identity_of(observed)
        published = {c.ANNOTATION_TRUST_PUBLISHED_AT: format_timestamp(_now(observed))}
        for role in certs.LEAF_ROLES:
            if role in action.roles:
                self._patch_secret(observed, identity.secret_name(role), observed.issued_secrets.get(role),
                                   certs.encode({certs.LEAF_KEYS[role][2]: trust}), published)

    def _start_ca_rotation(self, action: a.StartCARotation, observed: ObservedCluster) -> None:
        """A new CA beside the one that signs, with the request acted on and the start time."""
        spec = observed.cluster.require_spec()
        assert spec.issued_tls is not None, "StartCARotation for a cluster without spec.TLS.issued"
        now = _now(observed)
        new = certs.issue_ca(certs.identity_of(observed), now, spec.issued_tls.ca_validity_seconds)
        name = certs.identity_of(observed).secret_name("ca")
        incoming = {NEXT_CA_CERT_KEY: new.cert_pem, NEXT_CA_KEY_KEY: new.key_pem}
        annotations = {c.ANNOTATION_CA_ROTATION_REQUEST: action.request or None,
                       c.ANNOTATION_CA_ROTATION_STARTED_AT: format_timestamp(now)}
        if action.recovered_ca:  # a lost CA Secret (tls/lost_ca.py): written again, the lost CA's certificate kept
            self._write_secret(observed, name, certs.encode({CA_CERT_KEY: action.recovered_ca.encode(), **incoming}),
                               observed.issued_secrets.get("ca"), annotations)
            return
        self._patch_secret(observed, name, observed.issued_secrets.get("ca"), certs.encode(incoming), annotations)

    def _reissue_from_new_ca(self, action: a.ReissueFromNewCA, observed: ObservedCluster) -> None:
        """The new CA signs from now on, the old one stays trusted (`previous-ca.crt`); then every
        leaf is issued from the new CA. The CA Secret first: stopped in between, the next pass
        finds leaves the signing CA did not sign and issues them (planning/tls.py, `certificates_due`)."""
        spec = observed.cluster.require_spec()
        assert spec.issued_tls is not None, "ReissueFromNewCA for a cluster without spec.TLS.issued"
        ca_secret = observed.issued_secrets.get("ca")
        new = certs.next_ca_from_secret(ca_secret)
        assert ca_secret is not None and new is not None, "ReissueFromNewCA without an incoming CA"
        old = certs.ca_from_secret(ca_secret)
        identity = certs.identity_of(observed)
        self._patch_secret(observed, identity.secret_name("ca"), ca_secret, {
            **certs.encode({CA_CERT_KEY: new.cert_pem, CA_KEY_KEY: new.key_pem, PREVIOUS_CA_CERT_KEY: old.cert_pem}),
            NEXT_CA_CERT_KEY: None, NEXT_CA_KEY_KEY: None,
        }, {})
        trust = new.cert_pem.strip() + b"\n" + old.cert_pem.strip() + b"\n"
        now = _now(observed)
        for role in certs.LEAF_ROLES:
            pair = certs.issue_leaf(new, identity, role, now, spec.issued_tls.validity_seconds)
            self._write_secret(observed, identity.secret_name(role), certs.secret_data(role, pair, new, trust),
                               observed.issued_secrets.get(role))

    def _drop_old_ca(self, action: a.DropOldCA, observed: ObservedCluster) -> None:
        """The old CA leaves the CA Secret, then the leaf Secrets' CA files (stopped in between,
        the next pass finds those CA files wrong and publishes them: planning/tls.py)."""
        ca_secret = observed.issued_secrets.get("ca")
        identity = certs.identity_of(observed)
        self._patch_secret(observed, identity.secret_name("ca"), ca_secret, {PREVIOUS_CA_CERT_KEY: None}, {})
        assert ca_secret is not None
        signing = certs.ca_from_secret(ca_secret).cert_pem
        published = {c.ANNOTATION_TRUST_PUBLISHED_AT: format_timestamp(_now(observed))}
        for role in certs.LEAF_ROLES:
            self._patch_secret(observed, identity.secret_name(role), observed.issued_secrets.get(role),
                               certs.encode({certs.LEAF_KEYS[role][2]: signing}), published)

    def _patch_secret(self, observed: ObservedCluster, name: str, existing: Mapping[str, Any] | None,
                      data: Mapping[str, str | None], annotations: Mapping[str, str | None]) -> None:
        """A merge patch of some keys and annotations of a Secret the pass read, against the
        resourceVersion it read (a concurrent writer is never overwritten blindly)."""
        assert self.secrets is not None, "no Secret client"
        if existing is None:
            raise NotFound(f"secret {observed.cluster.namespace}/{name} is gone; the next pass issues it")
        metadata: dict[str, Any] = {"resourceVersion": (existing.get("metadata") or {}).get("resourceVersion")}
        if annotations:
            metadata["annotations"] = dict(annotations)
        self.secrets.patch(observed.cluster.namespace, name, {"metadata": metadata, "data": dict(data)})

    def _write_secret(self, observed: ObservedCluster, name: str, data: dict[str, str],
                      existing: Mapping[str, Any] | None, annotations: Mapping[str, str | None] | None = None) -> None:
        assert self.secrets is not None, "no Secret client"
        cluster = observed.cluster
        if existing is None:
            body: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": data,
                                    "metadata": {"name": name, "namespace": cluster.namespace,
                                                 "labels": cluster_labels(cluster.name),
                                                 "ownerReferences": [owner_reference(cluster)]}}
            if annotations:
                body["metadata"]["annotations"] = {k: v for k, v in annotations.items() if v is not None}
            self.secrets.create(cluster.namespace, body)
            return
        metadata = existing.get("metadata") or {}
        stale = {key: None for key in existing.get("data") or {} if key not in data}  # wrong key names go
        written: dict[str, Any] = {"resourceVersion": metadata.get("resourceVersion")}
        if annotations:
            written["annotations"] = dict(annotations)
        self.secrets.patch(cluster.namespace, name, {"metadata": written, "data": {**stale, **data}})

    # --- spec.TLS.certManager (tls/cert_manager.py)

    def _apply_cert_manager_certificates(self, action: a.ApplyCertManagerCertificates,
                                         observed: ObservedCluster) -> None:
        """Create each Certificate of `action.roles` owned by the cluster, or merge-patch its
        managed spec fields (None removes one) against the resourceVersion the pass read."""
        assert self.certificates is not None, "no Certificate client"
        spec = observed.cluster.require_spec()
        assert spec.cert_manager_tls is not None, "ApplyCertManagerCertificates without spec.TLS.certManager"
        assert observed.cert_manager is not None, "ApplyCertManagerCertificates without its observation"
        cluster, identity = observed.cluster, certs.identity_of(observed)
        for role in certs.LEAF_ROLES:
            if role not in action.roles:
                continue
            existing = observed.cert_manager.certificates.get(role)
            if existing is None:
                self.certificates.create(cluster.namespace, cert_manager.certificate_manifest(
                    identity, role, spec.cert_manager_tls, owner_reference(cluster)))
                continue
            wanted = cert_manager.certificate_spec(identity, role, spec.cert_manager_tls)
            self.certificates.patch(cluster.namespace, cert_manager.certificate_name(cluster.name, role), {
                "metadata": {"resourceVersion": (existing.get("metadata") or {}).get("resourceVersion")},
                "spec": {key: wanted.get(key) for key in cert_manager.outdated_fields(existing, wanted)},
            })

    @staticmethod
    def _create(client: CachedClient, namespace: str, body: dict[str, Any]) -> None:
        try:
            client.create(namespace, body)
        except AlreadyExists:
            log.info("%s already exists; an earlier pass created it",
                     (body.get("metadata") or {}).get("name"))


# Each kind of action with an effect, and the method that carries it out.
_EFFECTS: dict[type[Any], Effect[ObservedCluster, None]] = {
    a.CreateServices: ActionExecutor._create_services,
    a.PublishNotReadyAddresses: ActionExecutor._publish_not_ready_addresses,
    a.UpdateClientSelector: ActionExecutor._update_client_selector,
    a.SetServing: ActionExecutor._set_serving,
    a.SetDisruptionBudget: ActionExecutor._set_disruption_budget,
    a.CreateSeedMember: ActionExecutor._create_seed_member,
    a.CreateRestoredMembers: ActionExecutor._create_restored_members,
    a.CreateRecoverySeed: ActionExecutor._create_recovery_seed,
    a.CreateMemberPod: ActionExecutor._create_existing_member_pod,
    a.DeletePod: ActionExecutor._delete_pod,
    a.UpgradeMember: ActionExecutor._upgrade_member,
    a.StopMember: ActionExecutor._stop_member,
    a.DeletePVC: ActionExecutor._delete_pvc,
    a.ClearLeavingMark: ActionExecutor._clear_leaving_mark,
    a.AddMember: ActionExecutor._add_member,
    a.PromoteMember: ActionExecutor._promote_member,
    a.RemoveMember: ActionExecutor._remove_member,
    a.MoveLeader: ActionExecutor._move_leader,
    a.Defragment: ActionExecutor._defragment,
    a.CompactHistory: ActionExecutor._compact_history,
    a.DisarmAlarm: ActionExecutor._disarm_alarm,
    a.IssueCertificates: ActionExecutor._issue_certificates,
    a.ApplyCertManagerCertificates: ActionExecutor._apply_cert_manager_certificates,
    a.PublishCATrust: ActionExecutor._publish_ca_trust,
    a.AdoptCA: ActionExecutor._adopt_ca,
    a.StartCARotation: ActionExecutor._start_ca_rotation,
    a.ReissueFromNewCA: ActionExecutor._reissue_from_new_ca,
    a.DropOldCA: ActionExecutor._drop_old_ca,
}


def defragment_may_go_on(error: ctl.EtcdctlError) -> bool:
    """Did the defragmentation end on our side only (no answer in time, the connection lost), so
    that etcd may still be rewriting the member's database? (Refused: it never started.)"""
    return isinstance(error, ctl.Unreachable) and "connection refused" not in error.message.lower()


def defragment_timeout_seconds(db_size_bytes: int) -> float:
    """How long a member's defragmentation may take: a minute, plus a second per
    DEFRAGMENT_BYTES_PER_SECOND of database (it rewrites the whole file)."""
    return DEFRAGMENT_BASE_TIMEOUT_SECONDS + db_size_bytes / DEFRAGMENT_BYTES_PER_SECOND


def _now(observed: ObservedCluster) -> datetime:
    """When the pass observed (what its decision was taken on), else now."""
    return observed.observed_at or datetime.now(UTC)


def _pod_older_than(observed: ObservedCluster, member: str, seconds: float) -> bool:
    pod = observed.pod(member)
    age = observed.pod_age_seconds(pod) if pod is not None else None
    return age is not None and age >= seconds


def _json_pointer_token(key: str) -> str:
    """`key` as one JSON Pointer reference token (RFC 6901): `~` and `/` escaped."""
    return key.replace("~", "~0").replace("/", "~1")
