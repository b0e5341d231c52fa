"""spec.paused: the operator observes and reports, and changes nothing, until unpaused."""
from __future__ import annotations

import time

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.etcd_data import member_ids
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster

OBSERVATION_SECONDS = 10.0
SAMPLE_SECONDS = 0.5  # sampling the paused cluster, not waiting for anything
MEMBERSHIP_EVENTS = ("MemberAdded", "MemberRemoved", "MemberPodCreated", "PodDeleted", "SeedMemberCreated")


def _membership_events(clusters: Clusters, name: str) -> dict[tuple[str, str], int]:
    return {(e.reason, e.message): e.count or 1 for e in clusters.events(name) if e.reason in MEMBERSHIP_EVENTS}


def test_paused_cluster_is_not_repaired_until_unpaused(clusters: Clusters) -> None:
    name = "paused"
    clusters.create(etcd_cluster(name, size=3))
    status = clusters.wait_running(name, ready=3, timeout=180)
    before = member_ids(clusters, name)
    victim = next(m for m in sorted(before) if m != status["leader"])

    clusters.patch_spec(name, {"paused": True})
    clusters.wait_status(name, lambda s: s.get("controlPaused") is True, "controlPaused true", timeout=30)
    events_before = _membership_events(clusters, name)
    clusters.core.delete_namespaced_pod(victim, clusters.namespace)
    wait_for(lambda: victim not in {p.metadata.name for p in clusters.pods(name)}, timeout=60,
             what=f"pod {victim} gone")

    survivors = set(before) - {victim}
    deadline = time.monotonic() + OBSERVATION_SECONDS
    samples = 0
    while time.monotonic() < deadline:
        pods = {p.metadata.name for p in clusters.pods(name)}
        assert pods == survivors, f"paused, yet the pods changed: {sorted(pods)} (expected {sorted(survivors)})"
        status = clusters.status(name)
        assert status.get("controlPaused") is True, f"controlPaused is not true while paused: {status}"
        samples += 1
        time.sleep(SAMPLE_SECONDS)
    assert samples >= OBSERVATION_SECONDS / SAMPLE_SECONDS / 2, f"only {samples} samples in the window"
    # the dead member is still in etcd: nothing was removed while paused
    assert member_ids(clusters, name) == before
    assert _membership_events(clusters, name) == events_before, "membership events while paused"

    clusters.patch_spec(name, {"paused": False})

    def repaired() -> set[str] | None:
        pods = {p.metadata.name for p in clusters.live_pods(name)}
        new = pods - set(before)
        return new if len(pods) == 3 and survivors <= pods and len(new) == 1 else None
    new_member = wait_for(repaired, timeout=180, what="a replacement member pod after unpausing").pop()
    status = clusters.wait_status(
        name,
        lambda s: s.get("controlPaused") is False and s.get("phase") == "Running" and s.get("readyCount") == 3
        and s.get("size") == 3 and new_member in (s.get("members") or {}).get("ready", []),
        "unpaused and Running 3/3 with the replacement ready", timeout=180,
    )
    after = member_ids(clusters, name)
    assert set(after) == survivors | {new_member}, after
