"""The model world: one EtcdCluster object, its pods, PVCs and services, the nodes they run on, the
etcd clusters its members form (membership, leader, alarms), each member's data directory, the
network between any two parties, EtcdBackups with their metadata and the issued TLS Secrets.

Everything here is plain state plus the physics that needs no operator: `settle()` starts pods,
joins members, elects leaders, replicates, runs etcd's corruption check and the kubelet/node
controller (NotReady, taint eviction after TAINT_EVICTION_SECONDS). The operator's view is built
in observe.py, its actions are applied in effects.py. Iteration is always over dicts in
insertion order or sorted lists, never over sets: the same seed gives the same run.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import EtcdCluster
from etcd_operator.manifests import member_peer_url
from etcd_operator.spec import parse_etcd_cluster
from tests.unit.etcd_operator.etcd_cluster_builders import T0

NAMESPACE = "default"
CLUSTER = "example"
OPERATOR = "operator"  # a party of the network: the operator (and the Kubernetes control plane)
NODE_NOT_READY_SECONDS = 40  # the node controller's grace period
TAINT_EVICTION_SECONDS = 300  # tolerationSeconds of the default not-ready/unreachable taints
GRACE_SECONDS = 30  # a deleted pod's grace period
ORPHAN_POD_GC_SECONDS = 40  # the pod garbage collector's quarantine of pods on a deleted Node
MIB = 1024 * 1024
DEFAULT_QUOTA = 2 * 1024 * MIB


class Refused(Exception):
    """etcd or the API refused the call (no quorum, unreachable, already exists, not found)."""


@dataclass
class Data:
    """A member's data directory: which etcd cluster and member it belongs to, how far it got,
    the committed client writes it holds, whether its hash differs (`lineage` != 0: corrupted)."""

    cluster_id: int
    member_id: int
    revision: int = 1
    raft_index: int = 1
    writes: frozenset[int] = frozenset()
    lineage: int = 0
    live_bytes: int = 0
    history_bytes: int = 0
    db_size: int = 0
    compacted: int = 0
    uid: str = ""  # the EtcdCluster incarnation whose data it is
    removed: bool = False  # its member was removed from the cluster: etcd stopped it

    @property
    def in_use(self) -> int:
        return self.live_bytes + self.history_bytes

    def copy_for(self, cluster_id: int, member_id: int) -> Data:
        return dataclasses.replace(self, cluster_id=cluster_id, member_id=member_id, removed=False)


@dataclass
class Pod:
    name: str
    uid: str
    created_at: int
    state: str  # "new" (seed), "existing"
    image: str
    version: Any
    policy_hash: str
    node: str | None = None
    data: Data | None = None  # emptyDir data (PVC data lives on the PVC)
    serving: bool = True
    deleting_at: int | None = None  # deletionTimestamp (end of grace)
    running: bool = False  # etcd's process runs (set by settle)
    ready: bool = False  # as the API shows it
    defragmented_at: int | None = None
    trusts: frozenset[str] = frozenset()  # CA fingerprints its etcd trusts for clients (loaded at start)
    peer_trusts: frozenset[str] = frozenset()  # ... for peers (loaded at start)
    started: bool = False  # its etcd ran at least once
    defragment_failed_at: int | None = None
    defragment_fails_until: int = 0  # a fault: its defragmentations fail (a slow disk) until then
    trusted_ca: str | None = None  # the annotation
    secret_volumes: frozenset[str] = frozenset()
    # A recovery seed: where its init containers take the data from (then cleared).
    seed_source: tuple[str, Any] | None = None
    seed_bump: int = 0  # --bump-revision its restore step uses
    rejoins_on_data: bool = False
    initial_cluster: tuple[tuple[str, str], ...] = ()


@dataclass
class PVC:
    name: str
    uid: str
    data: Data | None = None
    leaving: bool = False
    deleting: bool = False


@dataclass
class Node:
    name: str
    zone: str
    up: bool = True  # the machine runs (False: lost, with its local data)
    not_ready_since: int | None = None
    tainted_at: int | None = None  # NoExecute taint (not-ready, unreachable or an admin's)
    deleted_at: int | None = None  # the Node object deleted (the machine is gone for good)
    admin_taint: bool = False  # a NoExecute taint a person (or a controller) added


@dataclass
class MemberRecord:
    """One entry of an etcd cluster's member list."""

    id: int
    name: str
    peer_url: str
    learner: bool = False
    started: bool = False  # it ran once: it published its name and client URLs (they stay listed)


@dataclass
class EtcdState:
    """One etcd cluster (one cluster ID): its member list, leader and alarm store."""

    cluster_id: int
    members: dict[str, MemberRecord] = field(default_factory=dict)
    leader: str | None = None
    alarms: list[tuple[str, int]] = field(default_factory=list)  # (kind, member ID), raised order
    uid: str = ""  # the EtcdCluster incarnation that made it

    def voters(self) -> list[MemberRecord]:
        return [m for m in self.members.values() if not m.learner]

    def quorum(self) -> int:
        return len(self.voters()) // 2 + 1


@dataclass
class Backup:
    """An EtcdBackup with the metadata of what it holds (the world's truth) and its API object."""

    name: str
    revision: int
    etcd_cluster_id: int
    cluster_uid: str
    data: Data
    raw: dict[str, Any]


class RemovalFacts(NamedTuple):
    """The world at a member's removal, for the invariants (effects.remove_member)."""

    sound: bool  # the removed member's data exists, runs in this etcd cluster and is not corrupt
    agree: int  # voters connected to it with the same data
    voters: int
    detail: str  # who agrees
    leader_sound: bool  # the leader's data (what a new member copies) is not corrupt
    other_sound_voters: int  # voters besides it whose data is not corrupt (connected or not)
    doomed: bool  # its data is an emptyDir of a pod being deleted: it goes with the pod, removed or not


@dataclass
class World:
    raw_cluster: dict[str, Any]
    cluster: EtcdCluster
    nodes: dict[str, Node]
    now: int = 0
    pods: dict[str, Pod] = field(default_factory=dict)
    pvcs: dict[str, PVC] = field(default_factory=dict)
    services: set[str] = field(default_factory=set)
    etcd: dict[int, EtcdState] = field(default_factory=dict)
    cuts: set[frozenset[str]] = field(default_factory=set)  # blocked links between parties
    backups: dict[str, Backup] = field(default_factory=dict)
    secrets: dict[str, dict[str, Any]] = field(default_factory=dict)  # issued TLS Secrets by role
    secret_cas: dict[str, tuple[str, frozenset[str]]] = field(default_factory=dict)  # role -> (signer, trusted)
    committed: dict[int, tuple[int, int]] = field(default_factory=dict)  # write -> (cluster ID, revision)
    max_revision: dict[int, int] = field(default_factory=dict)  # per etcd cluster ID: highest used
    lineage_parent: dict[int, int] = field(default_factory=dict)  # recovered cluster ID -> its origin
    serial: int = 0
    disarmed_unfit: list[str] = field(default_factory=list)  # filled by effects, read by invariants
    events: list[str] = field(default_factory=list)  # what happened this step (invariants read it)
    seeded: list[tuple[str, str, Data, Data]] = field(default_factory=list)  # recovery seeds' data taken
    zero_id_corrupt: bool = False  # the corruption check raises CORRUPT with member ID 0 (etcd 3.6)
    removed: list[tuple[str, str, RemovalFacts]] = field(default_factory=list)  # (member, purpose, facts)
    fault_scale: float = 1.0
    env_quota: int | None = None
    known_cas: dict[str, bytes] = field(default_factory=dict)  # every CA issued: fingerprint -> PEM
    # This step's defragmentations: (member, when its previous one failed (None: it did not), ok).
    defragmented: list[tuple[str, int | None, bool]] = field(default_factory=list)
    write_size: int = 64 * 1024

    # --- identities

    def next_serial(self) -> int:
        self.serial += 1
        return self.serial

    def new_uid(self, kind: str) -> str:
        return f"{kind}-{self.next_serial():06d}"

    @property
    def uid(self) -> str:
        return self.cluster.uid

    @property
    def spec(self) -> Any:
        return self.cluster.require_spec()

    @property
    def observed_at(self) -> datetime:
        return T0 + timedelta(seconds=self.now)

    def reparse(self) -> None:
        self.cluster = parse_etcd_cluster(self.raw_cluster)

    def peer_url(self, member: str) -> str:
        return member_peer_url(self.cluster, member)

    @property
    def quota(self) -> int:
        """The quota members run with: the spec's flag, else the env variable, else etcd's default."""
        spec_quota = self.spec.backend_quota_bytes
        return spec_quota if spec_quota is not None else self.env_quota or DEFAULT_QUOTA

    # --- the network

    def party(self, pod: Pod) -> str:
        return pod.node or "unscheduled"

    def linked(self, a: str, b: str) -> bool:
        return a == b or frozenset((a, b)) not in self.cuts

    def node_up(self, name: str | None) -> bool:
        return name is not None and name in self.nodes and self.nodes[name].up

    def node_exists(self, name: str) -> bool:
        """Does the API still have this Node object?"""
        node = self.nodes.get(name)
        return node is not None and (node.deleted_at is None or self.now < node.deleted_at)

    def pods_linked(self, a: Pod, b: Pod) -> bool:
        """Can the two members talk: the network, and (TLS) each trusts the CA of the current
        peer certificate (peer trust loaded at start; certificates read at every handshake)."""
        return self.linked(self.party(a), self.party(b)) and self.peer_trusted(a) and self.peer_trusted(b)

    def peer_trusted(self, pod: Pod) -> bool:
        peer = self.secret_cas.get("peer")
        return peer is None or not pod.secret_volumes or peer[0] in pod.peer_trusts

    def reaches_control_plane(self, node: Node) -> bool:
        return node.up and self.linked(node.name, OPERATOR)

    # --- data

    def data_of(self, member: str) -> Data | None:
        """The member's data: on its PVC (one being deleted stays mounted while a pod uses it: the
        pvc-protection finalizer), else in its pod's emptyDir."""
        pvc = self.pvcs.get(member)
        if pvc is not None:
            return pvc.data
        pod = self.pods.get(member)
        return pod.data if pod is not None else None

    def set_data(self, member: str, data: Data | None) -> None:
        pvc = self.pvcs.get(member)
        if pvc is not None:
            pvc.data = data
        elif member in self.pods:
            self.pods[member].data = data

    def all_data(self) -> list[tuple[str, Data]]:
        """Every data directory that exists, by member name (PVCs, then emptyDirs)."""
        found: dict[str, Data] = {}
        for name, pvc in self.pvcs.items():
            if pvc.data is not None:
                found[name] = pvc.data
        for name, pod in self.pods.items():
            if pod.data is not None and name not in found and pod.node is not None and self.node_up(pod.node):
                found[name] = pod.data
        return sorted(found.items())

    def member_runs(self, name: str) -> bool:
        pod = self.pods.get(name)
        return pod is not None and pod.running

    def etcd_of(self, name: str) -> EtcdState | None:
        data = self.data_of(name)
        if data is None or not self.member_runs(name) or data.removed:
            return None
        state = self.etcd.get(data.cluster_id)
        if state is None or name not in state.members or state.members[name].id != data.member_id:
            return None
        return state

    def quorum_group(self, state: EtcdState) -> list[str]:
        """The running voters of `state` connected to its leader, when they are a majority (the
        leader included); [] without one (no leader)."""
        leader = state.leader
        if leader is None or self.etcd_of(leader) is not state:
            return []
        lead_pod = self.pods[leader]
        group = [m.name for m in state.voters() if self.etcd_of(m.name) is state
                 and self.pods_linked(self.pods[m.name], lead_pod)]
        return sorted(group) if len(group) >= state.quorum() else []

    def serving(self) -> dict[int, list[str]]:
        """Etcd clusters with a quorum (accepting writes unless an alarm or TLS refuses them)."""
        return {cid: group for cid, state in sorted(self.etcd.items()) if (group := self.quorum_group(state))}

    def write_blocked(self, state: EtcdState) -> str:
        """Why clients' writes are refused by this cluster ("" if they are not)."""
        kinds = sorted({kind for kind, _ in state.alarms})
        if kinds:
            return f"alarm {', '.join(kinds)} raised"
        if self.secrets and not self.clients_trusted(state):
            return "the members do not trust the clients' certificates (the Secrets' CA)"
        return ""

    def clients_trusted(self, state: EtcdState) -> bool:
        """Do the operator and the clients (the operator Secret's certificate and CA file) and
        the serving members trust each other?"""
        group = self.quorum_group(state)
        return not group or (self.operator_trusts_servers() and all(self.trusts_clients(self.pods[n]) for n in group))

    def trusts_clients(self, pod: Pod) -> bool:
        operator = self.secret_cas.get("operator")
        return operator is None or operator[0] in pod.trusts

    def operator_trusts_servers(self) -> bool:
        operator, server = self.secret_cas.get("operator"), self.secret_cas.get("server")
        return operator is None or server is None or server[0] in operator[1]


def raw_cluster(name: str, uid: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": c.API_GROUP_VERSION, "kind": c.KIND,
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid, "generation": 1},
            "spec": dict(spec), "status": {}}


def new_world(spec: dict[str, Any], *, zones: int = 3, nodes_per_zone: int = 1) -> World:
    raw = raw_cluster(CLUSTER, "uid-000000", spec)
    nodes = {}
    for z in range(zones):
        for n in range(nodes_per_zone):
            node = Node(f"node-{'abcde'[z]}{n + 1}", "abcde"[z])
            nodes[node.name] = node
    world = World(raw_cluster=raw, cluster=parse_etcd_cluster(raw), nodes=nodes)
    for variable in (spec.get("pod") or {}).get("etcdEnv") or ():
        if variable.get("name") == "ETCD_QUOTA_BACKEND_BYTES":
            world.env_quota = int(variable["value"])
    return world
