"""What one supervisor pass observed: the cluster's pods, volumes and services from Kubernetes,
and etcd's own view (member list, per-member health and status). A frozen snapshot, rebuilt from
scratch every pass; the planner and the status writer read only this.

Members, health and endpoint status are matched to pods by *member name*, which is also the pod
name (CoreOS convention). A member that was added but never started has no name in etcd's list;
its name is recovered from its peer URL `<scheme>://<member>.<cluster>.<ns>.svc...:2380`
(`Member.member_name`: members are the etcdctl wrapper's `Member`s as etcd listed them).
"""
from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from etcd_common.api import constants as c
from etcd_common.api.etcd_backup import EtcdBackup
from etcd_common.api.etcd_cluster import EtcdCluster
from etcd_common.api.versions import EtcdVersion
from etcd_common.etcd.alarms import Alarm
from etcd_common.etcd.types import EndpointStatus, HashKV, Member
from etcd_operator.ownership import NameProblem

# Re-exported: the planner and status read them from here.
from operator_runtime.kube_time import as_utc as as_utc
from operator_runtime.kube_time import format_timestamp as format_timestamp
from operator_runtime.kube_time import parse_timestamp as parse_timestamp

JsonDict = Mapping[str, Any]

IMAGE_PULL_FAILURE_REASONS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
)
TERMINAL_POD_PHASES = frozenset({"Failed", "Succeeded"})
# A member pod being deleted counts as shutting down until this long past the end of its grace
# period (its deletionTimestamp); after that (its node is gone, say) it is stuck (planning/).
STOP_MARGIN_SECONDS = 5.0


def new_name_suffix() -> str:
    """Random `[a-z0-9]{5}` for a new member name; the supervisor draws one per pass."""
    return "".join(secrets.choice(c.NAME_SUFFIX_ALPHABET) for _ in range(c.NAME_SUFFIX_LENGTH))


# ---------------------------------------------------------------------------------------------
# Kubernetes side


@dataclass(frozen=True)
class WaitingInitContainer:
    """An init container (a seed pod's restore-fetch, restore-snapshot, ...) that waits for a reason
    other than its turn: ErrImagePull, CrashLoopBackOff, ..."""

    name: str
    reason: str
    message: str = ""
    last_exit_code: int | None = None
    last_termination_message: str = ""


def _etcd_version(annotations: JsonDict, image: Any) -> EtcdVersion | None:
    """From the operator's annotation, else the image tag."""
    version_text = annotations.get(c.ANNOTATION_ETCD_VERSION)
    etcd_version = EtcdVersion.parse(version_text) if isinstance(version_text, str) else None
    if etcd_version is None and isinstance(image, str):
        etcd_version = version_from_image(image)
    return etcd_version


TLS_MODE_PLAIN = "plain"
TLS_MODE_BRIDGE = "bridge"  # TLS files, peers on http, clients on http and https
TLS_MODE_TLS = "tls"


@dataclass(frozen=True)
class ObservedPod:
    name: str
    member_name: str
    phase: str = "Pending"
    ready: bool = False
    deleting: bool = False
    ip: str | None = None
    created_at: datetime | None = None
    image: str | None = None
    etcd_version: EtcdVersion | None = None
    # "new" for a seed pod, "existing" for a pod that joined a running cluster; None if unknown.
    initial_cluster_state: str | None = None
    pod_policy_hash: str | None = None
    # spec.TLS.issued: fingerprint of the CA bundle its Secrets held at its creation (None: unknown).
    trusted_ca: str | None = None
    restart_count: int = 0
    waiting_reason: str | None = None
    waiting_message: str | None = None
    last_termination_reason: str | None = None
    last_termination_message: str | None = None
    last_exit_code: int | None = None
    uid: str = ""
    # When its Ready condition last turned False (None while ready, or never reported).
    unready_since: datetime | None = None
    # Labelled serving: the client service may send it clients (see manifests.client_service_selector).
    serving: bool = True
    # When the operator drained it (removed the serving label), if it did.
    drained_at: datetime | None = None
    # The scheduler's message while it finds no node for the pod (PodScheduled False, Unschedulable).
    unschedulable_message: str | None = None
    # When the operator last defragmented its member, and when a defragmentation last failed.
    defragmented_at: datetime | None = None
    defragment_failed_at: datetime | None = None
    # The first init container waiting for a reason other than its turn, if any.
    waiting_init: WaitingInitContainer | None = None
    # metadata.deletionTimestamp: the end of its grace period once it is being deleted.
    deletion_deadline: datetime | None = None
    # Position of the etcd container in spec.containers (an in-place image change patches it).
    etcd_container_index: int = 0
    # An in-place image change (UpgradeMember in place): when, and the restart count before it.
    restarted_at: datetime | None = None
    restarted_from_count: int | None = None
    # The secrets its volumes mount (TLS: which certificates it runs with).
    secret_volumes: frozenset[str] = frozenset()
    # Started with state `existing` and only itself in --initial-cluster: a member restarting on
    # its volume, which etcd lets start only on the data it finds there (planning/member_pods.py).
    rejoins_on_data: bool = False
    # metadata.finalizers and spec.nodeName: what may hold a deleted pod (a finalizer, a dead node).
    finalizers: tuple[str, ...] = ()
    node_name: str | None = None
    # How its etcd was started (tls/transition.py): TLS_MODE_PLAIN, TLS_MODE_BRIDGE or TLS_MODE_TLS.
    tls_mode: str = TLS_MODE_PLAIN
    # Its `--initial-cluster` as (name, peer URL) pairs, in the order given (a restored cluster
    # bootstrapping all at once: member i restores staged claim i; planning/bootstrap.py).
    initial_cluster: tuple[tuple[str, str], ...] = ()

    @property
    def terminal(self) -> bool:
        """Failed or Succeeded: its containers will not run again (e.g. evicted)."""
        return self.phase in TERMINAL_POD_PHASES

    @property
    def image_pull_failed(self) -> bool:
        return self.waiting_reason in IMAGE_PULL_FAILURE_REASONS

    @property
    def unschedulable(self) -> bool:
        """Pending with no node that fits it (the scheduler said so)."""
        return self.unschedulable_message is not None and self.phase == "Pending"

    @property
    def restart_pending(self) -> bool:
        """The operator changed its image in place and the kubelet has not restarted etcd yet
        (an image that cannot be pulled never restarts it: see `image_pull_failed`)."""
        return (self.restarted_from_count is not None and self.restart_count <= self.restarted_from_count
                and not self.image_pull_failed and not self.deleting)

    @property
    def never_ran(self) -> bool:
        """etcd never ran in this pod, so deleting it loses nothing."""
        return (self.image_pull_failed or self.unschedulable) and self.restart_count == 0

    @property
    def problem(self) -> str | None:
        """A short human description of what is wrong with the pod, if anything visible."""
        if self.deleting:
            return "terminating"
        if self.terminal:
            return f"phase {self.phase}"
        if self.waiting_reason and self.waiting_reason not in ("ContainerCreating", "PodInitializing"):
            detail = f": {self.waiting_message}" if self.waiting_message else ""
            return f"{self.waiting_reason}{detail}"
        return None


@dataclass(frozen=True)
class ObservedPVC:
    name: str
    member_name: str
    deleting: bool = False
    uid: str = ""
    # Marked by StopMember: its member is being removed, its pod is not recreated on it.
    leaving: bool = False


@dataclass(frozen=True)
class ObservedDisruptionBudget:
    """The cluster's own PodDisruptionBudget (disruption_budget.py keeps it current)."""

    name: str
    min_available: Any  # int or percentage string, as the API holds it
    uid: str = ""


def parse_disruption_budget(obj: JsonDict) -> ObservedDisruptionBudget:
    metadata = _dict(obj.get("metadata"))
    spec = _dict(obj.get("spec"))
    return ObservedDisruptionBudget(str(metadata.get("name") or ""), spec.get("minAvailable"),
                                    str(metadata.get("uid") or ""))


def parse_pod(pod: JsonDict) -> ObservedPod:
    """An etcd member pod from its API dict (as returned by the API, camelCase keys)."""
    metadata = _dict(pod.get("metadata"))
    spec = _dict(pod.get("spec"))
    status = _dict(pod.get("status"))
    labels = _dict(metadata.get("labels"))
    annotations = _dict(metadata.get("annotations"))
    name = str(metadata.get("name") or "")

    container = _etcd_container(spec.get("containers"))
    container_status = _etcd_container(status.get("containerStatuses"))
    state = _dict(container_status.get("state"))
    waiting = _dict(state.get("waiting"))
    last_terminated = _dict(_dict(container_status.get("lastState")).get("terminated"))
    image = container.get("image")

    etcd_version = _etcd_version(annotations, image)

    return ObservedPod(
        name=name,
        member_name=str(labels.get(c.LABEL_MEMBER) or name),
        phase=str(status.get("phase") or "Pending"),
        ready=_condition_true(status.get("conditions"), "Ready"),
        deleting=metadata.get("deletionTimestamp") is not None,
        ip=status.get("podIP") or None,
        created_at=parse_timestamp(metadata.get("creationTimestamp")),
        image=image if isinstance(image, str) else None,
        etcd_version=etcd_version,
        initial_cluster_state=annotations.get(c.ANNOTATION_INITIAL_CLUSTER_STATE),
        pod_policy_hash=annotations.get(c.ANNOTATION_POD_POLICY_HASH),
        trusted_ca=annotations.get(c.ANNOTATION_TRUSTED_CA) or None,
        restart_count=int(container_status.get("restartCount") or 0),
        waiting_reason=waiting.get("reason") or None,
        waiting_message=waiting.get("message") or None,
        last_termination_reason=last_terminated.get("reason") or None,
        last_termination_message=last_terminated.get("message") or None,
        last_exit_code=last_terminated.get("exitCode") if isinstance(last_terminated.get("exitCode"), int) else None,
        uid=str(metadata.get("uid") or ""),
        unready_since=_unready_since(status.get("conditions")),
        serving=labels.get(c.LABEL_SERVING) == c.LABEL_SERVING_VALUE,
        drained_at=parse_timestamp(annotations.get(c.ANNOTATION_DRAINED_AT)),
        unschedulable_message=_unschedulable_message(status.get("conditions")),
        defragmented_at=parse_timestamp(annotations.get(c.ANNOTATION_DEFRAGMENTED_AT)),
        defragment_failed_at=parse_timestamp(annotations.get(c.ANNOTATION_DEFRAGMENT_FAILED_AT)),
        waiting_init=_waiting_init_container(status.get("initContainerStatuses")),
        deletion_deadline=parse_timestamp(metadata.get("deletionTimestamp")),
        etcd_container_index=_etcd_container_index(spec.get("containers")),
        restarted_at=parse_timestamp(annotations.get(c.ANNOTATION_RESTARTED_AT)),
        restarted_from_count=_int_or_none(annotations.get(c.ANNOTATION_RESTARTED_FROM_COUNT)),
        secret_volumes=frozenset(
            str(_dict(volume.get("secret")).get("secretName"))
            for volume in spec.get("volumes") or () if isinstance(volume, dict) and volume.get("secret")),
        rejoins_on_data=(annotations.get(c.ANNOTATION_INITIAL_CLUSTER_STATE) == c.INITIAL_CLUSTER_STATE_EXISTING
                         and _initial_cluster_names(container) == [name]),
        finalizers=tuple(str(f) for f in metadata.get("finalizers") or ()),
        node_name=str(spec.get("nodeName")) if spec.get("nodeName") else None,
        tls_mode=_tls_mode(container),
        initial_cluster=_initial_cluster(container),
    )


def _tls_mode(container: JsonDict) -> str:
    """From its etcd flags: https peers -> tls; a peer certificate with http peers -> bridge."""
    arguments = [a for a in [*(container.get("command") or ()), *(container.get("args") or ())]
                 if isinstance(a, str)]
    if any(a.startswith("--listen-peer-urls=https://") for a in arguments):
        return TLS_MODE_TLS
    if any(a.startswith("--peer-cert-file=") for a in arguments):
        return TLS_MODE_BRIDGE
    return TLS_MODE_PLAIN


def _initial_cluster_names(container: JsonDict) -> list[str]:
    """The member names in the container's `--initial-cluster=` argument (one per peer URL)."""
    return sorted({name for name, _ in _initial_cluster(container)})


def _initial_cluster(container: JsonDict) -> tuple[tuple[str, str], ...]:
    """The container's `--initial-cluster=` argument as (name, peer URL) pairs, in order."""
    for argument in [*(container.get("command") or ()), *(container.get("args") or ())]:
        if isinstance(argument, str) and argument.startswith("--initial-cluster="):
            pairs = argument.split("=", 1)[1]
            return tuple((name, url) for name, _, url in (pair.partition("=") for pair in pairs.split(",") if pair))
    return ()


def parse_pvc(pvc: JsonDict) -> ObservedPVC:
    metadata = _dict(pvc.get("metadata"))
    name = str(metadata.get("name") or "")
    labels = _dict(metadata.get("labels"))
    annotations = _dict(metadata.get("annotations"))
    return ObservedPVC(
        name=name,
        member_name=str(labels.get(c.LABEL_MEMBER) or name),
        deleting=metadata.get("deletionTimestamp") is not None,
        uid=str(metadata.get("uid") or ""),
        leaving=c.ANNOTATION_LEAVING_AT in annotations,
    )


def ready_endpoint_pods(endpoint_slices: Sequence[JsonDict]) -> frozenset[str]:
    """Names of the pods a Service's EndpointSlices list as ready (where its clients may be sent;
    an absent `ready` condition counts as ready, as the API says consumers should read it)."""
    names = set()
    for endpoint_slice in endpoint_slices:
        for endpoint in endpoint_slice.get("endpoints") or ():
            target = _dict(_dict(endpoint).get("targetRef"))
            conditions = _dict(_dict(endpoint).get("conditions"))
            if target.get("kind") == "Pod" and target.get("name") and conditions.get("ready") is not False:
                names.add(str(target["name"]))
    return frozenset(names)


def version_from_image(image: str) -> EtcdVersion | None:
    """`quay.io/coreos/etcd:v3.5.1` -> 3.5.1; None for digests or tags that are not versions."""
    last_segment = image.rsplit("/", 1)[-1]
    if "@" in last_segment or ":" not in last_segment:
        return None
    return EtcdVersion.parse(last_segment.rsplit(":", 1)[1])


def seconds_since(observed: ObservedCluster, moment: datetime | None) -> float | None:
    """Seconds from `moment` (naive: UTC) to when `observed` was taken; None if either is unknown."""
    if moment is None or observed.observed_at is None:
        return None
    return (observed.observed_at - as_utc(moment)).total_seconds()


# ---------------------------------------------------------------------------------------------
# etcd side (filled from the etcdctl wrapper's results)


@dataclass(frozen=True)
class MemberHealth:
    """`etcdctl endpoint health` of one member's endpoint."""

    healthy: bool
    error: str | None = None


# ---------------------------------------------------------------------------------------------
# The whole picture


@dataclass(frozen=True)
class ObservedCertManager:
    """spec.TLS.certManager: the cluster's cert-manager Certificates by role ("peer", "server",
    "operator"; None: there is none yet), read by name each pass, and whether the issuer it names
    exists (None: not told: an issuer of another API group, or the lookup failed); `error`: why
    the Certificates could not be read."""

    certificates: Mapping[str, Mapping[str, Any] | None]
    issuer_exists: bool | None
    error: str = ""


@dataclass(frozen=True)
class ObservedCluster:
    """Everything one pass saw. `members` is None when no member answered `member list`;
    `health` and `endpoint_status` are keyed by member name (= pod name); a member missing from
    `health` counts as unhealthy."""

    cluster: EtcdCluster
    pods: tuple[ObservedPod, ...] = ()
    pvcs: tuple[ObservedPVC, ...] = ()
    services: frozenset[str] = frozenset()
    # Services whose spec must change for members to find each other (adoption.py).
    services_to_fix: frozenset[str] = frozenset()
    members: tuple[Member, ...] | None = None
    member_list_error: str | None = None
    health: Mapping[str, MemberHealth] = field(default_factory=dict)
    # The health call itself failed (timed out, refused): health is unknown, not bad.
    health_error: str | None = None
    endpoint_status: Mapping[str, EndpointStatus] = field(default_factory=dict)
    # The etcd cluster ID the member list was answered with (0: none, or not reported).
    cluster_id: int = 0
    # The member that answered the member list, when it did so linearizably (etcd 3.5+ with the
    # linearizable flag: its leader confirmed its leadership with a majority, so the cluster had a
    # quorum as this pass observed it); None otherwise (etcd 3.4 ignores the flag).
    quorum_confirmed_by: str | None = None
    # Randomness and time are inputs, so the planner stays a pure function.
    name_suffix: str = field(default_factory=new_name_suffix)  # the name a new member gets
    observed_at: datetime | None = None  # when the pass observed (None: ages are not checked)
    # A name the cluster needs that is someone else's (ownership.py); nothing is created then.
    name_problem: NameProblem | None = None
    # Pod name -> message of the latest FailedMount event about it (a pod stuck setting up volumes).
    mount_failures: Mapping[str, str] = field(default_factory=dict)
    # The primary IP family of the cluster's Services (and so of its pods): "IPv4" or "IPv6".
    ip_family: str = "IPv4"
    # Raised alarms (NOSPACE, CORRUPT), from the members' status; see etcd_common/etcd/alarms.py.
    alarms: tuple[Alarm, ...] = ()
    # Under NOSPACE only: is history compacted up to the current revision? (None: not asked.)
    history_compacted: bool | None = None
    # While a CORRUPT alarm is raised only: each voting member's keyspace hash at one revision,
    # `hash_kv_revision` (`etcdctl endpoint hashkv --rev`), by member name; a member that did not
    # answer is missing (0: not asked). What planning/maintenance.py compares.
    hash_kvs: Mapping[str, HashKV] = field(default_factory=dict)
    hash_kv_revision: int = 0
    # The client service exists but its selector does not require the serving label (CoreOS-made,
    # or made before draining existed): migrated before any member is drained.
    client_selector_outdated: bool = False
    # Pods the client service's EndpointSlices list as ready (its clients may still be sent
    # there); None: not looked up (every pod is labelled serving, or the lookup failed).
    client_endpoints: frozenset[str] | None = None
    # The cluster's own PodDisruptionBudget (None: it has none yet).
    disruption_budget: ObservedDisruptionBudget | None = None
    # spec.TLS.issued only: the Secrets of its certificates by role ("ca", "peer", "server",
    # "operator"; None: there is none), read by name each pass (tls/certificates.py checks them).
    issued_secrets: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    # spec.TLS.static: the user's Secrets by role (peer, server, operator), to report when their
    # certificates end (read by name, as the issued ones).
    static_secrets: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    # spec.TLS.certManager only: its Certificates and whether its issuer exists (tls/cert_manager.py).
    cert_manager: ObservedCertManager | None = None
    # Without a member list, while the members that answer know no leader: the membership as the
    # answering member furthest ahead sees it locally (a serializable member list; None: not
    # asked or not answered). The voters a quorum-loss recovery counts (planning/recovery.py).
    local_members: tuple[Member, ...] | None = None
    # While started voters fail the operator's health check: the member IDs each healthy voter has
    # an active peer stream to (its etcd_network_active_peers), by member name; empty when not
    # asked or when none answered (peers' view unknown).
    peer_views: Mapping[str, frozenset[int]] = field(default_factory=dict)
    # Without a member list only: the namespace's EtcdBackups (a quorum-loss recovery never
    # rebuilds from a survivor behind the newest succeeded backup); why they could not be listed.
    backups: tuple[EtcdBackup, ...] = ()
    backups_error: str = ""
    # Then too: the nodes of member pods being deleted or terminal that the API says no longer
    # exist (Node deleted: the proof a recovery takes that those members are gone; recovery.py).
    nodes_gone: frozenset[str] = frozenset()

    # --- pods and volumes

    def pod(self, member_name: str) -> ObservedPod | None:
        """The member's pod, terminating or not (pod name = member name, so at most one)."""
        for pod in self.pods:
            if pod.member_name == member_name:
                return pod
        return None

    def pod_age_seconds(self, pod: ObservedPod) -> float | None:
        if self.observed_at is None or pod.created_at is None:
            return None
        return (self.observed_at - pod.created_at).total_seconds()

    @property
    def live_pods(self) -> tuple[ObservedPod, ...]:
        return tuple(pod for pod in self.pods if not pod.deleting)

    def volume(self, member_name: str) -> ObservedPVC | None:
        """The member's data volume, unless it is being deleted."""
        for pvc in self.pvcs:
            if pvc.member_name == member_name and not pvc.deleting:
                return pvc
        return None

    # --- members

    @property
    def member_list_obtained(self) -> bool:
        return self.members is not None

    @property
    def member_names(self) -> frozenset[str]:
        return frozenset(member.member_name for member in self.members or ())

    @property
    def voting_members(self) -> tuple[Member, ...]:
        return tuple(member for member in self.members or () if not member.is_learner)

    @property
    def learners(self) -> tuple[Member, ...]:
        return tuple(member for member in self.members or () if member.is_learner)

    def is_healthy(self, member: Member) -> bool:
        health = self.health.get(member.member_name)
        return health is not None and health.healthy

    @property
    def healthy_voters(self) -> tuple[Member, ...]:
        return tuple(member for member in self.voting_members if self.is_healthy(member))

    @property
    def unhealthy_voters(self) -> tuple[Member, ...]:
        return tuple(member for member in self.voting_members if not self.is_healthy(member))

    @property
    def quorum(self) -> int:
        """Voting members needed for a majority."""
        return len(self.voting_members) // 2 + 1

    @property
    def has_quorum(self) -> bool:
        """A majority of voting members answered a health check (which needs a leader)."""
        return bool(self.voting_members) and len(self.healthy_voters) >= self.quorum

    @property
    def operator_cut_off(self) -> bool:
        """Too few voters answer the operator's health check for a quorum, yet the cluster proved
        it has one (a linearizable member list, or on etcd 3.4 its peers' view: `quorum_seen_by_peers`):
        the operator cannot reach members that their peers still serve with (a network partition
        between it and them), not a quorum loss."""
        return (not self.has_quorum and bool(self.voting_members)
                and (self.quorum_confirmed_by is not None or self.quorum_seen_by_peers))

    def seen_connected(self, member: Member) -> bool:
        """Does a healthy voter have an active peer stream to `member` (`peer_views`)?"""
        return any(member.id in connected for connected in self.peer_views.values())

    @property
    def voters_seen_connected(self) -> tuple[Member, ...]:
        """Voters failing the operator's health check that a healthy voter is connected to: cut
        off from the operator, not from the cluster."""
        return tuple(member for member in self.unhealthy_voters if self.seen_connected(member))

    @property
    def partitioned_voters(self) -> tuple[Member, ...]:
        """Started voters failing the operator's health check that no healthy voter which showed
        its peers is connected to, while the kubelet reports their pod Ready: alive, but cut off
        from their peers (a dead member's pod is not Ready). Empty while the peers' view is unknown."""
        if not self.peer_views:
            return ()
        return tuple(member for member in self.unhealthy_voters
                     if member.started and not self.seen_connected(member) and self._pod_ready(member.member_name))

    def _pod_ready(self, member_name: str) -> bool:
        pod = self.pod(member_name)
        return pod is not None and pod.ready and not pod.deleting

    @property
    def quorum_seen_by_peers(self) -> bool:
        """The peers' view shows a quorum (what tells the operator cut off from a quorum loss on
        etcd 3.4, which answers no linearizable member list): the healthy voters and the voters
        they are connected to make a majority, and every healthy voter follows the same leader,
        a current voter. Being connected is no proof on its own (a stream stays up without a
        leader); the healthy voters' health reads are linearizable, so the leader they name
        confirmed its leadership with a majority when they answered."""
        healthy = self.healthy_voters
        if not self.peer_views or not healthy:
            return False
        leaders = {self.endpoint_status[m.member_name].leader_id if m.member_name in self.endpoint_status else 0
                   for m in healthy}
        if len(leaders) != 1 or not any(m.id in leaders for m in self.voting_members):
            return False
        return len(healthy) + len(self.voters_seen_connected) >= self.quorum

    @property
    def quorum_evidence(self) -> str:
        """How the cluster showed its quorum while the operator reaches too few voters."""
        if self.quorum_confirmed_by is not None:
            return f"member {self.quorum_confirmed_by} answered a linearizable member list"
        healthy = ", ".join(m.member_name for m in self.healthy_voters)
        leader = self.leader
        led = f" follow leader {leader.member_name} and" if leader is not None else ""
        return f"member(s) {healthy}{led} make a majority with the voters they are connected to"

    @property
    def quorum_available(self) -> bool:
        """The cluster has a quorum, as far as this pass can tell: by health checks, or confirmed by
        the cluster itself when the operator cannot reach enough members (`operator_cut_off`)."""
        return self.has_quorum or self.operator_cut_off

    @property
    def leaderless_answers(self) -> tuple[str, ...]:
        """Members that answered `endpoint status` when none of those answering knows a leader
        (empty if any does). Without a member list, which etcd 3.5+ serves only with quorum,
        this is how a quorum loss shows."""
        if not self.endpoint_status or any(s.leader_id for s in self.endpoint_status.values()):
            return ()
        return tuple(sorted(self.endpoint_status))

    @property
    def leader_id(self) -> int | None:
        """The leader most endpoints report, if it is a current member."""
        votes = Counter(status.leader_id for status in self.endpoint_status.values() if status.leader_id)
        for leader_id, _count in votes.most_common():
            if any(member.id == leader_id for member in self.members or ()):
                return leader_id
        return None

    @property
    def leader(self) -> Member | None:
        leader_id = self.leader_id
        for member in self.members or ():
            if member.id == leader_id:
                return member
        return None

    def alarmed(self, kind: str) -> tuple[Alarm, ...]:
        return tuple(alarm for alarm in self.alarms if alarm.kind == kind)

    @property
    def revision(self) -> int:
        """The newest store revision a member reported (0: none answered)."""
        return max((status.revision for status in self.endpoint_status.values()), default=0)

    def initial_cluster(self) -> tuple[tuple[str, str], ...]:
        """`--initial-cluster` pairs for a member joining now: every member with the exact peer
        URLs etcd knows (it compares them with its own list)."""
        return tuple(
            (member.member_name, url)
            for member in sorted(self.members or (), key=lambda m: m.member_name)
            for url in member.peer_urls
        )


def stuck_terminating_seconds(pod: ObservedPod, observed: ObservedCluster) -> float | None:
    """How long a deleted pod has outlived its grace period and the kubelet's margin
    (STOP_MARGIN_SECONDS); None while it may still be stopping (or is not being deleted)."""
    if not pod.deleting or pod.deletion_deadline is None or observed.observed_at is None:
        return None
    past = (observed.observed_at - pod.deletion_deadline).total_seconds() - STOP_MARGIN_SECONDS
    return past if past >= 0 else None


def what_holds(pod: ObservedPod) -> str:
    """Why a deleted pod may still be there: its finalizers, else its node not confirming."""
    if pod.finalizers:
        return f"held by finalizer(s) {', '.join(pod.finalizers)}"
    node = f"node {pod.node_name}" if pod.node_name else "its node"
    return f"{node} has not confirmed that its containers stopped (a node down or unreachable?)"


# ---------------------------------------------------------------------------------------------


def _dict(value: Any) -> JsonDict:
    return value if isinstance(value, Mapping) else {}


def _waiting_init_container(statuses: Any) -> WaitingInitContainer | None:
    for status in statuses if isinstance(statuses, list) else []:
        status = _dict(status)
        waiting = _dict(_dict(status.get("state")).get("waiting"))
        reason = str(waiting.get("reason") or "")
        if reason and reason not in ("PodInitializing", "ContainerCreating"):
            last = _dict(_dict(status.get("lastState")).get("terminated"))
            code = last.get("exitCode")
            return WaitingInitContainer(str(status.get("name") or ""), reason, str(waiting.get("message") or ""),
                                        code if isinstance(code, int) else None, str(last.get("message") or ""))
    return None


def _etcd_container_index(containers: Any) -> int:
    """Where `_etcd_container` finds the etcd container (0 when there is none)."""
    for index, container in enumerate(containers if isinstance(containers, list) else ()):
        if isinstance(container, Mapping) and container.get("name") == c.ETCD_CONTAINER_NAME:
            return index
    return 0


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _etcd_container(containers: Any) -> JsonDict:
    """The container (or container status) named `etcd`, else the first one."""
    if not isinstance(containers, list) or not containers:
        return {}
    for container in containers:
        if isinstance(container, Mapping) and container.get("name") == c.ETCD_CONTAINER_NAME:
            return container
    return _dict(containers[0])


def _unready_since(conditions: Any) -> datetime | None:
    for condition in conditions or ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready" and condition.get("status") == "False":
            return parse_timestamp(condition.get("lastTransitionTime"))
    return None


def _condition_true(conditions: Any, condition_type: str) -> bool:
    for condition in conditions or ():
        if isinstance(condition, Mapping) and condition.get("type") == condition_type:
            return condition.get("status") == "True"
    return False


def _unschedulable_message(conditions: Any) -> str | None:
    """The scheduler's reason while no node fits the pod, e.g. "0/3 nodes are available: 1 node(s)
    had untolerated taint {dedicated: etcd}, ..."; None once it is scheduled (or while unknown)."""
    for condition in conditions or ():
        if (isinstance(condition, Mapping) and condition.get("type") == "PodScheduled"
                and condition.get("status") == "False" and condition.get("reason") == "Unschedulable"):
            return str(condition.get("message") or "no node fits the pod")
    return None
