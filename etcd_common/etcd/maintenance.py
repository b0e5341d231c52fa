"""Maintenance requests to one etcd member over its gRPC gateway: compaction, defragmentation,
disarming an alarm, and whether history is compacted (the only read here).

Each call names the member's endpoint: defragmentation is per member (it blocks that member
while it rewrites its database file), the others are cluster-wide and any member serves them.
Failures are the etcdctl wrapper's error classes, as for `EtcdProbe`.
"""
from __future__ import annotations

from dataclasses import dataclass

from etcd_common.etcd.alarms import Alarm
from etcd_common.etcd.etcdctl import EtcdctlError
from etcd_common.etcd.probe import HEALTH_READ_REQUEST, RANGE_PATH, gateway_request
from etcd_common.etcd.types import ClientTLS

DEFRAGMENT_PATH = "/v3/maintenance/defragment"
COMPACTION_PATH = "/v3/kv/compaction"
ALARM_PATH = "/v3/maintenance/alarm"
# etcd's answer to a compaction at or below the compacted revision, and to a read of one.
COMPACTED_ERROR = "required revision has been compacted"


@dataclass(frozen=True)
class EtcdMaintenance:
    """Maintenance calls with the cluster's client certificate (None: plain http)."""

    tls: ClientTLS | None = None
    timeout_seconds: float = 5.0

    def defragment(self, endpoint: str, *, timeout_seconds: float) -> None:
        """Defragment the member at `endpoint`; returns when it finished (it serves nothing meanwhile)."""
        gateway_request(endpoint, "POST", DEFRAGMENT_PATH, {}, tls=self.tls, timeout_seconds=timeout_seconds)

    def compact(self, endpoint: str, revision: int) -> bool:
        """Compact history up to `revision` and wait until every member applied it (`physical`);
        False if history was compacted that far already."""
        try:
            gateway_request(endpoint, "POST", COMPACTION_PATH, {"revision": revision, "physical": True},
                            tls=self.tls, timeout_seconds=self.timeout_seconds)
        except EtcdctlError as e:
            if COMPACTED_ERROR in e.message:
                return False
            raise
        return True

    def compacted_through(self, endpoint: str, revision: int) -> bool:
        """Is history before `revision` compacted away? (A serializable read of `revision - 1`,
        which etcd refuses once compacted.)"""
        if revision <= 1:
            return True
        request = {**HEALTH_READ_REQUEST, "revision": revision - 1, "serializable": True, "count_only": True}
        try:
            gateway_request(endpoint, "POST", RANGE_PATH, request, tls=self.tls, timeout_seconds=self.timeout_seconds)
        except EtcdctlError as e:
            if COMPACTED_ERROR in e.message:
                return True
            raise
        return False

    def disarm(self, endpoint: str, alarm: Alarm) -> None:
        """Deactivate one alarm (one kind, one member): `etcdctl alarm disarm` would clear them all."""
        body = {"action": "DEACTIVATE", "memberID": str(alarm.member_id), "alarm": alarm.kind}
        gateway_request(endpoint, "POST", ALARM_PATH, body, tls=self.tls, timeout_seconds=self.timeout_seconds)
