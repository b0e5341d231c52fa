"""History that fills an etcd database for the maintenance figures: the same few keys overwritten
in transactions of several puts through a member's gRPC gateway, so the database grows with every
write while the data in use stays small; and the gateway calls made around it (revision, database
size, compaction, a probe write). The operator's cluster and the raw floor get the same load."""
from __future__ import annotations

import base64
import time
from dataclasses import dataclass
from typing import Any

from etcd_common.etcd.etcdctl import EtcdctlError
from etcd_common.etcd.probe import gateway_request

MIB = 1024 * 1024
NO_SPACE_ERROR = "database space exceeded"
VALUE_BYTES = 256 * 1024
PUTS_PER_TXN = 4  # 1 MiB per request: etcd takes requests up to 1.5 MiB
# The data in use is this fraction of the quota: after a compaction most of the database is reclaimable.
IN_USE_FRACTION = 1 / 16
KEY_PREFIX = "bench-history/"
REQUEST_TIMEOUT_SECONDS = 30.0
PROBE_TIMEOUT_SECONDS = 2.0
TXN_PATH = "/v3/kv/txn"
PUT_PATH = "/v3/kv/put"
STATUS_PATH = "/v3/maintenance/status"
COMPACTION_PATH = "/v3/kv/compaction"


def keys_for(quota_bytes: int) -> int:
    """How many keys the load overwrites: IN_USE_FRACTION of the quota, at least one transaction's."""
    return max(int(quota_bytes * IN_USE_FRACTION) // VALUE_BYTES, PUTS_PER_TXN)


def txn_request(round_number: int, keys: int) -> dict[str, Any]:
    """The gateway's TxnRequest of one round: the next PUTS_PER_TXN keys in turn, each value tagged
    with its round (no compare, so it applies unless etcd refuses the write)."""
    puts = []
    for index in range(PUTS_PER_TXN):
        key = f"{KEY_PREFIX}{(round_number * PUTS_PER_TXN + index) % keys:05d}"
        tag = f"{round_number:08d}.{index:02d}."
        puts.append({"requestPut": {"key": _b64(key), "value": _b64(tag + "v" * (VALUE_BYTES - len(tag)))}})
    return {"success": puts}


@dataclass
class HistoryWriter:
    """Overwrites `keys` keys through the gateway at `url`, PUTS_PER_TXN per request."""

    url: str
    keys: int
    written_bytes: int = 0
    _round: int = 0

    def write_once(self) -> bool:
        """One transaction: True if etcd took it, False if it refused it for NOSPACE; any other
        failure is raised."""
        request = txn_request(self._round, self.keys)
        self._round += 1
        try:
            gateway_request(self.url, "POST", TXN_PATH, request, tls=None, timeout_seconds=REQUEST_TIMEOUT_SECONDS)
        except EtcdctlError as e:
            if NO_SPACE_ERROR in e.message:
                return False
            raise
        self.written_bytes += VALUE_BYTES * PUTS_PER_TXN
        return True

    def fill_until_refused(self, limit_bytes: int) -> float:
        """Write until etcd refuses a write for NOSPACE; time.monotonic() of that refusal."""
        while self.written_bytes < limit_bytes:
            if not self.write_once():
                return time.monotonic()
        raise RuntimeError(f"{self.url}: no NOSPACE after {self.written_bytes / MIB:.0f} MiB written")

    def write(self, total_bytes: int) -> None:
        """Write `total_bytes` more (in whole transactions); NOSPACE meanwhile is an error."""
        until = self.written_bytes + total_bytes
        while self.written_bytes < until:
            if not self.write_once():
                raise RuntimeError(f"{self.url}: NOSPACE after {self.written_bytes / MIB:.0f} MiB written")


def write_accepted(url: str) -> bool:
    """Does the member at `url` take a small write now? (Refused, busy or unreachable: False.)"""
    try:
        gateway_request(url, "POST", PUT_PATH, {"key": _b64(f"{KEY_PREFIX}probe"), "value": _b64("1")},
                        tls=None, timeout_seconds=PROBE_TIMEOUT_SECONDS)
    except EtcdctlError:
        return False
    return True


def member_status(url: str) -> dict[str, Any]:
    return gateway_request(url, "POST", STATUS_PATH, {}, tls=None, timeout_seconds=REQUEST_TIMEOUT_SECONDS)


def revision(url: str) -> int:
    return int(member_status(url)["header"]["revision"])


def db_size(url: str) -> int:
    return int(member_status(url).get("dbSize") or 0)


def compact(url: str, revision_number: int) -> None:
    """Compact history up to `revision_number`, waiting until every member applied it."""
    gateway_request(url, "POST", COMPACTION_PATH, {"revision": revision_number, "physical": True}, tls=None,
                    timeout_seconds=REQUEST_TIMEOUT_SECONDS)


def compact_all_history(url: str) -> None:
    """Compact up to the current revision, then write once: etcd 3.6 followers go on reporting
    the space in use before a compaction until their next write commits (measured on plain
    members: 32 MiB in use on the followers, 4 MiB on the leader, until one put), and the operator
    would see nothing to reclaim on them. Clients that write make this happen on their own."""
    compact(url, revision(url))
    if not write_accepted(url):
        raise RuntimeError(f"{url}: the write after the compaction was refused")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()
