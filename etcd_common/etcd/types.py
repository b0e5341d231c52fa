"""What etcd answers, as plain values: members, endpoint status and health, member lists, snapshot
status, keyspace hashes, and client TLS files. Pure data (no process, no network), so that the
decisions that read them (etcd_operator.planning) import nothing that runs etcdctl."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlparse

from etcd_common.etcd.alarms import Alarm, parse_alarms


@dataclass(frozen=True)
class Member:
    """One entry of `etcdctl member list`. A member added but never started has no name and no
    client URLs."""

    id: int
    name: str
    peer_urls: tuple[str, ...]
    client_urls: tuple[str, ...] = ()
    is_learner: bool = False

    @property
    def started(self) -> bool:
        """etcd fills in name and client URLs when the member first runs; an added member
        whose process never started has neither."""
        return bool(self.name) and bool(self.client_urls)

    @property
    def member_name(self) -> str:
        """Its name, or, for one that never started, the name in its peer URL."""
        if self.name:
            return self.name
        for url in self.peer_urls:
            name = member_name_from_peer_url(url)
            if name:
                return name
        return f"unstarted-{self.id:x}"

    @property
    def hex_id(self) -> str:
        return format_member_id(self.id)


def member_name_from_peer_url(url: str) -> str | None:
    """`http://example-abcde.example.default.svc:2380` -> `example-abcde`; None for IP hosts."""
    host = urlparse(url).hostname
    if not host:
        return None
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        return host.split(".", 1)[0]


@dataclass(frozen=True)
class EndpointStatus:
    """`etcdctl endpoint status` for one endpoint; an unreachable endpoint has member_id 0 and
    the failure in `errors`."""

    member_id: int
    leader_id: int
    version: str = ""
    raft_index: int = 0
    raft_term: int = 0
    endpoint: str = ""
    db_size: int = 0
    is_learner: bool = False
    errors: tuple[str, ...] = ()
    # The store revision the member answered with (its response header).
    revision: int = 0
    # Bytes of the database file in use; `db_size` minus this is what defragmentation reclaims.
    db_size_in_use: int = 0
    # The etcd cluster the member answered for (its response header; 0: not reported).
    cluster_id: int = 0

    @property
    def alarms(self) -> tuple[Alarm, ...]:
        """The cluster's raised alarms, as this member reports them in `errors`."""
        return parse_alarms(self.errors)

    @property
    def reachable(self) -> bool:
        return self.member_id != 0

    @property
    def is_leader(self) -> bool:
        return self.reachable and self.member_id == self.leader_id


@dataclass(frozen=True)
class EndpointHealth:
    endpoint: str
    healthy: bool
    error: str
    # The etcd cluster the member answered for (0: not reported; etcdctl's health JSON has none).
    cluster_id: int = 0


@dataclass(frozen=True)
class MemberList:
    """`member list` with the ID of the etcd cluster that answered it (its response header; 0:
    not reported). That ID is the cluster's: answers for another ID come from another cluster."""

    members: tuple[Member, ...]
    cluster_id: int = 0
    # The member that answered (its response header; 0: not reported).
    member_id: int = 0

    @property
    def responder(self) -> Member | None:
        """The member that answered, as the list it gave names it (None: not reported, or not listed)."""
        return next((m for m in self.members if self.member_id and m.id == self.member_id), None)


@dataclass(frozen=True)
class ClientTLS:
    """Client certificate files for an etcd cluster that serves TLS to clients."""

    ca_file: str
    cert_file: str
    key_file: str


@dataclass(frozen=True)
class SnapshotStatus:
    """`etcdutl snapshot status` of a snapshot file."""

    hash: int
    revision: int
    total_keys: int
    total_size: int
    # The storage version etcd 3.6 records in the file; "" for snapshots of 3.4/3.5 servers.
    storage_version: str


@dataclass(frozen=True)
class HashKV:
    """`etcdctl endpoint hashkv --rev`: the hash of the MVCC keyspace up to `hash_revision`, which
    also depends on the compaction (`compact_revision`): two members agree on it only when both
    have compacted to the same revision."""

    hash: int
    compact_revision: int
    hash_revision: int


def format_member_id(member_id: int) -> str:
    """etcdctl prints member ids as uint64 decimals in JSON but takes them as hex arguments."""
    return f"{member_id:x}"
