"""Changing spec.version rolls the members one at a time while clients keep writing: every
acknowledged write survives, writes never stall, and the only writes that fail are the few caught
on a member at the instant it is removed or hands over leadership (etcd's own "raft: stopped",
"raft proposal dropped", or gRPC's for a server that went away)."""
from __future__ import annotations

import time

from tests.integration.etcd_operator.etcd_data import read_prefix
from kube_sandbox.binaries import DEBIAN_ETCD_VERSION, newest_etcd_version
from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.client_writes import Writer
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.etcd_operator.status_history import conditions

# 3.4 (Debian's, as clusters the CoreOS operator left run it) -> newest 3.5 -> newest 3.6.
UPGRADE_PATH = (DEBIAN_ETCD_VERSION, newest_etcd_version("3.5"), newest_etcd_version("3.6"))
IMAGE = "quay.io/coreos/etcd:v{}"
PREFIX = "upgrade/"
# Writes may slow down while leadership moves; never stall for longer than this.
MAX_WRITE_GAP_SECONDS = 20.0
# What a client sees for a request caught on a member that is being removed or that hands over
# leadership: etcd's own errors, or, when the removed member's process exits with the request in
# flight, gRPC's for a server that went away (Unavailable: connection reset, EOF; DeadlineExceeded:
# left unanswered until the client's deadline). Either way the outcome is unknown to the client.
# Anything else (a refused connection to a member that should serve, an error of etcd's that is not
# about membership) is a failure; so are more failures than the bound below, a long gap or a lost write.
MEMBER_CHANGE_ERRORS = ("raft: stopped", "raft proposal dropped", "etcdserver: server stopped",
                        "etcdserver: leader changed", "code = Unavailable desc = error reading from server",
                        "code = DeadlineExceeded desc = stream terminated by RST_STREAM")
# One step rolls three members (and moves leadership once): at most one caught put each.
MAX_FAILED_WRITES_PER_STEP = 4


def _upgrade(clusters: Clusters, name: str, writer: Writer, version: str) -> tuple[float, float]:
    """Patch spec.version and wait until every member runs it; returns (started, finished)."""
    started = time.monotonic()
    clusters.patch_spec(name, {"version": version})
    last: list[str] = []

    def upgraded() -> bool:
        status = clusters.status(name)
        pods = clusters.live_pods(name)
        images = sorted(p.spec.containers[0].image for p in pods)
        last[:] = [f"status {status.get('phase')} {status.get('readyCount')}/{status.get('size')} "
                   f"current={status.get('currentVersion')} message={status.get('message')}; images {images}"]
        return (status.get("currentVersion") == version and status.get("phase") == "Running"
                and status.get("readyCount") == 3 and status.get("size") == 3
                and images == [IMAGE.format(version)] * 3
                and conditions(status).get("Upgrading", ("",))[0] == "False")
    try:
        wait_for(upgraded, timeout=420, what=f"every member on {version}")
    except AssertionError as e:
        raise AssertionError(f"{e}\nlast seen: {last}") from None
    finished = time.monotonic()
    count = len(writer.acknowledged)  # and writes still work once it is done
    wait_for(lambda: len(writer.acknowledged) >= count + 5, timeout=30, what=f"writes after the upgrade to {version}")
    return started, finished


def test_rolling_upgrades_3_4_to_3_5_to_3_6_lose_no_acknowledged_write(clusters: Clusters) -> None:
    """The path of a cluster the CoreOS operator left on 3.4: one minor version at a time."""
    name = "rolling"
    first, *upgrades = UPGRADE_PATH
    clusters.create(etcd_cluster(name, size=3, version=first))
    # 3.4 runs (and grows 1 -> 3 by learner add + promote) but is flagged as an upgrade source only.
    status = clusters.wait_running(name, ready=3, timeout=180)
    assert status["currentVersion"] == first
    assert {p.spec.containers[0].image for p in clusters.live_pods(name)} == {IMAGE.format(first)}
    assert conditions(status)["VersionSupported"] == ("False", "UpgradeSourceOnly"), status["conditions"]
    wait_for(lambda: any(e.reason == "UpgradeSourceOnly" and e.type == "Warning" for e in clusters.events(name)),
             timeout=30, what="an UpgradeSourceOnly Warning event")

    # Skipping 3.5 is refused with the step to take, and nothing is touched.
    pods_before = sorted(p.metadata.uid for p in clusters.live_pods(name))
    clusters.patch_spec(name, {"version": upgrades[-1]})
    refused = clusters.wait_status(
        name, lambda s: conditions(s).get("VersionSupported") == ("False", "UpgradeRefused"),
        "the 3.4 -> 3.6 skip refused", timeout=60)
    refusal = next(c for c in refused["conditions"] if c["type"] == "VersionSupported")["message"]
    assert upgrades[0] in refusal, refusal
    assert sorted(p.metadata.uid for p in clusters.live_pods(name)) == pods_before

    writer = Writer(clusters.sandbox, clusters.client_url(name), PREFIX)
    writer.start()
    steps: list[str] = []
    try:
        wait_for(lambda: len(writer.acknowledged) >= 5, timeout=30, what="writer making progress before the upgrade")
        for version in upgrades:
            failed_before = len(writer.failures)
            started, finished = _upgrade(clusters, name, writer, version)
            gap = writer.longest_gap(started, finished)
            steps.append(f"-> {version}: {finished - started:.1f}s, {len(writer.failures) - failed_before} failed "
                         f"writes, longest gap {gap:.1f}s")
            assert gap <= MAX_WRITE_GAP_SECONDS, f"no successful write for {gap:.1f}s during the upgrade to {version}"
    finally:
        writer.finish()

    print(f"\nupgrades {' '.join(steps)}; writes: {len(writer.acknowledged)} acknowledged, "
          f"{len(writer.failures)} failed")
    # A put in flight on a member at the instant it is removed or loses leadership fails with
    # etcd's own error (its outcome unknown to the client, as with any etcd client); nothing else may fail.
    unexpected = [e for _, e in writer.failures if not any(m in e for m in MEMBER_CHANGE_ERRORS)]
    assert not unexpected, f"{len(unexpected)} writes failed for other reasons:\n  " + "\n  ".join(unexpected[-5:])
    assert len(writer.failures) <= MAX_FAILED_WRITES_PER_STEP * len(upgrades), writer.failures
    stored = read_prefix(clusters.sandbox, clusters.member_urls(name), PREFIX)
    lost = {k: v for k, v in writer.acknowledged.items() if stored.get(k) != v}
    assert not lost, f"{len(lost)} acknowledged writes lost or changed, e.g. {sorted(lost)[:5]}"
    status = clusters.status(name)
    assert not status.get("targetVersion") and status["currentVersion"] == upgrades[-1], status
