"""Quorum loss is reported (status, Warning event, metric) and never "repaired" destructively;
the operator keeps serving other clusters meanwhile, and the cluster recovers on its own once
its members are back."""
from __future__ import annotations

from typing import Any

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.etcd_operator.operator_deployment import operator_metric
from tests.integration.etcd_operator.status_history import conditions

ETCD_CONTAINER = "etcd"
QUORUM_METRIC = "etcd_operator_cluster_quorum"
MEMBERSHIP_EVENTS = ("MemberAdded", "MemberRemoved", "MemberPodCreated", "PodDeleted", "SeedMemberCreated")


def _pod_uids(clusters: Clusters, name: str) -> dict[str, str]:
    return {p.metadata.name: p.metadata.uid for p in clusters.pods(name)}


def _membership_events(clusters: Clusters, name: str) -> dict[tuple[str, str], int]:
    return {(e.reason, e.message): e.count or 1 for e in clusters.events(name) if e.reason in MEMBERSHIP_EVENTS}


def _quorum_lost(status: dict[str, Any]) -> bool:
    available = conditions(status).get("Available", ("", ""))
    return status.get("phase") == "Failed" and available == ("False", "QuorumLost")


def _reporting_problems(clusters: Clusters, name: str, metric_labels: dict[str, str]) -> list[str]:
    """How the status, events and metrics fail to report the quorum loss (empty: all good)."""
    problems: list[str] = []
    seen: list[dict[str, Any]] = []

    def reported() -> dict[str, Any] | None:
        status = clusters.status(name)
        seen.append(status)
        return status if _quorum_lost(status) else None
    try:
        status = wait_for(reported, timeout=60, what="phase Failed with Available=False (QuorumLost)")
        degraded = conditions(status).get("Degraded", ("", ""))
        if degraded[0] != "True" or "quorum" not in degraded[1].lower():
            problems.append(f"Degraded condition does not name the quorum loss: {degraded}")
    except AssertionError as e:
        reasons = sorted({(s.get("phase"), s.get("reason"), conditions(s).get("Available")) for s in seen}, key=str)
        problems.append(f"{e}; (phase, reason, Available) seen: {reasons}; last message: {seen[-1].get('message') if seen else None}")
    try:
        warning = wait_for(
            lambda: next((e for e in clusters.events(name) if e.reason == "QuorumLost" and e.type == "Warning"), None),
            timeout=30, what="a Warning event QuorumLost",
        )
        if "quorum" not in warning.message.lower():
            problems.append(f"QuorumLost event message: {warning.message}")
    except AssertionError as e:
        problems.append(f"{e}; events: {[(ev.type, ev.reason) for ev in clusters.events(name)]}")
    try:
        wait_for(lambda: operator_metric(clusters.sandbox, QUORUM_METRIC, metric_labels) == 0.0, timeout=30,
                 what=f"{QUORUM_METRIC}{metric_labels} == 0")
    except AssertionError as e:
        problems.append(str(e))
    return problems


def test_quorum_loss_is_reported_not_repaired_and_other_clusters_are_served(clusters: Clusters) -> None:
    ns = clusters.namespace
    a, b = "stricken", "bystander"
    clusters.create(etcd_cluster(a, size=3))
    clusters.create(etcd_cluster(b, size=3))
    status_a = clusters.wait_running(a, ready=3, timeout=240)
    clusters.wait_running(b, ready=3, timeout=240)
    pods_a = _pod_uids(clusters, a)
    events_a = _membership_events(clusters, a)
    frozen = sorted(m for m in pods_a if m != status_a["leader"])  # two of three; the leader is left alone
    metric_labels = {"namespace": ns, "cluster": a}

    try:
        for pod in frozen:
            clusters.sandbox.faults.freeze_container(ns, pod, ETCD_CONTAINER)
        clusters.wait_status(a, lambda s: s.get("phase") == "Failed", "phase Failed", timeout=60)

        # The operator still serves the other cluster: a deleted member is replaced.
        before_b = _pod_uids(clusters, b)
        victim = sorted(before_b)[0]
        clusters.core.delete_namespaced_pod(victim, ns)

        def replaced() -> set[str] | None:
            pods = {p.metadata.name for p in clusters.live_pods(b)}
            new = pods - set(before_b)
            return new if len(pods) == 3 and victim not in pods and len(new) == 1 else None
        new_member = wait_for(replaced, timeout=180, what=f"{b}'s deleted member replaced").pop()
        clusters.wait_status(
            b, lambda s: s.get("phase") == "Running" and s.get("readyCount") == 3 and s.get("size") == 3
            and new_member in (s.get("members") or {}).get("ready", []),
            "Running 3/3 with the replacement", timeout=180,
        )

        # Reported clearly (checked fully before failing, so the rest below still runs)...
        problems = _reporting_problems(clusters, a, metric_labels)
        # ...and nothing done to the stricken cluster: same pods, no membership change.
        assert _pod_uids(clusters, a) == pods_a, "pods of the cluster without quorum were deleted or replaced"
        assert _membership_events(clusters, a) == events_a, "membership changed without quorum"
        assert clusters.status(a).get("phase") == "Failed", clusters.status(a)
    finally:
        for pod in frozen:
            clusters.sandbox.faults.thaw_container(ns, pod, ETCD_CONTAINER)

    status = clusters.wait_running(a, ready=3, timeout=120)
    assert conditions(status)["Available"][0] == "True", status
    assert _pod_uids(clusters, a) == pods_a
    assert _membership_events(clusters, a) == events_a
    wait_for(lambda: operator_metric(clusters.sandbox, QUORUM_METRIC, metric_labels) == 1.0, timeout=30,
             what=f"{QUORUM_METRIC}{metric_labels} == 1")
    assert not problems, "quorum loss not reported clearly:\n  " + "\n  ".join(problems)
