"""Changing spec.version rolls the members one at a time while clients keep writing through the
client service: every acknowledged write survives, writes never stall, and none fails. Each member
is restarted in its pod on the new image (same member, address and data), after leaving the client
service (drained: its serving label removed, its endpoint gone), so no write is caught on it as it
goes; the leader goes last and hands leadership over itself as it stops."""
from __future__ import annotations

import time

from kube_sandbox.binaries import DEBIAN_ETCD_VERSION, newest_etcd_version
from kube_sandbox.testing import wait_for
from tests.check_perf import raft_term
from tests.integration.etcd_operator.client_writes import Writer, assert_only_leader_change_drops
from tests.integration.etcd_operator.etcd_data import read_prefix
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.etcd_operator.status_history import conditions

# 3.4 (Debian's, as clusters the CoreOS operator left run it) -> newest 3.5 -> newest 3.6.
UPGRADE_PATH = (DEBIAN_ETCD_VERSION, newest_etcd_version("3.5"), newest_etcd_version("3.6"))
IMAGE = "quay.io/coreos/etcd:v{}"
PREFIX = "upgrade/"
# Writes may slow down while leadership moves; never stall for longer than this.
MAX_WRITE_GAP_SECONDS = 20.0


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
    leader_changes: dict[str, int] = {}
    failed: dict[str, list[tuple[float, str]]] = {}
    try:
        wait_for(lambda: len(writer.acknowledged) >= 5, timeout=30, what="writer making progress before the upgrade")
        for version in upgrades:
            failed_before = len(writer.failures)
            term_before = raft_term(clusters.sandbox, [clusters.client_url(name)])
            started, finished = _upgrade(clusters, name, writer, version)
            leader_changes[version] = raft_term(clusters.sandbox, [clusters.client_url(name)]) - term_before
            failed[version] = writer.failures[failed_before:]
            gap = writer.longest_gap(started, finished)
            steps.append(f"-> {version}: {finished - started:.1f}s, {len(writer.failures) - failed_before} failed "
                         f"writes, longest gap {gap:.1f}s, {leader_changes[version]} leader change(s)")
            assert gap <= MAX_WRITE_GAP_SECONDS, f"no successful write for {gap:.1f}s during the upgrade to {version}"
    finally:
        writer.finish()

    print(f"\nupgrades {' '.join(steps)}; writes: {len(writer.acknowledged)} acknowledged, "
          f"{len(writer.failures)} failed")
    for at, error in writer.failures:
        print(f"  failed write at {time.strftime('%H:%M:%S', time.gmtime(time.time() - (time.monotonic() - at)))}: {error}")
    for event in sorted(clusters.events(name), key=lambda e: str(e.last_timestamp or e.event_time or "")):
        if event.reason in ("LeaderMoved", "MemberDraining", "MemberRemoved", "MemberAdded", "MemberPromoted",
                            "MemberServing", "ServiceUpdated"):
            print(f"  event {event.last_timestamp} {event.reason}: {(event.message or '')[:140]}")
    # Members are drained from the client service before they go: no put is caught on one (a cut
    # connection, "raft: stopped"). What may fail is etcd's own drop at a leader change, only in a
    # step that changed leaders, at most MAX_FAILED_WRITES_PER_LEADER_CHANGE each.
    outside = len(writer.failures) - sum(len(failures) for failures in failed.values())
    assert outside == 0, f"{outside} writes failed outside an upgrade step:\n  " + "\n  ".join(
        e for _, e in writer.failures[-5:])
    for version, failures in failed.items():
        assert_only_leader_change_drops([e for _, e in failures], leader_changes[version], f"the upgrade to {version}")
    # In place, each step drains the same three pods: an event repeated is counted (`count`), not listed again.
    drained = sum(e.count or 1 for e in clusters.events(name) if e.reason == "MemberDraining")
    assert drained >= 3 * len(upgrades), f"only {drained} members drained before their restart"
    upgraded = sum(e.count or 1 for e in clusters.events(name) if e.reason == "MemberUpgrading")
    assert upgraded >= 3 * len(upgrades), f"{upgraded} members restarted in place, not every member at each step"
    stored = read_prefix(clusters.sandbox, clusters.member_urls(name), PREFIX)
    lost = {k: v for k, v in writer.acknowledged.items() if stored.get(k) != v}
    assert not lost, f"{len(lost)} acknowledged writes lost or changed, e.g. {sorted(lost)[:5]}"
    status = clusters.status(name)
    assert not status.get("targetVersion") and status["currentVersion"] == upgrades[-1], status
