"""Members on PVCs that cannot come back (issue 27, item 4): a member pod held in Terminating by a
finalizer is reported (status, a Warning event naming the finalizer) and, once stuck past the
operator's --unhealthy-member-timeout-seconds, its member is replaced while its PVC stays as long
as the pod does; a member whose data directory is gone while its pod was away is never started
as an existing member with empty raft state (etcd refuses: only itself in --initial-cluster), is
reported as MemberDataMissing and replaced. Every acknowledged write survives both.

Real kube-apiserver (finalizers held by the API), the sandbox's process kubelet, real etcd."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.etcd_data import member_ids, member_url, read_prefix
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.etcd_operator.operator_deployment import operator_env, operator_stopped
from tests.integration.etcd_operator.status_history import StatusHistory, conditions

# It reconfigures and stops the operator every other test relies on.
pytestmark = pytest.mark.alone

BOUND_SECONDS = 10
# Long enough for a few crash-loop restarts to be reported before the member is replaced.
DATA_BOUND_SECONDS = 30
PVC_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
HOLD = "etcd-operator-py.test/hold"  # the test's own finalizer: the pod stays Terminating


def _events(clusters: Clusters, name: str, reason: str, member: str) -> list[Any]:
    return [e for e in clusters.events(name) if e.reason == reason and member in (e.message or "")]


def _follower(clusters: Clusters, name: str, status: dict[str, Any]) -> str:
    return sorted(p.metadata.name for p in clusters.live_pods(name) if p.metadata.name != status["leader"])[0]


def _replaced(clusters: Clusters, name: str, victim: str, before: dict[str, int]) -> str:
    def replacement() -> set[str] | None:
        live = {p.metadata.name for p in clusters.live_pods(name)}
        new = live - set(before)
        return new if len(live) == 3 and victim not in live and len(new) == 1 else None
    new_member: str = wait_for(replacement, timeout=180, what=f"{victim} replaced by a new member").pop()
    clusters.wait_status(
        name,
        lambda s: s.get("phase") == "Running" and s.get("readyCount") == 3
        and new_member in (s.get("members") or {}).get("ready", [])
        and conditions(s).get("Available", ("",))[0] == "True",
        f"Running 3/3 with {new_member} ready", timeout=240)
    return new_member


def _write(clusters: Clusters, name: str) -> dict[str, str]:
    written = {f"data/{i:02d}": f"value-{i}" for i in range(20)}
    for key, value in written.items():
        clusters.put(name, key, value)
    return written


def _check_data(clusters: Clusters, name: str, written: dict[str, str], new_member: str) -> None:
    assert read_prefix(clusters.sandbox, clusters.member_urls(name), "data/") == written
    local = read_prefix(clusters.sandbox, [member_url(clusters, name, new_member)], "data/", serializable=True)
    assert local == written, f"new member has {len(local)} of {len(written)} keys"


def _release(clusters: Clusters, pod: str) -> None:
    try:
        clusters.core.patch_namespaced_pod(pod, clusters.namespace, {"metadata": {"finalizers": None}})
    except ApiException as e:
        if e.status != 404:  # gone already is fine
            raise


def test_a_member_pod_stuck_terminating_is_reported_and_replaced(clusters: Clusters) -> None:
    name = "held"
    ns = clusters.namespace
    with operator_env(clusters.sandbox, UNHEALTHY_MEMBER_TIMEOUT_SECONDS=str(BOUND_SECONDS)):
        clusters.create(etcd_cluster(name, size=3, pod={"persistentVolumeClaimSpec": PVC_SPEC}))
        status = clusters.wait_running(name, ready=3, timeout=240)
        written = _write(clusters, name)
        before = member_ids(clusters, name)
        victim = _follower(clusters, name, status)
        clusters.core.patch_namespaced_pod(victim, ns, {"metadata": {"finalizers": [HOLD]}})
        try:
            with StatusHistory(clusters, name) as history:
                clusters.core.delete_namespaced_pod(victim, ns)
                reported = wait_for(lambda: _events(clusters, name, "MemberNotStarting", victim), timeout=120,
                                    what=f"Warning event about the stuck {victim}")
                removed = wait_for(lambda: _events(clusters, name, "MemberRemoved", victim), timeout=180,
                                   what=f"MemberRemoved event for {victim}")
                new_member = _replaced(clusters, name, victim, before)
            # The stuck pod still holds its claim: the member's data is not touched while it stays.
            pod = clusters.core.read_namespaced_pod(victim, ns)
            assert pod.metadata.deletion_timestamp is not None and HOLD in (pod.metadata.finalizers or [])
            claims = {str(c.metadata.name) for c in clusters.core.list_namespaced_persistent_volume_claim(ns).items}
            assert victim in claims, f"{victim}'s PVC deleted while its pod stays: {sorted(claims)}"
        finally:
            _release(clusters, victim)
        wait_for(lambda: victim not in {str(c.metadata.name) for c in
                                        clusters.core.list_namespaced_persistent_volume_claim(ns).items},
                 timeout=120, what=f"{victim}'s PVC deleted once its pod is gone")

    event = reported[0]
    print(f"\nreported: {event.type} {event.reason}: {event.message}\nremoved: {removed[0].message}\nstatus sequence:\n  "
          + "\n  ".join(history.distinct_summaries()))
    assert event.type == "Warning" and "stuck terminating" in event.message and HOLD in event.message, event.message
    assert "stuck terminating" in removed[0].message and HOLD in removed[0].message, removed[0].message
    assert any(f"member pod {victim} is stuck terminating" in s.get("message", "") for s in history.snapshot())
    after = member_ids(clusters, name)
    assert set(after) == set(before) - {victim} | {new_member}, after
    assert all(after[m] == before[m] for m in after if m != new_member)
    _check_data(clusters, name, written, new_member)


def _claim_directory(clusters: Clusters, claim: str) -> Path:
    volume = clusters.core.read_namespaced_persistent_volume_claim(claim, clusters.namespace).spec.volume_name
    return Path(clusters.core.read_persistent_volume(volume).spec.host_path.path)


def test_a_member_whose_data_is_gone_never_rejoins_under_its_old_id(clusters: Clusters) -> None:
    name = "wiped"
    ns = clusters.namespace
    with operator_env(clusters.sandbox, UNHEALTHY_MEMBER_TIMEOUT_SECONDS=str(DATA_BOUND_SECONDS)):
        clusters.create(etcd_cluster(name, size=3, pod={"persistentVolumeClaimSpec": PVC_SPEC}))
        status = clusters.wait_running(name, ready=3, timeout=240)
        written = _write(clusters, name)
        before = member_ids(clusters, name)
        victim = _follower(clusters, name, status)
        data_dir = _claim_directory(clusters, victim) / "data"
        assert (data_dir / "member" / "wal").is_dir(), f"no etcd data at {data_dir}"
        with StatusHistory(clusters, name) as history:
            with operator_stopped(clusters.sandbox):
                # Its pod goes while nobody watches, and its data directory with it (a disk wiped,
                # a claim restored from an empty snapshot): the claim stays.
                clusters.core.delete_namespaced_pod(victim, ns)
                wait_for(lambda: victim not in {p.metadata.name for p in clusters.pods(name)}, timeout=120,
                         what=f"{victim}'s pod gone")
                shutil.rmtree(data_dir)
            # The operator recreates the pod on the claim; etcd finds no data and refuses to start.
            wait_for(lambda: any("MemberDataMissing" in s.get("message", "") and victim in s.get("message", "")
                                 for s in history.snapshot()),
                     timeout=120, what=f"status reporting {victim}'s missing data")
            assert not (data_dir / "member" / "wal").exists(), f"{victim}'s etcd started on the empty data directory"
            removed = wait_for(lambda: _events(clusters, name, "MemberRemoved", victim), timeout=180,
                               what=f"MemberRemoved event for {victim}")
            new_member = _replaced(clusters, name, victim, before)

    print(f"\nremoved: {removed[0].message}\nstatus sequence:\n  " + "\n  ".join(history.distinct_summaries()))
    assert "unhealthy for" in removed[0].message, removed[0].message
    reported = [s for s in history.snapshot() if "MemberDataMissing" in s.get("message", "")]
    assert "cannot fetch cluster info" in reported[0]["message"] or "finds no data" in reported[0]["message"]
    after = member_ids(clusters, name)
    assert set(after) == set(before) - {victim} | {new_member}, after
    assert all(after[m] == before[m] for m in after if m != new_member)
    _check_data(clusters, name, written, new_member)
