"""What one pass observes, faked: the Kubernetes reads (FakeClient) and etcdctl's answers (FakeEtcd)
for a three-member cluster, and observe() running the real observation over them."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from etcd_common.api.etcd_cluster import EtcdCluster
from etcd_common.etcd import etcdctl as ctl
from etcd_common.etcd import types as etcd_types
from etcd_common.etcd.peer_metrics import PeerView
from etcd_operator.manifests import build_member_pod
from etcd_operator.observing import observe_cluster

MEMBERS = ("example-aaaaa", "example-bbbbb", "example-ccccc")
CLUSTER_ID = 12558503185269689621  # the ID the fake member list answers with
FOREIGN_CLUSTER_ID = 777  # another etcd cluster, reached through a reused name or address
FOREIGN_MEMBER = etcd_types.Member(id=99, name="other-zzzzz", peer_urls=("http://other-zzzzz:2380",),
                            client_urls=("http://other-zzzzz:2379",), is_learner=False)
LIVE_POD_STATUS = {"phase": "Running", "podIP": "127.1.0.7",
                   "conditions": [{"type": "Ready", "status": "True"}],
                   "containerStatuses": [{"name": "etcd", "ready": True, "restartCount": 0, "state": {"running": {}}}]}


class FakeClient:
    def __init__(self, etcd: FakeEtcd, endpoints: Sequence[str]) -> None:
        self.etcd, self.endpoints = etcd, list(endpoints)

    def member_list(self) -> list[etcd_types.Member]:
        self.etcd.asked.append(("member list", self.endpoints))
        if self.etcd.member_list_error:
            raise ctl.Unreachable(self.etcd.member_list_error)
        return [etcd_types.Member(id=i + 1, name=m, peer_urls=(f"http://{m}:2380",), client_urls=(f"http://{m}:2379",),
                           is_learner=False) for i, m in enumerate(MEMBERS)]

    def cluster_members(self, check: Any = None) -> etcd_types.MemberList:
        members = tuple(self.member_list())
        for url in self.endpoints:
            answer = self._list_at(url, members)
            if check is None or check(url, answer) is None:
                return answer
        raise ctl.EtcdctlError(f"{url}: {check(url, answer)}")

    def local_member_lists(self) -> list[etcd_types.MemberList | ctl.EtcdctlError]:
        self.etcd.asked.append(("local member list", self.endpoints))
        members = tuple(etcd_types.Member(id=i + 1, name=m, peer_urls=(f"http://{m}:2380",), client_urls=(f"http://{m}:2379",),
                                   is_learner=False) for i, m in enumerate(MEMBERS))
        return [self._list_at(url, members) for url in self.endpoints]

    def _list_at(self, url: str, members: tuple[etcd_types.Member, ...]) -> etcd_types.MemberList:
        """What the member at `url` answers: this cluster's list, or another cluster's (`etcd.foreign`)."""
        if url in self.etcd.foreign:
            return etcd_types.MemberList((FOREIGN_MEMBER,), FOREIGN_CLUSTER_ID, member_id=FOREIGN_MEMBER.id)
        return etcd_types.MemberList(members, CLUSTER_ID, member_id=fake_member_id(url))

    def endpoint_health(self, cluster_id: int = 0) -> list[etcd_types.EndpointHealth]:
        self.etcd.asked.append(("endpoint health", self.endpoints))
        self.etcd.expected_cluster_ids.append(cluster_id)
        return [etcd_types.EndpointHealth(endpoint=url, healthy=url not in self.etcd.dying,
                                   error="context deadline exceeded" if url in self.etcd.dying else "")
                for url in self.endpoints]

    def peer_views(self) -> list[PeerView | ctl.EtcdctlError]:
        """Each endpoint's `etcd.peer_views` entry, else its metrics fail."""
        self.etcd.peer_views_asked.append(self.endpoints)
        return [self.etcd.peer_views.get(url) or ctl.Unreachable(f"{url}: connection refused")
                for url in self.endpoints]

    def endpoint_status(self, cluster_id: int = 0) -> list[etcd_types.EndpointStatus]:
        self.etcd.asked.append(("endpoint status", self.endpoints))
        self.etcd.expected_cluster_ids.append(cluster_id)
        return [etcd_types.EndpointStatus(endpoint=url, member_id=FOREIGN_MEMBER.id if url in self.etcd.foreign else fake_member_id(url),
                                   leader_id=self.etcd.leader_id, version="3.5.1", raft_index=10, raft_term=2, db_size=1,
                                   is_learner=False, errors=self.etcd.status_errors, revision=self.etcd.revision,
                                   cluster_id=FOREIGN_CLUSTER_ID if url in self.etcd.foreign else CLUSTER_ID)
                for url in self.endpoints]

    def hash_kvs(self, revision: int, cluster_id: int = 0) -> list[etcd_types.HashKV | ctl.EtcdctlError]:
        """Each endpoint's `etcd.hashes` entry at `revision`, else it does not answer."""
        self.etcd.asked.append((f"hashkv {revision}", self.endpoints))
        return [etcd_types.HashKV(self.etcd.hashes[url], 1, revision) if url in self.etcd.hashes
                else ctl.Unreachable(f"{url}: context deadline exceeded") for url in self.endpoints]


def fake_member_id(url: str) -> int:
    return MEMBERS.index(url.split("//")[1].split(".")[0]) + 1


class FakeEtcd:
    def __init__(self, member_list_error: str = "") -> None:
        self.asked: list[tuple[str, list[str]]] = []
        self.member_list_error = member_list_error
        self.dying: set[str] = set()  # endpoints that accept connections but answer nothing
        self.expected_cluster_ids: list[int] = []  # the cluster ID each health/status call was given
        self.foreign: set[str] = set()  # endpoints where a member of another etcd cluster answers
        self.leader_id = 1  # the leader every status names (0: none)
        self.peer_views: dict[str, PeerView] = {}  # what an endpoint's /metrics says (absent: it fails)
        self.peer_views_asked: list[list[str]] = []
        self.status_errors: tuple[str, ...] = ()  # every status's errors (alarms: "alarm:CORRUPT ")
        self.revision = 0  # every status's store revision
        self.hashes: dict[str, int] = {}  # each endpoint's keyspace hash (absent: it does not answer)

    def probe(self, cluster: EtcdCluster, endpoints: Sequence[str], *, timeout_seconds: float = 2.0) -> Any:
        return FakeClient(self, endpoints)


def pods(cluster: EtcdCluster) -> list[dict[str, Any]]:
    result = []
    for member in MEMBERS:
        pod = build_member_pod(cluster, member, state="existing", initial_cluster=[])
        pod["metadata"].update({"creationTimestamp": "2024-05-01T12:00:00Z", "uid": member})
        pod["status"] = LIVE_POD_STATUS
        result.append(pod)
    return result


def observe(cluster: EtcdCluster, etcd: FakeEtcd, listening: set[str]) -> Any:
    return observe_cluster(cluster, pods=pods(cluster), services=[], pvcs=[], etcd=etcd,  # type: ignore[arg-type]
                           connectable=lambda urls: {u for u in urls if u in listening})
