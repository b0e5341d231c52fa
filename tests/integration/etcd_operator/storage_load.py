"""Load that fills an etcd cluster's database: the same keys overwritten with large values, in
transactions through the client service, so history grows while the live data stays small."""
from __future__ import annotations

import json
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from kube_sandbox.testing import Sandbox, wait_for

NO_SPACE_ERROR = "database space exceeded"


@dataclass
class Overwriter:
    """Overwrites `keys` keys `<prefix><n>` with `value_bytes`-byte values, `keys_per_txn` puts per
    `etcdctl txn`, at most `bytes_per_second` (0: as fast as it goes). Remembers the last value
    acknowledged per key, and the values tried since (a write that timed out may still apply)."""

    sandbox: Sandbox
    endpoint: str
    prefix: str
    keys: int = 50
    value_bytes: int = 16 * 1024
    keys_per_txn: int = 10
    bytes_per_second: int = 0
    acknowledged: dict[str, str] = field(default_factory=dict)
    unsure: dict[str, set[str]] = field(default_factory=dict)
    refusals: list[float] = field(default_factory=list)  # when NOSPACE refused a write
    failures: list[str] = field(default_factory=list)  # any other failure
    written_bytes: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    _round: int = 0

    def write_once(self) -> bool:
        """One transaction; True if acknowledged."""
        start = (self._round * self.keys_per_txn) % self.keys
        batch = {f"{self.prefix}{(start + i) % self.keys:03d}": self._value(i) for i in range(self.keys_per_txn)}
        self._round += 1
        script = "\n" + "".join(f"put {key} {value}\n" for key, value in batch.items()) + "\n\n"
        try:
            result = self.sandbox.etcdctl([self.endpoint], "txn", "--command-timeout=5s", stdin=script, timeout=30)
            ok, error = result.returncode == 0 and result.stdout.startswith("SUCCESS"), result.stderr.strip()[-300:]
        except Exception as e:  # a hung etcdctl counts as a failed write
            ok, error = False, repr(e)
        if ok:
            self.acknowledged.update(batch)
            for key in batch:
                self.unsure.pop(key, None)
            self.written_bytes += self.value_bytes * len(batch)
            return True
        for key, value in batch.items():
            self.unsure.setdefault(key, set()).add(value)
        if NO_SPACE_ERROR in error:
            self.refusals.append(time.monotonic())
        else:
            self.failures.append(error)
        return False

    def run_for(self, seconds: float, until_bytes: int = 0) -> None:
        """Write steadily for `seconds` (paced to `bytes_per_second`), or until `stop` is set, or
        (`until_bytes`) until that many bytes are written."""
        started = time.monotonic()
        while (not self.stop.is_set() and time.monotonic() - started < seconds
               and not (until_bytes and self.written_bytes >= until_bytes)):
            began = time.monotonic()
            self.write_once()
            if self.bytes_per_second:  # a rate limit (no catching up after a slow write), not a synchronisation
                spacing = self.value_bytes * self.keys_per_txn / self.bytes_per_second
                self.stop.wait(max(began + spacing - time.monotonic(), 0.0))

    def lost(self, stored: dict[str, str]) -> dict[str, str]:
        """Keys whose stored value is neither the last acknowledged one nor one tried after it."""
        return {key: value for key, value in self.acknowledged.items()
                if stored.get(key) != value and stored.get(key) not in self.unsure.get(key, set())}

    def _value(self, index: int) -> str:
        tag = f"{self._round:08d}.{index:02d}."
        return tag + "v" * (self.value_bytes - len(tag))


def member_status(pod_ip: str) -> dict[str, Any]:
    """The member's own `endpoint status` (database size, alarms), asked at its pod IP."""
    return _post(pod_ip, "/v3/maintenance/status", {})


def raise_alarm(pod_ip: str, member_id: int, alarm: str) -> None:
    """Raise an alarm for a member through etcd's alarm API (ACTIVATE), as a test may."""
    _post(pod_ip, "/v3/maintenance/alarm", {"action": "ACTIVATE", "memberID": str(member_id), "alarm": alarm})


def _post(pod_ip: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(f"http://{pod_ip}:2379{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        document: dict[str, Any] = json.loads(response.read())
        return document


def corrupt_member_data(sandbox: Sandbox, pod_uid: str, original: bytes, damaged: bytes) -> None:
    """Silent data corruption on one member, as a bad disk makes it: `original` (a value written
    through etcd, unique in the cluster) overwritten in place with `damaged` (same length) in the
    member's bbolt file on its emptyDir. etcd maps that file shared, so what it reads and hashes
    changes at once, while its peers keep the true value."""
    assert len(original) == len(damaged)
    pattern = f"kubelet/pods/{pod_uid}/volumes/*/data/member/snap/db"
    [database] = sandbox.config.state_dir.glob(pattern)

    def committed() -> bool:  # etcd's backend commits every 100 ms
        return original in database.read_bytes()
    wait_for(committed, timeout=30, what=f"{original!r} written to {database}")
    content = database.read_bytes()
    with database.open("r+b") as file:
        start = content.find(original)
        while start >= 0:
            file.seek(start)
            file.write(damaged)
            start = content.find(original, start + 1)
        file.flush()
