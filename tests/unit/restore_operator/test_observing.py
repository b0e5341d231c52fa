"""The pure parts of observing: another restore in progress, a failing seed init container, the
recorded status read back; the staging claims and pods found (by label, and the expected ones by
name)."""
from __future__ import annotations

from typing import Any

from restore_operator.observing import observe_staging, other_restore_in_progress, parse_recorded, seed_problem
from tests.unit.restore_operator.etcd_restore_builders import UID, restore
from tests.unit.restore_operator.supervisor_fakes import FakeClient

CLUSTER = {"metadata": {"name": "c", "namespace": "ns", "labels": {"etcd.database.coreos.com/restore": "first"}}}


def restore_named(uid: str, phase: str) -> Any:
    return lambda ns, name: {"metadata": {"name": name, "uid": uid}, "status": {"phase": phase}}


def test_other_restore_in_progress_only_while_it_runs_and_only_if_it_is_that_one() -> None:
    assert other_restore_in_progress(CLUSTER, "u1", restore_named("u1", "Restoring")) == "first"
    assert other_restore_in_progress(CLUSTER, "u1", restore_named("u1", "Completed")) == ""
    assert other_restore_in_progress(CLUSTER, "u1", restore_named("u2", "Restoring")) == ""  # recreated since
    assert other_restore_in_progress(CLUSTER, "u1", lambda ns, name: None) == ""
    assert other_restore_in_progress(CLUSTER, "", restore_named("u1", "Restoring")) == ""


def test_seed_problem_names_the_failing_init_container() -> None:
    pod = {"metadata": {"name": "c-abcde"}, "status": {"initContainerStatuses": [
        {"name": "restore-fetch", "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
         "lastState": {"terminated": {"exitCode": 1}}}]}}
    problem = seed_problem([pod])
    assert problem.startswith("seed pod c-abcde Init:CrashLoopBackOff: restore-fetch exited 1 (2 restarts)")
    healthy = {"metadata": {"name": "c-abcde"}, "status": {"initContainerStatuses": [
        {"name": "restore-fetch", "state": {"terminated": {"exitCode": 0}}}]}}
    assert seed_problem([healthy]) == ""
    unpullable = {"metadata": {"name": "c-abcde"}, "status": {"initContainerStatuses": [
        {"name": "restore-fetch", "state": {"terminated": {"exitCode": 0}}},
        {"name": "restore-snapshot", "state": {"waiting": {"reason": "ImagePullBackOff", "message": "no v3.6.0"}}}]}}
    assert seed_problem([unpullable]) == "seed pod c-abcde Init:ImagePullBackOff: restore-snapshot: no v3.6.0"
    waiting_its_turn = {"metadata": {"name": "c-abcde"}, "status": {"initContainerStatuses": [
        {"name": "restore-snapshot", "state": {"waiting": {"reason": "PodInitializing"}}}]}}
    assert seed_problem([waiting_its_turn]) == ""


def test_recorded_status_round_trip() -> None:
    recorded = parse_recorded({"phase": "Replacing", "observedGeneration": 2, "clusterSpec": {"size": 5},
                               "snapshot": {"sha256": "ab", "size": 10, "revision": 7, "totalKeys": 3}})
    assert recorded.phase == "Replacing" and recorded.cluster_spec == {"size": 5}
    assert recorded.snapshot is not None and recorded.snapshot.revision == 7
    assert parse_recorded({"snapshot": {}}).snapshot is None


def test_a_restore_the_coreos_operator_finished_is_never_run_again() -> None:
    """A migrated EtcdRestore keeps CoreOS's status ({succeeded, reason}, no phase): re-running it
    would replace the live cluster with the old snapshot."""
    from restore_operator.planning import PHASE_COMPLETED, PHASE_FAILED

    done = parse_recorded({"succeeded": True}, generation=3)
    assert done.phase == PHASE_COMPLETED
    failed = parse_recorded({"succeeded": False, "reason": "failed to restore the seed"}, generation=3)
    assert (failed.phase, failed.observed_generation) == (PHASE_FAILED, 3)
    assert parse_recorded({}, generation=3).phase == ""  # never reconciled: runs


def test_staging_claims_are_found_by_label_and_the_expected_ones_by_name() -> None:
    """Ours (labelled) whatever their number; an expected name held by an unlabelled object of
    someone else; nothing else. Broken by looking only by label (another's claim would be written)
    or only by the expected names (a claim of an earlier, larger size would stay behind)."""
    def claim(name: str, *, labelled: bool, owner: str) -> dict[str, Any]:
        labels = {"etcd.database.coreos.com/restore": "r", "app.kubernetes.io/component": "restore-staging"} if labelled else {}
        return {"metadata": {"name": name, "labels": labels, "ownerReferences": [{"uid": owner}]}}

    claims = FakeClient({
        "r-staging": claim("r-staging", labelled=True, owner=UID),
        "r-staging-4": claim("r-staging-4", labelled=True, owner=UID),
        "r-staging-1": claim("r-staging-1", labelled=False, owner="someone-else"),
        "other": claim("other", labelled=False, owner="someone-else"),
    })
    found, pods = observe_staging(restore(), FakeClient(), claims, ("r-staging", "r-staging-1", "r-staging-2"))
    assert pods == {}
    assert {name: seen.owned for name, seen in found.items()} == {
        "r-staging": True, "r-staging-4": True, "r-staging-1": False}


def test_staging_pods_are_found_by_label_and_the_expected_ones_by_name() -> None:
    """A pod per claim, of its name: ours (labelled as this restore's staging objects) whatever
    their number; an expected name held by an unlabelled pod of someone else; not a member pod
    labelled with the restore's name alone. Broken by looking only by label (another's pod of
    that name would be taken for absent, and the restore would wait on it), or only by the
    expected names (a pod of an earlier, larger size would stay behind)."""
    staging = {"etcd.database.coreos.com/restore": "r", "app.kubernetes.io/component": "restore-staging"}

    def pod(name: str, labels: dict[str, str], owner: str, phase: str = "Running") -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": labels, "ownerReferences": [{"uid": owner}]},
                "status": {"phase": phase}}

    pods = FakeClient({
        "r-staging": pod("r-staging", staging, UID, "Succeeded"),
        "r-staging-4": pod("r-staging-4", staging, UID),
        "r-staging-2": pod("r-staging-2", {}, "someone-else"),
        "c-0": pod("c-0", {"etcd.database.coreos.com/restore": "r"}, "someone-else"),
    })
    _, found = observe_staging(restore(), pods, FakeClient(), ("r-staging", "r-staging-1", "r-staging-2"))
    assert {name: (seen.owned, seen.phase) for name, seen in found.items()} == {
        "r-staging": (True, "Succeeded"), "r-staging-4": (True, "Running"), "r-staging-2": (False, "Running")}
