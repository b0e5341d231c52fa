"""A member whose etcd process dies restarts in place; a member whose pod is deleted is replaced
by a new member, with every key kept and the replacement visible in the status conditions."""
from __future__ import annotations

from typing import Any

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.etcd_data import member_ids, member_url, read_prefix
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.etcd_operator.status_history import StatusHistory, conditions

ETCD_CONTAINER = "etcd"
MEMBERSHIP_EVENTS = ("MemberAdded", "MemberRemoved", "MemberPodCreated", "PodDeleted", "SeedMemberCreated")


def _etcd_status(pod: Any) -> Any:
    return next(s for s in pod.status.container_statuses or [] if s.name == ETCD_CONTAINER)


def _membership_events(clusters: Clusters, name: str) -> dict[tuple[str, str], int]:
    return {(e.reason, e.message): e.count or 1 for e in clusters.events(name) if e.reason in MEMBERSHIP_EVENTS}


def _pod_ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def test_killed_etcd_process_restarts_in_place_as_the_same_member(clusters: Clusters) -> None:
    name = "crashy"
    ns = clusters.namespace
    clusters.create(etcd_cluster(name, size=3))
    status = clusters.wait_running(name, ready=3, timeout=180)
    clusters.put(name, "before-crash", "kept")
    ids_before = member_ids(clusters, name)
    assert len(ids_before) == 3, ids_before
    victim_name = status["leader"]  # the leader: its death also forces an election
    victim = clusters.core.read_namespaced_pod(victim_name, ns)
    restarts_before = _etcd_status(victim).restart_count
    events_before = _membership_events(clusters, name)

    clusters.sandbox.faults.crash_container(ns, victim_name, ETCD_CONTAINER)

    def restarted_and_ready() -> Any:
        pod = clusters.core.read_namespaced_pod(victim_name, ns)
        etcd = _etcd_status(pod)
        return pod if etcd.restart_count > restarts_before and etcd.state.running and _pod_ready(pod) else None
    pod = wait_for(restarted_and_ready, timeout=120, what=f"{victim_name} restarted in place and ready")
    assert pod.metadata.uid == victim.metadata.uid, "the pod was replaced instead of restarted in place"

    status = clusters.wait_status(
        name,
        lambda s: s.get("phase") == "Running" and s.get("readyCount") == 3 and s.get("size") == 3
        and victim_name in (s.get("members") or {}).get("ready", []),
        f"Running 3/3 with {victim_name} ready again", timeout=90,
    )
    assert member_ids(clusters, name) == ids_before, "membership changed: the member was not restarted in place"
    assert sorted(p.metadata.name for p in clusters.live_pods(name)) == sorted(ids_before)
    local = read_prefix(clusters.sandbox, [member_url(clusters, name, victim_name)], "before-crash", serializable=True)
    assert local == {"before-crash": "kept"}, f"restarted member's own data: {local}"
    assert _membership_events(clusters, name) == events_before, "the operator changed membership"


def test_deleted_member_pod_is_replaced_by_a_new_member_without_data_loss(clusters: Clusters) -> None:
    name = "phoenix"
    ns = clusters.namespace
    clusters.create(etcd_cluster(name, size=3))
    status = clusters.wait_running(name, ready=3, timeout=180)
    written = {f"data/{i:02d}": f"value-{i}" for i in range(30)}
    for key, value in written.items():
        clusters.put(name, key, value)
    ids_before = member_ids(clusters, name)
    victim = status["leader"]

    with StatusHistory(clusters, name) as history:
        clusters.core.delete_namespaced_pod(victim, ns)

        def replaced() -> set[str] | None:
            pods = {p.metadata.name for p in clusters.pods(name)}
            new = pods - set(ids_before)
            return new if len(pods) == 3 and victim not in pods and len(new) == 1 else None
        new_member = wait_for(replaced, timeout=180, what=f"{victim}'s pod replaced by a new member's pod").pop()
        clusters.wait_status(
            name,
            lambda s: s.get("phase") == "Running" and s.get("readyCount") == 3 and s.get("size") == 3
            and new_member in (s.get("members") or {}).get("ready", [])
            and conditions(s).get("Available", ("",))[0] == "True"
            and conditions(s).get("Recovering", ("",))[0] == "False",
            f"Running 3/3 with {new_member} ready", timeout=180,
        )

    ids_after = member_ids(clusters, name)
    assert set(ids_after) == set(ids_before) - {victim} | {new_member}, ids_after
    assert ids_after[new_member] not in ids_before.values()
    assert all(ids_after[m] == ids_before[m] for m in ids_after if m != new_member)
    assert read_prefix(clusters.sandbox, clusters.member_urls(name), "data/") == written
    # the new member holds every key itself, not just through the others
    local = read_prefix(clusters.sandbox, [member_url(clusters, name, new_member)], "data/", serializable=True)
    assert local == written, f"new member has {len(local)} of {len(written)} keys"

    statuses = history.snapshot()
    sequence = "\n  ".join(history.distinct_summaries())
    recovering = [i for i, s in enumerate(statuses) if conditions(s).get("Recovering", ("",))[0] == "True"]
    if history.errors:
        sequence += f"\n(watch errors: {history.errors})"
    assert recovering, f"no status with Recovering=True; statuses seen:\n  {sequence}"
    assert any(
        conditions(s).get("Available", ("",))[0] == "True" and conditions(s).get("Recovering", ("",))[0] == "False"
        and s.get("readyCount") == 3
        for s in statuses[recovering[0] + 1:]
    ), f"no Available=True, Recovering=False status after recovering; statuses seen:\n  {sequence}"
    print(f"\nstatus sequence:\n  {sequence}")
