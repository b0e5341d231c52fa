"""Progress never blocks forever: a member frozen with SIGSTOP (alive, accepting connections,
answering nothing) stays unhealthy; once it has been unhealthy past the operator's
--unhealthy-member-timeout-seconds it is removed and replaced by a new member while the others
keep quorum, the removal is reported (event, status), and every acknowledged write survives.
A learner whose pod starts with a stale --initial-cluster (etcd exits: "member count is unequal")
never answers; it is removed once its pod is older than the bound, and the cluster converges.

The frozen member is the leader: the others elect a new leader within etcd's election timeout, so
the operator removes a follower that answers nothing (a leader that cannot hand leadership over is
never waited for; tests/unit/etcd_operator/test_stuck_members.py covers the leader cases)."""
from __future__ import annotations

from typing import Any

import pytest

from etcd_operator.manifests import build_member_pod, member_peer_url
from etcd_operator.spec import parse_etcd_cluster
from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.client_writes import Writer
from tests.integration.etcd_operator.etcd_data import member_ids, member_url, read_prefix
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.etcd_operator.operator_deployment import operator_env, operator_stopped
from tests.integration.etcd_operator.status_history import StatusHistory, conditions

# It stops, restarts or reconfigures the operator every other test relies on.
pytestmark = pytest.mark.alone

ETCD_CONTAINER = "etcd"
BOUND_SECONDS = 10


def _removal_events(clusters: Clusters, name: str, member: str) -> list[Any]:
    return [e for e in clusters.events(name) if e.reason == "MemberRemoved" and member in (e.message or "")]


def test_a_frozen_leader_is_replaced_after_the_bound_without_losing_writes(clusters: Clusters) -> None:
    name = "frozen"
    ns = clusters.namespace
    with operator_env(clusters.sandbox, UNHEALTHY_MEMBER_TIMEOUT_SECONDS=str(BOUND_SECONDS)):
        clusters.create(etcd_cluster(name, size=3))
        status = clusters.wait_running(name, ready=3, timeout=240)
        written = {f"data/{i:02d}": f"value-{i}" for i in range(20)}
        for key, value in written.items():
            clusters.put(name, key, value)
        ids_before = member_ids(clusters, name)
        victim = status["leader"]
        writer = Writer(clusters.sandbox, clusters.client_url(name), "during/")
        writer.start()
        frozen = True
        try:
            with StatusHistory(clusters, name) as history:
                clusters.sandbox.faults.freeze_container(ns, victim, ETCD_CONTAINER)
                removed = wait_for(lambda: _removal_events(clusters, name, victim), timeout=180,
                                   what=f"MemberRemoved event for the frozen {victim}")
                frozen = False  # its pod is deleted with the removal (the kubelet SIGKILLs it)

                def replaced() -> set[str] | None:
                    live = {p.metadata.name for p in clusters.live_pods(name)}
                    new = live - set(ids_before)
                    return new if len(live) == 3 and victim not in live and len(new) == 1 else None
                new_member = wait_for(replaced, timeout=180, what=f"{victim} replaced by a new member").pop()
                clusters.wait_status(
                    name,
                    lambda s: s.get("phase") == "Running" and s.get("readyCount") == 3 and s.get("size") == 3
                    and new_member in (s.get("members") or {}).get("ready", [])
                    and conditions(s).get("Available", ("",))[0] == "True",
                    f"Running 3/3 with {new_member} ready", timeout=240,
                )
            converged_count = len(writer.acknowledged)
            wait_for(lambda: writer.progressed(converged_count + 5), timeout=60,
                     what="writes flowing after the replacement")
        finally:
            writer.finish()
            if frozen:
                clusters.sandbox.faults.thaw_container(ns, victim, ETCD_CONTAINER)

    message = removed[0].message
    assert "unhealthy for" in message and f"bound {BOUND_SECONDS}s" in message, message
    ids_after = member_ids(clusters, name)
    assert set(ids_after) == set(ids_before) - {victim} | {new_member}, ids_after
    assert all(ids_after[m] == ids_before[m] for m in ids_after if m != new_member), "only the frozen one replaced"
    assert read_prefix(clusters.sandbox, clusters.member_urls(name), "data/") == written
    local = read_prefix(clusters.sandbox, [member_url(clusters, name, new_member)], "data/", serializable=True)
    assert local == written, f"new member has {len(local)} of {len(written)} keys"
    during = read_prefix(clusters.sandbox, clusters.member_urls(name), "during/")
    lost = {k: v for k, v in writer.acknowledged.items() if during.get(k) != v}
    assert writer.acknowledged and not lost, f"{len(lost)} acknowledged write(s) lost: {sorted(lost)[:5]}"
    summaries = history.distinct_summaries()
    print(f"\n{len(writer.acknowledged)} writes acknowledged, {len(writer.failures)} failed during the freeze;"
          f" removal: {message}\nstatus sequence:\n  " + "\n  ".join(summaries))
    statuses = history.snapshot()
    assert any(victim in (s.get("members") or {}).get("unready", []) and victim in s.get("message", "")
               and "unhealthy" in s.get("message", "") for s in statuses), \
        "no status reported the frozen member as unhealthy:\n  " + "\n  ".join(s.get("message", "") for s in statuses)


def test_a_learner_started_with_a_stale_initial_cluster_is_removed_after_the_bound(clusters: Clusters) -> None:
    name = "stale"
    ns = clusters.namespace
    learner = f"{name}-stale"  # a member name of the operator's shape (<cluster>-<5 chars>)
    with operator_env(clusters.sandbox, UNHEALTHY_MEMBER_TIMEOUT_SECONDS=str(BOUND_SECONDS)):
        clusters.create(etcd_cluster(name, size=3))
        clusters.wait_running(name, ready=3, timeout=240)
        written = {f"data/{i:02d}": f"value-{i}" for i in range(10)}
        for key, value in written.items():
            clusters.put(name, key, value)
        ids_before = member_ids(clusters, name)
        with operator_stopped(clusters.sandbox):
            # Growing to 4, an add whose pod was built from an outdated member list (say, by a
            # crashed pass before a membership change): the learner is listed and needed, but its
            # etcd refuses to start, so waiting for it would block the growth forever.
            clusters.patch_spec(name, {"size": 4})
            cluster = parse_etcd_cluster(clusters.get(name))
            url = member_peer_url(cluster, learner)
            def added() -> bool:
                # etcd refuses an add ("unhealthy cluster") until its newest member is connected for 5 s.
                result = clusters.sandbox.etcdctl(clusters.member_urls(name), "member", "add", learner, "--learner",
                                                  f"--peer-urls={url}")
                return result.returncode == 0 or "Peer URLs already exists" in result.stderr
            wait_for(added, timeout=60, what=f"learner {learner} added")
            first = sorted(ids_before)[0]
            stale = [(first, member_peer_url(cluster, first)), (learner, url)]
            pod = build_member_pod(cluster, learner, state="existing", initial_cluster=stale)
            clusters.core.create_namespaced_pod(ns, pod)
        removed = wait_for(lambda: _removal_events(clusters, name, learner), timeout=180,
                           what=f"MemberRemoved event for the stuck learner {learner}")
        wait_for(lambda: learner not in {p.metadata.name for p in clusters.pods(name)}, timeout=120,
                 what=f"{learner}'s pod deleted")
        clusters.wait_running(name, ready=4, timeout=240)
    message = removed[0].message
    print(f"\nremoval: {message}")
    assert f"learner did not answer within {BOUND_SECONDS}s" in message, message
    ids_after = member_ids(clusters, name)
    assert len(clusters.member_list(name)) == 4 and learner not in ids_after, ids_after
    assert all(ids_after[m] == ids_before[m] for m in ids_before), ids_after
    assert read_prefix(clusters.sandbox, clusters.member_urls(name), "data/") == written
