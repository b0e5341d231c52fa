"""A client that keeps writing to a cluster while a test disturbs it, for checks that nothing
acknowledged is lost and that writes keep flowing."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from kube_sandbox.testing import Sandbox


@dataclass
class Writer:
    """Writes `<prefix><n>` through `endpoint` (a cluster's client service), one etcdctl put after
    another, until finished; remembers what was acknowledged, when, and what failed. `flags`: extra
    etcdctl flags, e.g. the TLS files of an https endpoint."""

    sandbox: Sandbox
    endpoint: str
    prefix: str
    flags: tuple[str, ...] = ()
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
                result = self.sandbox.etcdctl([self.endpoint], *self.flags, "put", key, value, "--command-timeout=5s")
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
