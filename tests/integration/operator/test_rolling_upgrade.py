"""Changing spec.version rolls the members one at a time while clients keep writing: every
acknowledged write survives and writes keep succeeding throughout."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from etcd_data import read_prefix
from kube_sandbox.testing import Sandbox, wait_for
from operator_clusters import Clusters, etcd_cluster
from status_history import conditions

OLD_VERSION, NEW_VERSION = "3.4.23", "3.5.1"
IMAGE = "quay.io/coreos/etcd:v{}"
PREFIX = "upgrade/"
# Leader moves and member removals may fail a few writes; never for longer than this.
MAX_WRITE_GAP_SECONDS = 20.0


@dataclass
class Writer:
    """Writes `upgrade/<n>` through the client service, one etcdctl put after another."""

    sandbox: Sandbox
    endpoint: str
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
            key, value = f"{PREFIX}{n:06d}", f"value-{n}"
            n += 1
            try:
                result = self.sandbox.etcdctl([self.endpoint], "put", key, value, "--command-timeout=5s")
                ok = result.returncode == 0 and result.stdout.strip() == "OK"
                error = result.stderr.strip()[-200:]
            except Exception as e:  # a hung etcdctl counts as a failed write
                ok, error = False, repr(e)
            if ok:
                self.acknowledged[key] = value
                self.success_times.append(time.monotonic())
            else:
                self.failures.append((time.monotonic(), error))

    def longest_gap(self, start: float, end: float) -> float:
        """Longest stretch within [start, end] without a successful write."""
        times = [start, *(t for t in self.success_times if start <= t <= end), end]
        return max(b - a for a, b in zip(times, times[1:]))


def test_rolling_upgrade_keeps_writes_flowing_and_loses_nothing(clusters: Clusters) -> None:
    name = "rolling"
    clusters.create(etcd_cluster(name, size=3, version=OLD_VERSION))
    status = clusters.wait_running(name, ready=3, timeout=180)
    assert status["currentVersion"] == OLD_VERSION
    assert {p.spec.containers[0].image for p in clusters.live_pods(name)} == {IMAGE.format(OLD_VERSION)}

    writer = Writer(clusters.sandbox, clusters.client_url(name))
    writer.start()
    try:
        wait_for(lambda: len(writer.acknowledged) >= 5, timeout=30, what="writer making progress before the upgrade")
        started = time.monotonic()
        clusters.patch_spec(name, {"version": NEW_VERSION})
        last: list[str] = []

        def upgraded() -> bool:
            status = clusters.status(name)
            pods = clusters.live_pods(name)
            images = sorted(p.spec.containers[0].image for p in pods)
            last[:] = [f"status {status.get('phase')} {status.get('readyCount')}/{status.get('size')} "
                       f"current={status.get('currentVersion')} message={status.get('message')}; images {images}"]
            return (status.get("currentVersion") == NEW_VERSION and status.get("phase") == "Running"
                    and status.get("readyCount") == 3 and status.get("size") == 3
                    and images == [IMAGE.format(NEW_VERSION)] * 3
                    and conditions(status).get("Upgrading", ("",))[0] == "False")
        try:
            wait_for(upgraded, timeout=420, what=f"every member on {NEW_VERSION}")
        except AssertionError as e:
            raise AssertionError(f"{e}\nlast seen: {last}") from None
        finished = time.monotonic()
        # and writes still work once it is done
        count = len(writer.acknowledged)
        wait_for(lambda: len(writer.acknowledged) >= count + 5, timeout=30, what="writes after the upgrade")
    finally:
        writer.finish()

    failures = "\n  ".join(f"{t - started:6.1f}s {e}" for t, e in writer.failures[-10:])
    gap = writer.longest_gap(started, finished)
    print(f"\nupgrade took {finished - started:.1f}s; writes: {len(writer.acknowledged)} acknowledged, "
          f"{len(writer.failures)} failed, longest gap {gap:.1f}s")
    assert gap <= MAX_WRITE_GAP_SECONDS, f"no successful write for {gap:.1f}s during the upgrade; last failures:\n  {failures}"

    stored = read_prefix(clusters.sandbox, clusters.member_urls(name), PREFIX)
    lost = {k: v for k, v in writer.acknowledged.items() if stored.get(k) != v}
    assert not lost, f"{len(lost)} acknowledged writes lost or changed, e.g. {sorted(lost)[:5]}"
    status = clusters.status(name)
    assert not status.get("targetVersion") and status["currentVersion"] == NEW_VERSION, status
