"""A client that keeps writing to a cluster while a test disturbs it, for checks that nothing
acknowledged is lost and that writes keep flowing."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from kube_sandbox.testing import Sandbox
from tests.check_perf import LEADER_CHANGE_ERRORS

# etcd drops the proposals in flight at a leader change (docs/clients.md, etcd-io/etcd#8975):
# "raft proposal dropped" at once, "request timed out" after 7 s for one a follower forwarded, or
# the writer's own 5-s deadline first. At most this many per leader change (measured: 0-2).
LEADER_CHANGE_CLIENT_ERRORS = (*LEADER_CHANGE_ERRORS, "context deadline exceeded")
MAX_FAILED_WRITES_PER_LEADER_CHANGE = 2


def assert_only_leader_change_drops(failures: list[str], leader_changes: int, during: str) -> None:
    """The writes that failed `during` a change are etcd's own drops at its leader changes, as
    docs/clients.md says a client must retry, and no more of them than those changes explain; any
    other failure (a cut connection, "raft: stopped") fails the test."""
    other = [error for error in failures if not any(kind in error for kind in LEADER_CHANGE_CLIENT_ERRORS)]
    assert not other, f"{len(other)} writes failed during {during}:\n  " + "\n  ".join(other[-5:])
    assert len(failures) <= MAX_FAILED_WRITES_PER_LEADER_CHANGE * leader_changes, (
        f"{len(failures)} writes dropped during {during}, which saw {leader_changes} leader change(s):\n  "
        + "\n  ".join(failures[-5:]))


@dataclass
class Writer:
    """Writes `<prefix><n>` through `endpoint` (a cluster's client service), one etcdctl put after
    another, until finished; remembers what was acknowledged, when, and what failed. `flags`: extra
    etcdctl flags, e.g. the TLS files of an https endpoint. `deadline_seconds`: each put's
    `--command-timeout`; above etcd's own 7-s request timeout, a failed put is etcd's verdict (the
    proposal dropped or timed out in raft), not the client giving up on a slow machine."""

    sandbox: Sandbox
    endpoint: str
    prefix: str
    flags: tuple[str, ...] = ()
    deadline_seconds: int = 5
    acknowledged: dict[str, str] = field(default_factory=dict)
    success_times: list[float] = field(default_factory=list)
    failures: list[tuple[float, str]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, name="writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def finish(self) -> None:
        self.stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            key, value = f"{self.prefix}{n:06d}", f"value-{n}"
            n += 1
            try:
                result = self.sandbox.etcdctl([self.endpoint], *self.flags, "put", key, value,
                                             f"--command-timeout={self.deadline_seconds}s")
                ok = result.returncode == 0 and result.stdout.strip() == "OK"
                error = result.stderr.strip()[-200:]
            except Exception as e:  # a hung etcdctl counts as a failed write
                ok, error = False, repr(e)
            if ok:
                self.acknowledged[key] = value
                self.success_times.append(time.monotonic())
            else:
                self.failures.append((time.monotonic(), error))

    def progressed(self, count: int) -> bool:
        return len(self.acknowledged) >= count

    def longest_gap(self, start: float, end: float) -> float:
        """Longest stretch within [start, end] without a successful write."""
        times = [start, *(t for t in self.success_times if start <= t <= end), end]
        return max(b - a for a, b in zip(times, times[1:]))
