"""One pass's observation, complete: the cluster's Kubernetes objects (from the watch caches), what
its checks look up by name (`Lookups`: colliding names, FailedMount events, the client service's
EndpointSlices), and etcd's own view (member list, endpoint status and health over etcd's HTTP
endpoints, `EtcdAccess.probe`: no process per question), as an `ObservedCluster`."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from etcd_common.api import constants as c
from etcd_common.api.cert_manager_tls import GROUP as CERT_MANAGER_GROUP
from etcd_common.api.cert_manager_tls import cert_manager_secret_names
from etcd_common.api.etcd_cluster import RECOVERY_FAILED, EtcdCluster, RecordedRecovery
from etcd_common.api.issued_tls import issued_secret_names
from etcd_common.etcd import etcdctl as ctl
from etcd_common.etcd import types as etcd_types
from etcd_common.etcd.access import EtcdAccess
from etcd_common.etcd.alarms import CORRUPT, NOSPACE
from etcd_common.etcd.tcp_probe import accepting_connections
from etcd_operator.adoption import services_hiding_unready_members
from etcd_operator.logs import cluster_logger
from etcd_operator.manifests import (
    client_selector_outdated,
    client_service_name,
    disruption_budget_name,
    ip_family_of_services,
    member_client_url,
    service_names,
)
from etcd_operator.member_start import SETTING_UP
from etcd_operator.observed import (
    MemberHealth,
    ObservedCertManager,
    ObservedCluster,
    ObservedDisruptionBudget,
    ObservedPod,
    parse_disruption_budget,
    parse_pod,
    parse_pvc,
    ready_endpoint_pods,
)
from etcd_operator.ownership import (
    NameProblem,
    cluster_name_conflict,
    disruption_budget_name_problem,
    is_being_deleted,
    owned_by,
    service_name_problem,
)
from etcd_operator.recovery_inputs import NodeReader, with_recovery_inputs
from etcd_operator.tls.transition import with_tls_step
from kube_adapter.errors import KubeError, NotFound
from kube_adapter.resources import ResourceClient
from operator_runtime.cached_client import CachedClient
from operator_runtime.worker import short_error

log = logging.getLogger(__name__)

# Observation must stay quick when a member is dead: each dead endpoint costs one command timeout.
PROBE_TIMEOUT_SECONDS = 2.0
# Endpoints that do not accept a TCP connection within this are not asked at all: a refused
# connection is known at once, a black-holed one costs this instead of PROBE_TIMEOUT_SECONDS.
CONNECT_TIMEOUT_SECONDS = 1.0
# A learner that serves clients answers its status in milliseconds; one that does not yet (a new
# etcd 3.6 member before it published itself) costs each pass this instead of PROBE_TIMEOUT_SECONDS.
LEARNER_PROBE_TIMEOUT_SECONDS = 0.5
# A member's /metrics (some 150 KB) asked for its view of its peers: only while voters fail the
# operator's health check; one that does not answer in time leaves its view unknown.
PEER_VIEW_TIMEOUT_SECONDS = 1.0
NOT_LISTENING = "no member pod accepts connections on its client port"
MOUNT_CHECK_AFTER_SECONDS = 5.0  # a pod setting up volumes longer than this: ask for FailedMount events
SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # on every EndpointSlice: the Service it serves

Connectable = Callable[[Sequence[str]], set[str]]  # URLs -> those accepting a connection now


def _accepting(urls: Sequence[str]) -> set[str]:
    return accepting_connections(urls, CONNECT_TIMEOUT_SECONDS)


class Lookups(Protocol):
    """What an observation reads beyond the objects the cluster owns, each only while a check
    needs it: a Service missing from the watch cache, say, is asked about by name."""

    def neighbours(self, namespace: str) -> Sequence[Mapping[str, Any]]:
        """The EtcdClusters of `namespace` (this one among them)."""
        ...

    def service(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The Service of that name, ours or anyone's (None: there is none)."""
        ...

    def disruption_budget(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The PodDisruptionBudget of that name, ours or anyone's (None: there is none)."""
        ...

    def failed_mount_events(self, namespace: str, pod_uid: str) -> Sequence[Mapping[str, Any]]:
        """The FailedMount events the kubelet recorded about that pod, oldest first."""
        ...

    def endpoint_slices(self, namespace: str, service: str) -> Sequence[Mapping[str, Any]]:
        """The EndpointSlices of that Service."""
        ...

    def secret(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The Secret of that name, ours or anyone's (None: there is none)."""
        ...

    def backups(self, namespace: str) -> Sequence[Mapping[str, Any]]:
        """The EtcdBackups of `namespace` (raises KubeError when they cannot be listed)."""
        ...

    def certificate(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The cert-manager Certificate of that name (None: there is none; raises KubeError
        when it cannot be read)."""
        ...

    def issuer(self, namespace: str, kind: str, name: str) -> Mapping[str, Any] | None:
        """The cert-manager Issuer (in `namespace`) or ClusterIssuer of that name (None: there
        is none; raises KubeError when it cannot be read)."""
        ...


@dataclass(frozen=True)
class KubeSources:
    """The Kubernetes side of an observation: the watch caches of EtcdClusters and of the kinds a
    cluster owns, and the `Lookups` by name (the cache first, then the API)."""

    clusters: CachedClient
    pods: CachedClient
    services: CachedClient
    pvcs: CachedClient
    pdbs: CachedClient
    events: ResourceClient
    slices: ResourceClient
    secrets: ResourceClient | None = None  # spec.TLS.issued: its Secrets, read by name (not watched)
    etcd_backups: ResourceClient | None = None  # listed only under a quorum loss with recovery asked for
    # spec.TLS.certManager: its Certificates and issuer, read by name (not watched).
    certificates: ResourceClient | None = None
    issuers: ResourceClient | None = None
    cluster_issuers: ResourceClient | None = None
    nodes: ResourceClient | None = None  # read by name only while a quorum-loss recovery may start

    def synced(self) -> bool:
        """Has every watch of the owned kinds listed once? Before that, a missing pod may just be
        unlisted."""
        return all(kind.is_synced() for kind in (self.pods, self.services, self.pvcs, self.pdbs))

    def neighbours(self, namespace: str) -> list[dict[str, Any]]:
        return self.clusters.select(namespace, {})

    def service(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.services.find(namespace, name)

    def disruption_budget(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.pdbs.find(namespace, name)

    def failed_mount_events(self, namespace: str, pod_uid: str) -> list[dict[str, Any]]:
        found = self.events.list(namespace, field_selector=f"involvedObject.uid={pod_uid},reason=FailedMount")
        return sorted(found, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))

    def endpoint_slices(self, namespace: str, service: str) -> list[dict[str, Any]]:
        return self.slices.list(namespace, label_selector=f"{SERVICE_NAME_LABEL}={service}")

    def secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        if self.secrets is None:
            return None
        try:
            return self.secrets.get(namespace, name)
        except NotFound:
            return None

    def backups(self, namespace: str) -> list[dict[str, Any]]:
        return [] if self.etcd_backups is None else self.etcd_backups.list(namespace)

    def certificate(self, namespace: str, name: str) -> dict[str, Any] | None:
        return _get_or_none(self.certificates, namespace, name)

    def issuer(self, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
        return _get_or_none(self.cluster_issuers if kind == "ClusterIssuer" else self.issuers, namespace, name)

    def node(self, name: str) -> dict[str, Any] | None:
        return _get_or_none(self.nodes, "", name)


def _get_or_none(client: ResourceClient | None, namespace: str, name: str) -> dict[str, Any] | None:
    if client is None:
        return None
    try:
        return client.get(namespace, name)
    except NotFound:
        return None


def observe(cluster: EtcdCluster, kube: KubeSources, etcd: EtcdAccess) -> ObservedCluster:
    """One pass's complete observation of `cluster`: the objects it owns (their owner reference
    carries its UID) from the watch caches, what its checks look up, and etcd's own view."""
    def owned(kind: CachedClient) -> list[dict[str, Any]]:
        selector = {c.LABEL_CLUSTER: cluster.name, c.LABEL_APP: c.LABEL_APP_VALUE}
        return owned_by(kind.select(cluster.namespace, selector), cluster.uid)

    return observe_cluster(cluster, pods=owned(kube.pods), services=owned(kube.services), pvcs=owned(kube.pvcs),
                           budgets=owned(kube.pdbs), etcd=etcd, lookups=kube,
                           read_node=kube.node if kube.nodes is not None else None)


def observe_cluster(
    cluster: EtcdCluster,
    *,
    pods: Sequence[dict[str, Any]],
    services: Sequence[dict[str, Any]],
    pvcs: Sequence[dict[str, Any]],
    etcd: EtcdAccess,
    budgets: Sequence[dict[str, Any]] = (),
    lookups: Lookups | None = None,
    now: datetime | None = None,
    connectable: Connectable = _accepting,
    read_node: NodeReader | None = None,
) -> ObservedCluster:
    """The observation from the objects the cluster owns (API dicts), `lookups` (None: nothing is
    looked up, so no name problem, mount failure or client endpoint is seen) and etcd; `read_node`:
    whether a node exists (None: no node is known gone; recovery_inputs.py)."""
    kube = _kubernetes_side(cluster, pods=pods, services=services, pvcs=pvcs, budgets=budgets, lookups=lookups,
                            now=now or datetime.now(UTC))
    if cluster.spec is None or cluster.paused:
        return kube
    observed = _etcd_side(kube, etcd, connectable)
    return with_recovery_inputs(observed, lookups, read_node) if lookups is not None else observed


# ---------------------------------------------------------------------------------------------
# Kubernetes side


def _kubernetes_side(
    cluster: EtcdCluster, *, pods: Sequence[dict[str, Any]], services: Sequence[dict[str, Any]],
    pvcs: Sequence[dict[str, Any]], budgets: Sequence[dict[str, Any]], lookups: Lookups | None, now: datetime,
) -> ObservedCluster:
    observed_pods = tuple(sorted((parse_pod(p) for p in pods), key=lambda p: p.name))
    live = tuple(pod for pod in observed_pods if not pod.deleting)
    # A move to or off TLS reaches members, reads Secrets and builds pods as the pods say, not the
    # spec (tls/transition.py).
    cluster = with_tls_step(cluster, live)
    budget = parse_disruption_budget(budgets[0]) if budgets else None
    return ObservedCluster(
        cluster=cluster,
        pods=observed_pods,
        pvcs=tuple(parse_pvc(p) for p in pvcs),
        services=frozenset(str((s.get("metadata") or {}).get("name")) for s in services),
        services_to_fix=services_hiding_unready_members(cluster.name, services),
        client_selector_outdated=any(
            (s.get("metadata") or {}).get("name") == client_service_name(cluster.name) and client_selector_outdated(s)
            for s in services),
        observed_at=now,
        ip_family=ip_family_of_services(services),
        disruption_budget=budget,
        name_problem=_name_problem(cluster, services, budget, lookups) if lookups is not None else None,
        mount_failures=_mount_failures(cluster, live, now, lookups) if lookups is not None else {},
        client_endpoints=_client_endpoints(cluster, live, lookups) if lookups is not None else None,
        issued_secrets=_issued_secrets(cluster, lookups) if lookups is not None else {},
        static_secrets=_static_secrets(cluster, lookups) if lookups is not None else {},
        cert_manager=_cert_manager(cluster, lookups) if lookups is not None else None,
    )


def _cert_manager(cluster: EtcdCluster, lookups: Lookups) -> ObservedCertManager | None:
    """spec.TLS.certManager: its three Certificates, and whether the issuer it names exists
    (asked only of cert-manager's own issuer kinds)."""
    if cluster.spec is None or cluster.spec.cert_manager_tls is None or cluster.paused:
        return None
    names = cert_manager_secret_names(cluster.name)
    by_role = {"peer": names.peer, "server": names.server, "operator": names.operator}
    try:
        certificates = {role: lookups.certificate(cluster.namespace, name) for role, name in by_role.items()}
    except KubeError as error:
        return ObservedCertManager({}, None, f"Certificates could not be read: {short_error(error)}")
    ref = cluster.spec.cert_manager_tls.issuer
    if ref.group != CERT_MANAGER_GROUP:
        return ObservedCertManager(certificates, None)
    try:
        return ObservedCertManager(certificates, lookups.issuer(cluster.namespace, ref.kind, ref.name) is not None)
    except KubeError as error:
        # Not told (say, a namespaced operator may not read ClusterIssuers): cert-manager's own
        # Ready condition on the Certificates says what is wrong, if anything.
        cluster_logger(cluster.namespace, cluster.name).info(
            "cannot tell whether %s %s exists: %s", ref.kind, ref.name, short_error(error))
        return ObservedCertManager(certificates, None)


def _issued_secrets(cluster: EtcdCluster, lookups: Lookups) -> dict[str, Mapping[str, Any] | None]:
    """spec.TLS.issued: the four Secrets by role (tls/certificates.py), read by name (the operator
    may only `get` secrets: no watch)."""
    if cluster.spec is None or cluster.spec.issued_tls is None or cluster.paused:
        return {}
    names = issued_secret_names(cluster.name)
    by_role = {"ca": names.ca, "peer": names.peer, "server": names.server, "operator": names.operator}
    return {role: lookups.secret(cluster.namespace, name) for role, name in by_role.items()}


def _linearizable_responder(base: ObservedCluster, answer: etcd_types.MemberList) -> str | None:
    """The member that answered the member list, if it honours the linearizable flag the probe
    sends (etcd 3.5+, running the version its pod says: not one whose in-place restart onto a new
    image is still pending); None when that cannot be told."""
    responder = answer.responder
    pod = base.pod(responder.member_name) if responder is not None else None
    if pod is None or pod.etcd_version is None or pod.restart_pending:
        return None
    return pod.name if (pod.etcd_version.major, pod.etcd_version.minor) >= (3, 5) else None


def _static_secrets(cluster: EtcdCluster, lookups: Lookups) -> dict[str, Mapping[str, Any] | None]:
    """spec.TLS.static: the user's Secrets by role (those the spec names), read by name."""
    if cluster.spec is None or cluster.spec.issued_tls is not None or cluster.paused:
        return {}
    tls = cluster.spec.tls
    by_role = {"peer": tls.member_peer_secret, "server": tls.member_server_secret, "operator": tls.operator_secret}
    return {role: lookups.secret(cluster.namespace, name) for role, name in by_role.items() if name}


def _name_problem(cluster: EtcdCluster, owned_services: Sequence[Mapping[str, Any]],
                  budget: ObservedDisruptionBudget | None, lookups: Lookups) -> NameProblem | None:
    """A colliding EtcdCluster name, or a Service or PodDisruptionBudget with one of our names
    that is not ours."""
    neighbours = lookups.neighbours(cluster.namespace)
    this = next((n for n in neighbours if (n.get("metadata") or {}).get("name") == cluster.name), None)
    conflict = cluster_name_conflict(this, neighbours) if this is not None else None
    if conflict is not None:
        return conflict
    ours = {str((s.get("metadata") or {}).get("name")) for s in owned_services}
    foreign: dict[str, Mapping[str, Any]] = {}
    for service_name in service_names(cluster.name):
        if service_name in ours:
            continue
        # The watch sees only labelled services: ask about the name itself (only while the
        # service is missing, so a running cluster makes no extra request).
        existing = lookups.service(cluster.namespace, service_name)
        if existing is not None and not is_being_deleted(existing):
            foreign[service_name] = existing
    problem = service_name_problem(cluster.name, foreign)
    if problem is not None or budget is not None:
        return problem
    other = lookups.disruption_budget(cluster.namespace, disruption_budget_name(cluster.name))
    if other is None:
        return None
    return disruption_budget_name_problem(cluster.name, None if is_being_deleted(other) else other)


def _mount_failures(cluster: EtcdCluster, live_pods: Sequence[ObservedPod], now: datetime,
                    lookups: Lookups) -> dict[str, str]:
    """Latest FailedMount message of each member pod still setting up its volumes after
    MOUNT_CHECK_AFTER_SECONDS (the kubelet reports those only as events)."""
    failures: dict[str, str] = {}
    for pod in live_pods:
        age = (now - pod.created_at).total_seconds() if pod.created_at is not None else None
        if (pod.phase != "Pending" or not pod.uid or pod.waiting_reason not in (None, *SETTING_UP)
                or age is None or age < MOUNT_CHECK_AFTER_SECONDS or pod.restart_count):
            continue
        events = lookups.failed_mount_events(cluster.namespace, pod.uid)
        if events:
            failures[pod.name] = str(events[-1].get("message") or "")
    return failures


def _client_endpoints(cluster: EtcdCluster, live_pods: Sequence[ObservedPod],
                      lookups: Lookups) -> frozenset[str] | None:
    """Pods the client service still sends clients to, looked up only while a member pod is
    drained (planning/draining.py); None when not looked up, when the lookup failed or found no
    EndpointSlice at all (no controller makes them: the planner then goes by pod readiness, which
    is what EndpointSlices are made from)."""
    if all(pod.serving for pod in live_pods):
        return None
    try:
        slices = lookups.endpoint_slices(cluster.namespace, client_service_name(cluster.name))
        return ready_endpoint_pods(slices) if slices else None
    except KubeError as e:
        cluster_logger(cluster.namespace, cluster.name).warning(
            "cannot read the client service's EndpointSlices: %s", short_error(e))
        return None


# ---------------------------------------------------------------------------------------------
# etcd side


def _etcd_side(base: ObservedCluster, etcd: EtcdAccess, connectable: Connectable) -> ObservedCluster:
    """`base` (the Kubernetes side) with what etcd says: members, their health and status."""
    cluster = base.cluster
    # Ask every member whose pod has an address and whose etcd accepts connections; any one that
    # answers gives the member list. A member whose pod is gone, terminating or not listening is
    # left out of every probe (asking it would only cost a timeout), so it counts as unhealthy.
    # Ready pods first: `member list` goes to the first that answers, and a member still joining
    # (a learner refuses it; a new one may not serve yet) would cost a refusal or a timeout.
    recovery = cluster.recorded.recovery
    candidates = {member_client_url(cluster, pod.member_name): pod.member_name
                  for pod in sorted(base.pods, key=lambda p: (not p.ready, p.name))
                  if pod.ip and not pod.deleting and not pod.terminal
                  and _asked_during_recovery(recovery, pod.member_name)}
    if not candidates:
        return base
    started = time.monotonic()
    listening = connectable(list(candidates))
    reachable = {name: url for url, name in candidates.items() if url in listening}
    if not reachable:
        return replace(base, member_list_error=NOT_LISTENING)
    try:
        answer = etcd.probe(cluster, list(reachable.values()), timeout_seconds=PROBE_TIMEOUT_SECONDS).cluster_members(
            _answers_as_its_pod({url: name for name, url in reachable.items()}))
    except (ctl.EtcdctlError, ValueError) as e:
        # etcd 3.5+ answers `member list` only with quorum. The members that still answer
        # `endpoint status` tell whether quorum is lost (no leader) or etcd is just unreachable.
        statuses, local_lists = _members_of_their_pods(cluster, _endpoint_status(cluster, reachable, etcd),
                                                       reachable, etcd)
        _log_timing(cluster, started, len(reachable), "no member list")
        observed = replace(base, member_list_error=str(e), endpoint_status=statuses)
        return replace(observed, local_members=_local_members(observed, local_lists))
    # The member list defines the cluster: its answer's cluster ID. Health and status answers for
    # another ID (a reused name or address reaching another etcd cluster) are ignored.
    observed_members = answer.members
    health, statuses, health_error = _member_health(
        cluster, [m for m in observed_members if m.member_name in reachable], etcd, answer.cluster_id)
    _log_timing(cluster, started, len(reachable), f"{len(observed_members)} member(s), {len(health)} health-checked")
    observed = replace(base, members=observed_members, health=health, endpoint_status=statuses,
                       health_error=health_error, cluster_id=answer.cluster_id,
                       quorum_confirmed_by=_linearizable_responder(base, answer))
    if health_error is None and observed.voting_members and not observed.has_quorum:
        # No quorum (etcd 3.4 lists members without one): the status of every reachable voter,
        # so a quorum-loss recovery knows who answers and who is furthest ahead.
        silent = {m.member_name: member_client_url(cluster, m.member_name) for m in observed.voting_members
                  if m.started and m.member_name in reachable and m.member_name not in statuses}
        if silent:
            statuses = {**statuses, **_endpoint_status(cluster, silent, etcd, LEARNER_PROBE_TIMEOUT_SECONDS,
                                                       failure_level=logging.DEBUG, cluster_id=answer.cluster_id)}
            observed = replace(observed, endpoint_status=statuses)
    return _alarms(_peer_views(observed, etcd), etcd)


def _peer_views(observed: ObservedCluster, etcd: EtcdAccess) -> ObservedCluster:
    """While started voters fail the operator's health check, or started learners do not answer
    (only then: a healthy pass scrapes nothing), which members each healthy voter has active peer
    streams to (its `/metrics`): whether those members are cut off from the operator only, or from
    their peers. A voter whose answer fails, or comes from another member than its own (a reused
    address), is left out."""
    healthy = observed.healthy_voters
    unheard = [*observed.unhealthy_voters,
               *(m for m in observed.learners if m.member_name not in observed.endpoint_status)]
    if observed.health_error is not None or not healthy or not any(m.started for m in unheard):
        return observed
    cluster = observed.cluster
    urls = [member_client_url(cluster, m.member_name) for m in healthy]
    try:
        answers = etcd.probe(cluster, urls, timeout_seconds=PEER_VIEW_TIMEOUT_SECONDS).peer_views()
    except (ctl.EtcdctlError, ValueError) as e:
        log.debug("%s/%s: no peer views: %s", cluster.namespace, cluster.name, e)
        return observed
    views: dict[str, frozenset[int]] = {}
    for member, answer in zip(healthy, answers, strict=True):
        if isinstance(answer, ctl.EtcdctlError) or answer.member_id not in (member.id, 0):
            log.debug("%s/%s: no peer view from %s: %s", cluster.namespace, cluster.name, member.member_name,
                      answer.message if isinstance(answer, ctl.EtcdctlError) else "answered by another member")
            continue
        views[member.member_name] = answer.connected
    return replace(observed, peer_views=views)


def _asked_during_recovery(recovery: RecordedRecovery | None, member: str) -> bool:
    """A quorum-loss recovery in progress: the seed alone is the cluster (the survivor may still
    answer, even list the old members on etcd 3.4). A failed one: its seed (if still up) never is."""
    if recovery is None:
        return True
    if recovery.in_progress:
        return member == recovery.seed_member
    return recovery.phase != RECOVERY_FAILED or member != recovery.seed_member


def _local_members(observed: ObservedCluster,
                   local_lists: Mapping[str, etcd_types.MemberList]) -> tuple[etcd_types.Member, ...] | None:
    """Under a quorum loss (members answer, none knows a leader): the membership as the member
    furthest ahead sees it locally (serializable; read with its status check), or None."""
    leaderless = observed.leaderless_answers
    if not leaderless:
        return None
    ahead = max(leaderless, key=lambda name: (observed.endpoint_status[name].raft_index,
                                              observed.endpoint_status[name].revision, name))
    answer = local_lists.get(ahead)
    return answer.members if answer is not None else None


def _answers_as_its_pod(pods_by_url: Mapping[str, str]) -> Callable[[str, etcd_types.MemberList], str | None]:
    """A member list is this cluster's only if the member that answered it is the one of the pod
    asked (a member's name is its pod's): an address or DNS answer that outlived its pod may reach
    another etcd cluster's member, whose list would otherwise define this cluster."""
    def check(endpoint: str, answer: etcd_types.MemberList) -> str | None:
        return _not_its_pod(pods_by_url.get(endpoint), answer)
    return check


def _not_its_pod(pod: str | None, answer: etcd_types.MemberList) -> str | None:
    """Why `answer` is not from the member of `pod` (None: it is, or the answer does not say)."""
    if pod is None or not answer.member_id:
        return None
    responder = answer.responder
    if responder is not None and responder.member_name == pod:
        return None
    who = responder.member_name if responder is not None else etcd_types.format_member_id(answer.member_id)
    return (f"answered by member {who} of etcd cluster {etcd_types.format_member_id(answer.cluster_id)}, not by pod "
            f"{pod}'s member (a reused name or address); ignored")


def _members_of_their_pods(
    cluster: EtcdCluster, statuses: dict[str, etcd_types.EndpointStatus], reachable: dict[str, str], etcd: EtcdAccess,
) -> tuple[dict[str, etcd_types.EndpointStatus], dict[str, etcd_types.MemberList]]:
    """Without a member list (so without a cluster ID to check answers against), the statuses of
    members whose own member list (local: served without quorum) names them as their pod's member
    and that list the same member that answered the status, with those local lists; the rest may
    be another cluster's (a reused name or address) and must not make this one look leaderless."""
    if not statuses:
        return statuses, {}
    urls = [reachable[name] for name in sorted(statuses)]
    try:
        answers = etcd.probe(cluster, urls, timeout_seconds=PROBE_TIMEOUT_SECONDS).local_member_lists()
    except (ctl.EtcdctlError, ValueError) as e:
        log.warning("%s/%s: cannot tell which members answer: %s", cluster.namespace, cluster.name, e)
        return {}, {}
    kept: dict[str, etcd_types.EndpointStatus] = {}
    lists: dict[str, etcd_types.MemberList] = {}
    for name, answer in zip(sorted(statuses), answers, strict=True):
        status = statuses[name]
        problem = (answer.message if isinstance(answer, ctl.EtcdctlError)
                   else _not_its_pod(name, answer) or _other_member(status, answer))
        if problem is None:
            assert not isinstance(answer, ctl.EtcdctlError)
            kept[name], lists[name] = status, answer
        else:
            log.warning("%s/%s: status of %s left out: %s", cluster.namespace, cluster.name, name, problem)
    return kept, lists


def _other_member(status: etcd_types.EndpointStatus, answer: etcd_types.MemberList) -> str | None:
    if not answer.member_id or answer.responder is None:
        return "its member list does not say which member answers"
    if status.member_id != answer.member_id or (status.cluster_id and status.cluster_id != answer.cluster_id):
        return "its status and its member list come from different members"
    return None


def _alarms(observed: ObservedCluster, etcd: EtcdAccess) -> ObservedCluster:
    """The raised alarms the members report and, under NOSPACE (no write can move the revision),
    whether history is compacted up to the current revision: the first step of the recovery."""
    alarms = tuple(sorted({alarm for status in observed.endpoint_status.values() for alarm in status.alarms}))
    if not alarms:
        return observed
    observed = replace(observed, alarms=alarms)
    if observed.alarmed(CORRUPT):
        observed = _hash_kvs(observed, etcd)
    if not observed.alarmed(NOSPACE) or observed.revision == 0:
        return observed
    newest = max(observed.endpoint_status.items(), key=lambda item: item[1].revision)[0]
    cluster = observed.cluster
    try:
        compacted = etcd.maintenance(cluster).compacted_through(member_client_url(cluster, newest), observed.revision)
    except ctl.EtcdctlError as e:
        log.warning("%s/%s: cannot tell whether history is compacted: %s", cluster.namespace, cluster.name, e)
        return observed
    return replace(observed, history_compacted=compacted)


def _hash_kvs(observed: ObservedCluster, etcd: EtcdAccess) -> ObservedCluster:
    """Under CORRUPT only (a normal pass asks nothing more): every voting member's keyspace hash
    at one revision, the lowest any voter reports (every voter has it; writes are refused, so it
    stays put), for the planner to find which members disagree with a majority."""
    voters = [m for m in observed.voting_members if m.member_name in observed.endpoint_status]
    revision = min((observed.endpoint_status[m.member_name].revision for m in voters), default=0)
    if revision <= 0:
        return observed
    cluster = observed.cluster
    urls = [member_client_url(cluster, m.member_name) for m in voters]
    try:
        answers = etcd.probe(cluster, urls, timeout_seconds=PROBE_TIMEOUT_SECONDS).hash_kvs(revision, observed.cluster_id)
    except (ctl.EtcdctlError, ValueError) as e:
        log.warning("%s/%s: no keyspace hashes: %s", cluster.namespace, cluster.name, e)
        return observed
    hashes: dict[str, etcd_types.HashKV] = {}
    for member, answer in zip(voters, answers, strict=True):
        if isinstance(answer, ctl.EtcdctlError):
            log.warning("%s/%s: no keyspace hash from %s: %s", cluster.namespace, cluster.name, member.member_name,
                        answer.message)
        else:
            hashes[member.member_name] = answer
    return replace(observed, hash_kvs=hashes, hash_kv_revision=revision)


def _log_timing(cluster: EtcdCluster, started: float, asked: int, outcome: str) -> None:
    """Per-pass timing of the etcd side (DEBUG): where a slow pass spends its time."""
    if log.isEnabledFor(logging.DEBUG):
        log.debug("%s/%s: etcd observed in %.3fs (%d endpoint(s) asked): %s", cluster.namespace, cluster.name,
                  time.monotonic() - started, asked, outcome)


def _member_health(
    cluster: EtcdCluster, members: Sequence[etcd_types.Member], etcd: EtcdAccess, cluster_id: int = 0,
) -> tuple[dict[str, MemberHealth], dict[str, etcd_types.EndpointStatus], str | None]:
    """Health of voting members and status of the healthy ones and of learners, each asked at
    its own URL, and why the health call failed, if it did (then health is unknown, not bad).
    An answer for another cluster than `cluster_id` counts as none (unhealthy, no status).

    Learners are left out of the health check (they refuse its linearizable read) and asked
    their status with a short timeout: one that serves clients answers in milliseconds, and a new
    etcd 3.6 learner may serve none for seconds (until it has published itself), which with the
    usual timeout would stall every pass while it joins.
    """
    by_endpoint = {member_client_url(cluster, m.member_name): m for m in members if m.started}
    if not by_endpoint:
        return {}, {}, None
    health: dict[str, MemberHealth] = {}
    voters = [url for url, m in by_endpoint.items() if not m.is_learner]
    if voters:
        try:
            for result in etcd.probe(cluster, voters, timeout_seconds=PROBE_TIMEOUT_SECONDS).endpoint_health(cluster_id):
                member = by_endpoint.get(result.endpoint)
                if member:
                    health[member.member_name] = MemberHealth(healthy=result.healthy, error=result.error or None)
        except ctl.EtcdctlError as e:
            log.warning("%s/%s: health check failed: %s", cluster.namespace, cluster.name, e)
            return health, {}, str(e) or type(e).__name__
    # Status of healthy voters only: a voter that just failed its health check (say, its pod
    # was deleted mid-pass) would make this call wait out a second timeout.
    asked = {m.member_name: url for url, m in by_endpoint.items()
             if not m.is_learner and m.member_name in health and health[m.member_name].healthy}
    statuses = _endpoint_status(cluster, asked, etcd, cluster_id=cluster_id) if asked else {}
    # A leader the others still name but that failed its health check (stuck): whether it still
    # answers `endpoint status` tells the planner whether it can serve move-leader.
    leader_ids = {status.leader_id for status in statuses.values() if status.leader_id}
    stuck_leaders = {m.member_name: url for url, m in by_endpoint.items()
                     if m.id in leader_ids and not m.is_learner and m.member_name not in asked}
    if stuck_leaders:
        statuses = {**statuses, **_endpoint_status(cluster, stuck_leaders, etcd, LEARNER_PROBE_TIMEOUT_SECONDS,
                                                   failure_level=logging.DEBUG, cluster_id=cluster_id)}
    learners = {m.member_name: url for url, m in by_endpoint.items() if m.is_learner}
    if learners:
        statuses = {**statuses, **_endpoint_status(cluster, learners, etcd, LEARNER_PROBE_TIMEOUT_SECONDS,
                                                   failure_level=logging.DEBUG, cluster_id=cluster_id)}
    return health, statuses, None


def _endpoint_status(cluster: EtcdCluster, reachable: dict[str, str], etcd: EtcdAccess,
                     timeout_seconds: float = PROBE_TIMEOUT_SECONDS,
                     failure_level: int = logging.WARNING, cluster_id: int = 0) -> dict[str, etcd_types.EndpointStatus]:
    """`endpoint status` of the reachable members (name -> client URL), by member name
    (a joining learner that answers nothing yet is expected: `failure_level` DEBUG); those that
    answer for another cluster than `cluster_id` (0: any) are left out."""
    by_endpoint = {url: name for name, url in reachable.items()}
    statuses: dict[str, etcd_types.EndpointStatus] = {}
    try:
        probe = etcd.probe(cluster, list(by_endpoint), timeout_seconds=timeout_seconds)
        for status in probe.endpoint_status(cluster_id):
            name = by_endpoint.get(status.endpoint)
            if name and status.reachable:
                statuses[name] = status
    except (ctl.EtcdctlError, ValueError) as e:
        log.log(failure_level, "%s/%s: endpoint status failed: %s", cluster.namespace, cluster.name, e)
    return statuses

