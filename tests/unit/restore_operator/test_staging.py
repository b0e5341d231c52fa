"""Issue 22 item 1, the decision: nothing of a cluster is deleted (or created) before the staging
pods (one per member's claim) proved the seed can fetch and read the verified snapshot; every
staging outcome has its action, the Staging phase its bound, and a finished restore's staging
objects go."""
from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from etcd_common.api.etcd_cluster import parse_cluster_spec
from etcd_common.api.maintenance import format_bytes
from etcd_common.seed.space import seed_space_needed_bytes
from restore_operator import actions as a
from restore_operator import planning as p
from restore_operator.acting import staging_source
from restore_operator.observed import ObservedRestore, RecordedRestore
from restore_operator.staging import (
    StagingClaim,
    StagingPod,
    build_staging_claim,
    build_staging_pod,
    parse_staging_pod,
    staging_claim_bytes,
    staging_claim_names,
    staging_pod_problem,
    staging_pod_progress,
    staging_selector,
)
from restore_operator.status import STAGING_BASE_TIMEOUT_SECONDS, staging_timeout_seconds
from tests.unit.restore_operator.etcd_restore_builders import FACTS, REPLACED, UID, all_claims, all_pods, cluster, restore

CLAIM = StagingClaim(owned=True, phase="Bound")
THREE = ("r-staging", "r-staging-1", "r-staging-2")
NOW = datetime(2026, 1, 1, tzinfo=UTC)
NEW = {"etcdCluster": {"name": "c"}, "backupStorageType": "S3", "s3": {"path": "bucket/key", "awsSecret": "aws"},
       "clusterSpec": {"size": 1}}


def pod(phase: str = "Pending", **fields: Any) -> StagingPod:
    return StagingPod(phase=phase, owned=True, **fields)


def seen(*, staging_pod: StagingPod | None = None, staging_claim: StagingClaim | None = None,
         recorded: RecordedRestore | None = None, **fields: Any) -> ObservedRestore:
    """A verified restore of someone else's Running cluster of 3 members (rule 5) unless told
    otherwise; `staging_claim` as each of its 3 staging claims (or `staging_claims` by name),
    `staging_pod` as each of its 3 staging pods (or `staging_pods` by name)."""
    base = ObservedRestore(restore(), recorded or RecordedRestore(snapshot=FACTS), cluster(), now=NOW)
    fields.setdefault("staging_claims", all_claims(staging_claim, size=3))
    fields.setdefault("staging_pods", all_pods(staging_pod, size=3))
    return replace(base, **fields)


FAILED_POD = pod("Failed", problem="restore-fetch exited 1 (Error): etcd-restore-seed fetch: s3://b/k changed")


@pytest.mark.parametrize(("case", "observed", "expected", "reason"), [
    ("no staging pod yet: stage", seen(), a.Stage, None),
    ("a claim left, no pod: stage (the pod only)", seen(staging_claim=CLAIM), a.Stage, None),
    ("pod pending: wait in Staging", seen(staging_pod=pod(progress="not scheduled"), staging_claim=CLAIM), a.Wait,
     None),
    ("pod running: wait in Staging", seen(staging_pod=pod("Running"), staging_claim=CLAIM), a.Wait, None),
    ("pod failed: fail with its reason", seen(staging_pod=FAILED_POD, staging_claim=CLAIM), a.Fail, "StagingFailed"),
    ("image not pullable: fail", seen(staging_pod=pod(problem="restore-fetch ErrImagePull: no such image"),
                                     staging_claim=CLAIM), a.Fail, "StagingFailed"),
    ("pod succeeded: replace", seen(staging_pod=pod("Succeeded"), staging_claim=CLAIM), a.ReplaceCluster, None),
    ("succeeded, then the pod went (status says staged): replace",
     seen(staging_claim=CLAIM, recorded=RecordedRestore(snapshot=FACTS, staged=True, observed_generation=1)),
     a.ReplaceCluster, None),
    ("succeeded but the claim is gone: fail", seen(staging_pod=pod("Succeeded")), a.Fail, "StagedClaimLost"),
    ("staged, claim gone: fail", seen(recorded=RecordedRestore(snapshot=FACTS, staged=True, observed_generation=1)),
     a.Fail, "StagedClaimLost"),
    ("failed, retried after a spec edit: staged again",
     seen(restore=restore(generation=2), recorded=RecordedRestore(
         snapshot=FACTS, staged=True, phase="Failed", observed_generation=1)), a.Stage, None),
    ("someone else's pod of that name: fail", seen(staging_pod=StagingPod("Succeeded", owned=False),
                                                  staging_claim=CLAIM), a.Fail, "StagingNameTaken"),
    ("someone else's claim of that name: fail", seen(staging_claim=StagingClaim(owned=False)), a.Fail,
     "StagingNameTaken"),
    ("staging objects being deleted: wait", seen(staging_pod=pod(deleting=True), staging_claim=CLAIM), a.Wait, None),
    ("replaced already, staged: create", seen(cluster=None, recorded=REPLACED, staging_pod=pod("Succeeded"),
                                              staging_claim=CLAIM), a.CreateCluster, None),
    ("a new cluster is staged first", seen(restore=restore(NEW), cluster=None), a.Stage, None),
])
def test_each_staging_outcome_has_its_action(case: str, observed: ObservedRestore, expected: type,
                                             reason: str | None) -> None:
    """Broken by deleting before the staging pod Succeeded (ReplaceCluster for a pending, running or
    failed pod), by recreating a pod already there (Stage), or by waiting on a pod that failed."""
    action = p.plan_next_action(observed)
    assert isinstance(action, expected), f"{case}: {action}"
    if reason is not None:
        assert isinstance(action, a.Fail) and action.reason == reason, f"{case}: {action}"
    if isinstance(action, a.Wait):
        assert action.phase_name == "Staging", f"{case}: {action}"


def test_nothing_is_deleted_or_created_unless_the_staging_pod_succeeded() -> None:
    """Broken by any outcome but Succeeded leading to ReplaceCluster or CreateCluster."""
    pods = [None, pod(), pod("Running"), FAILED_POD, pod(problem="ImagePullBackOff"), pod("Succeeded", deleting=True)]
    for staging_pod in pods:
        for claim in (None, CLAIM, StagingClaim(owned=True, deleting=True)):
            for base in (seen(), seen(cluster=None, recorded=REPLACED), seen(restore=restore(NEW), cluster=None)):
                action = p.plan_next_action(replace(base, staging_pods=all_pods(staging_pod),
                                                    staging_claims=all_claims(claim)))
                assert not isinstance(action, (a.ReplaceCluster, a.CreateCluster)), (staging_pod, claim, action)


def test_a_failure_says_why_in_the_pods_words_and_that_nothing_was_deleted() -> None:
    action = p.plan_next_action(seen(staging_pod=FAILED_POD, staging_claim=CLAIM))
    assert isinstance(action, a.Fail)
    assert "s3://b/k changed" in action.message and "nothing was deleted" in action.message
    assert "r-staging" in action.message


def test_no_space_on_the_staging_volume_says_what_the_claim_asked_for() -> None:
    """The pod's words (ENOSPC from the fetch step) and what they mean here: the claim was sized
    by the seed's rule, so the volume holds less than asked. Broken by a message without either."""
    full = pod("Failed", problem="restore-fetch exited 1 (Error): etcd-restore-seed fetch: download s3://b/k to "
                                 "/var/etcd/restore/snapshot.db.object: [Errno 28] No space left on device")
    action = p.plan_next_action(seen(staging_pod=full, staging_claim=CLAIM))
    assert isinstance(action, a.Fail) and action.reason == "StagingFailed"
    assert "[Errno 28] No space left on device" in action.message and "nothing was deleted" in action.message
    asked = format_bytes(staging_claim_bytes(FACTS.largest_size))
    assert f"no space left on the staging claim, which asked for {asked}" in action.message, action.message
    other = p.plan_next_action(seen(staging_pod=FAILED_POD, staging_claim=CLAIM))
    assert isinstance(other, a.Fail) and "no space" not in other.message


def test_the_created_cluster_seeds_from_the_staged_claim() -> None:
    """Broken by a CreateCluster without the claim: the seed would download again."""
    action = p.plan_next_action(seen(cluster=None, recorded=REPLACED, staging_pod=pod("Succeeded"),
                                     staging_claim=CLAIM))
    assert isinstance(action, a.CreateCluster) and action.staged_claim == "r-staging"


def test_staging_is_bounded_and_its_timeout_deletes_nothing() -> None:
    """Broken by a Staging phase without a bound (a pod Pending forever keeps the restore waiting)."""
    limit = staging_timeout_seconds(FACTS.size)
    assert STAGING_BASE_TIMEOUT_SECONDS <= limit < STAGING_BASE_TIMEOUT_SECONDS + 10
    waiting = pod(progress="restore-fetch waiting (ContainerCreating: secret \"aws\" not found)")

    def after(seconds: float) -> a.Action:
        recorded = RecordedRestore(snapshot=FACTS, phase="Staging", phase_started=NOW - timedelta(seconds=seconds))
        return p.plan_next_action(seen(staging_pod=waiting, staging_claim=CLAIM, recorded=recorded))

    assert isinstance(after(limit - 1), a.Wait)
    timed_out = after(limit + 1)
    assert isinstance(timed_out, a.Fail) and timed_out.reason == "RestoreTimedOut"
    assert 'secret "aws" not found' in timed_out.message and "Nothing was deleted" in timed_out.message
    restaged = RecordedRestore(snapshot=FACTS, phase="Staging", phase_started=NOW - timedelta(seconds=limit + 1),
                               cluster_spec={"size": 1})
    after_delete = p.plan_next_action(seen(cluster=None, staging_pod=waiting, staging_claim=CLAIM, recorded=restaged))
    assert isinstance(after_delete, a.Fail) and "deleted already" in after_delete.message
    assert "status.clusterSpec" in after_delete.message


@pytest.mark.parametrize(("case", "staging_pod", "claim", "expected"), [
    ("both there", pod("Failed"), CLAIM, a.RemoveStaging(pods=THREE, claims=THREE)),
    ("claims only", None, CLAIM, a.RemoveStaging(claims=THREE)),
    ("claim being deleted (the seed still mounts it)", None, StagingClaim(owned=True, deleting=True), a.Done()),
    ("not ours", StagingPod("Running", owned=False), None, a.Done()),
    ("none", None, None, a.Done()),
])
@pytest.mark.parametrize("phase", ["Completed", "Failed"])
def test_a_finished_restore_removes_its_staging_objects(case: str, staging_pod: StagingPod | None,
                                                        claim: StagingClaim | None, expected: a.Action,
                                                        phase: str) -> None:
    """Broken by leaving the claim (and its storage) behind, or by deleting another's object."""
    recorded = RecordedRestore(snapshot=FACTS, phase=phase, observed_generation=1)
    assert p.plan_next_action(seen(staging_pod=staging_pod, staging_claim=claim, recorded=recorded)) == expected


def status_with(*, phase: str = "Pending", init: list[dict[str, Any]] | None = None,
                containers: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return {"phase": phase, "initContainerStatuses": init or [], "containerStatuses": containers or [], **extra}


@pytest.mark.parametrize(("case", "status", "fragments"), [
    ("fetch step failed: its termination message",
     status_with(phase="Failed", init=[{"name": "restore-fetch", "state": {"terminated": {
         "exitCode": 1, "reason": "Error",
         "message": "etcd-restore-seed fetch: precondition failed: s3://b/k changed since the restore verified it"}}}]),
     ["restore-fetch exited 1", "changed since the restore verified it"]),
    ("image not pullable",
     status_with(init=[{"name": "restore-fetch", "state": {"waiting": {
         "reason": "ErrImagePull", "message": 'image "quay.io/coreos/etcd:v3.5.999" is not available'}}}]),
     ["restore-fetch ErrImagePull", "v3.5.999"]),
    ("check failed",
     status_with(phase="Failed", init=[{"name": "restore-fetch", "state": {"terminated": {"exitCode": 0}}}],
                 containers=[{"name": "restore-check", "state": {"terminated": {
                     "exitCode": 1, "message": "Error: snapshot file integrity check failed"}}}]),
     ["restore-check exited 1", "integrity check failed"]),
    ("deadline exceeded", status_with(phase="Failed", reason="DeadlineExceeded",
                                      message="Pod was active on the node longer than the specified deadline"),
     ["DeadlineExceeded", "longer than the specified deadline"]),
])
def test_failure_reasons_come_from_the_pods_status(case: str, status: dict[str, Any], fragments: list[str]) -> None:
    """Broken by a failure said without the pod's words (or one not seen at all)."""
    problem = staging_pod_problem(status)
    assert all(fragment in problem for fragment in fragments), f"{case}: {problem}"


def test_a_pod_on_its_way_is_no_problem_and_says_where_it_is() -> None:
    unscheduled = status_with(conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                           "message": "0/3 nodes: pod has unbound immediate PersistentVolumeClaims"}])
    mounting = status_with(init=[{"name": "restore-fetch", "state": {"waiting": {
        "reason": "ContainerCreating", "message": 'secret "aws" not found'}}}])
    running = status_with(phase="Running", init=[{"name": "restore-fetch", "state": {"running": {}}}])
    assert [staging_pod_problem(s) for s in (unscheduled, mounting, running)] == ["", "", ""]
    assert "unbound immediate PersistentVolumeClaims" in staging_pod_progress(unscheduled)
    assert 'secret "aws" not found' in staging_pod_progress(mounting)
    assert "fetching" in staging_pod_progress(running)


def test_ownership_is_by_the_restores_uid() -> None:
    raw = {"metadata": {"ownerReferences": [{"uid": UID}]}, "status": {"phase": "Succeeded"}}
    assert parse_staging_pod(raw, UID).owned and parse_staging_pod(raw, UID).succeeded
    assert not parse_staging_pod(raw, "another-uid").owned


def test_the_claim_is_sized_by_the_seeds_rule_in_the_clusters_storage_class() -> None:
    """Broken by a claim smaller than the seed's rule (2 x the snapshot + margin)."""
    spec = parse_cluster_spec({"size": 3, "version": "3.6.16", "pod": {"persistentVolumeClaimSpec": {
        "storageClassName": "fast", "resources": {"requests": {"storage": "8Gi"}}}}})
    claim = build_staging_claim(restore(), spec, 300 * 1024 * 1024, name="r-staging")
    assert staging_claim_bytes(300 * 1024 * 1024) >= seed_space_needed_bytes(300 * 1024 * 1024)
    assert claim["spec"]["resources"]["requests"]["storage"] == "728Mi"
    assert claim["spec"]["storageClassName"] == "fast"
    assert claim["metadata"]["ownerReferences"][0]["uid"] == UID
    plain = build_staging_claim(restore(), parse_cluster_spec({"size": 1}), 1, name="r-staging")
    assert "storageClassName" not in plain["spec"]


def test_the_staging_pod_is_owned_by_the_restore_and_no_member() -> None:
    """Broken by labelling it as a member of the cluster: rule 7 would wait for it to go forever."""
    source = staging_source(restore(), replace(FACTS, etag="e-1", version_id="v-1"), fetch_image="etcd-operator-py:x")
    body = build_staging_pod(restore(), parse_cluster_spec({"size": 1, "version": "3.6.16"}), source,
                             claim="r-staging", deadline_seconds=300.0)
    labels = body["metadata"]["labels"]
    assert "etcd_cluster" not in labels and "app" not in labels
    assert body["metadata"]["ownerReferences"][0] == {"apiVersion": "etcd.database.coreos.com/v1beta2",
                                                      "kind": "EtcdRestore", "name": "r", "uid": UID,
                                                      "controller": True}
    fetch_args = body["spec"]["initContainers"][0]["args"]
    assert "--etag=e-1" in fetch_args and "--version-id=v-1" in fetch_args
    assert body["spec"]["initContainers"][0]["image"] == "etcd-operator-py:x"
    assert body["spec"]["securityContext"]["runAsNonRoot"] is True


@pytest.mark.parametrize("pod_security, user, group", [
    ({}, 65532, 65532),
    ({"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000}, 1000, 2000),
])
def test_the_staging_pod_writes_its_claim_as_the_member_user_with_the_claim_given_to_its_group(
        pod_security: dict[str, Any], user: int, group: int) -> None:
    """Its containers (uid 65532) create /var/etcd/restore on the claim's root: the pod's fsGroup is
    what makes that root theirs on volumes the kubelet manages (a hostPath volume must be made
    writable by its provisioner, as the sandbox's and local-path-provisioner do)."""
    source = staging_source(restore(), FACTS, fetch_image="etcd-operator-py:x")
    spec = parse_cluster_spec({"size": 1, "version": "3.6.16", "pod": {"securityContext": pod_security}})
    body = build_staging_pod(restore(), spec, source, claim="r-staging", deadline_seconds=300.0)
    security = body["spec"]["securityContext"]
    assert (security["runAsUser"], security["fsGroup"]) == (user, group)
    assert security["fsGroupChangePolicy"] == "OnRootMismatch" and security["runAsNonRoot"] is True
    [claim] = [v for v in body["spec"]["volumes"] if "persistentVolumeClaim" in v]
    assert claim["persistentVolumeClaim"] == {"claimName": "r-staging"}
    for container in (*body["spec"]["initContainers"], *body["spec"]["containers"]):
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        assert mounts[claim["name"]]["mountPath"] == "/var/etcd" and not mounts[claim["name"]].get("readOnly")
        assert "runAsUser" not in container["securityContext"]  # the pod's user, the one fsGroup serves


# --- one staging claim per member of the restored cluster


def test_one_claim_per_member_named_after_the_first() -> None:
    """Broken by another first name (today's docs, tests and a seed of one member read it) or by
    a count other than the cluster's size."""
    assert staging_claim_names("r", 1) == ("r-staging",)
    assert staging_claim_names("r", 3) == THREE
    assert p.staging_claims_for("r", {"size": 5})[-1] == "r-staging-4"
    assert p.staging_claims_for("r", {"size": 9}) == ("r-staging",)  # the preflight refuses it anyway


EXISTING_SPEC = {"size": 3, "version": "3.6.16"}  # cluster()'s: the spec to stage for


def some(names: tuple[str, ...], claim: StagingClaim = CLAIM, **others: StagingClaim) -> dict[str, StagingClaim]:
    return {**dict.fromkeys(names, claim), **others}


@pytest.mark.parametrize(("case", "observed", "expected", "reason"), [
    ("no claim, no pod: stage all three", seen(), a.Stage(EXISTING_SPEC, claims=THREE), None),
    ("two of three claims, no pod: stage (the missing one and the pod)",
     seen(staging_claims=some(THREE[:2])), a.Stage(EXISTING_SPEC, claims=THREE), None),
    ("pods running, a claim missing: stage it (its pod waits for it)",
     seen(staging_pod=pod("Running"), staging_claims=some(THREE[:2])), a.Stage(EXISTING_SPEC, claims=THREE), None),
    ("pods running, all claims: wait", seen(staging_pod=pod("Running", progress="restore-fetch fetching"),
                                            staging_claim=CLAIM), a.Wait, None),
    ("pod succeeded, all claims: replace", seen(staging_pod=pod("Succeeded"), staging_claim=CLAIM), a.ReplaceCluster,
     None),
    ("pod succeeded, claim 2 lost: fail", seen(staging_pod=pod("Succeeded"), staging_claims=some(THREE[:2])), a.Fail,
     "StagedClaimLost"),
    ("staged, claim 1 lost: fail",
     seen(staging_claims=some(THREE[::2]), recorded=RecordedRestore(snapshot=FACTS, staged=True, observed_generation=1)),
     a.Fail, "StagedClaimLost"),
    ("claim 2 someone else's: fail", seen(staging_claims=some(THREE[:2], **{"r-staging-2": StagingClaim(owned=False)})),
     a.Fail, "StagingNameTaken"),
    ("claim 1 being deleted: wait", seen(staging_pod=pod("Succeeded"), staging_claims=some(
        THREE, **{"r-staging-1": StagingClaim(owned=True, deleting=True)})), a.Wait, None),
    ("a claim beyond the cluster's size (not ours) is no concern",
     seen(staging_pod=pod("Succeeded"), staging_claims=some(THREE, **{"r-staging-3": StagingClaim(owned=False)})),
     a.ReplaceCluster, None),
])
def test_the_planner_stages_on_every_members_claim(case: str, observed: ObservedRestore, expected: Any,
                                                   reason: str | None) -> None:
    """Broken by deleting the cluster before every member's claim holds the snapshot, by staging
    fewer claims than members, or by staging on a claim another object holds."""
    action = p.plan_next_action(observed)
    if isinstance(expected, a.Action):
        assert action == expected, f"{case}: {action}"
    else:
        assert isinstance(action, expected), f"{case}: {action}"
    if reason is not None:
        assert isinstance(action, a.Fail) and action.reason == reason, f"{case}: {action}"


def test_a_failure_names_the_claim_taken_or_lost() -> None:
    taken = p.plan_next_action(seen(staging_claims=some(THREE[:2], **{"r-staging-2": StagingClaim(owned=False)})))
    assert isinstance(taken, a.Fail) and "PersistentVolumeClaim r-staging-2 exists" in taken.message, taken
    assert "r-staging-1" not in taken.message
    lost = p.plan_next_action(seen(staging_pod=pod("Succeeded"), staging_claims=some(THREE[:2])))
    assert isinstance(lost, a.Fail) and "r-staging-2" in lost.message and "r-staging-1" not in lost.message, lost


@pytest.mark.parametrize(("size", "claims"), [(3, THREE), (1, ())])
def test_the_created_cluster_names_every_members_claim_from_two_members_on(size: int,
                                                                           claims: tuple[str, ...]) -> None:
    """Broken by a size-3 cluster created without stagedClaims (its members would join one at a
    time), or by a size-1 cluster given a list (nothing to bootstrap together)."""
    recorded = replace(REPLACED, cluster_spec={"size": size, "version": "3.6.16"})
    action = p.plan_next_action(seen(cluster=None, recorded=recorded, staging_pod=pod("Succeeded"),
                                     staging_claim=CLAIM))
    assert isinstance(action, a.CreateCluster), action
    assert action.staged_claim == "r-staging" and action.staged_claims == claims


def test_a_finished_restore_removes_every_claim_it_owns() -> None:
    """Broken by removing only the first claim, or one that is not ours."""
    recorded = RecordedRestore(snapshot=FACTS, phase="Completed", observed_generation=1)
    found = some(THREE, **{"r-staging-4": CLAIM, "r-staging-5": StagingClaim(owned=False),
                           "r-staging-6": StagingClaim(owned=True, deleting=True)})
    action = p.plan_next_action(seen(staging_claims=found, recorded=recorded))
    assert action == a.RemoveStaging(claims=(*THREE, "r-staging-4"))


def test_n_claims_alike_and_a_pod_for_each_mounting_only_its_own() -> None:
    """Broken by claims of other sizes or classes than the first, by one pod mounting several
    claims (they would all bind where it runs), by a pod named otherwise than its claim, or by a
    pod copying instead of fetching and checking as the seed would."""
    spec = parse_cluster_spec({"size": 3, "version": "3.6.16", "pod": {"persistentVolumeClaimSpec": {
        "storageClassName": "fast", "resources": {"requests": {"storage": "8Gi"}}}}})
    bodies = [build_staging_claim(restore(), spec, 300 * 1024 * 1024, name=name) for name in THREE]
    assert [b["metadata"]["name"] for b in bodies] == list(THREE)
    assert {(b["spec"]["resources"]["requests"]["storage"], b["spec"]["storageClassName"]) for b in bodies} == {
        ("728Mi", "fast")}
    assert all(b["metadata"]["labels"]["etcd.database.coreos.com/restore"] == "r" for b in bodies)
    source = staging_source(restore(), replace(FACTS, etag="e-1"), fetch_image="etcd-operator-py:x")
    for name in THREE:
        body = build_staging_pod(restore(), spec, source, claim=name, deadline_seconds=300.0)
        assert body["metadata"]["name"] == name
        claims = [v["persistentVolumeClaim"]["claimName"] for v in body["spec"]["volumes"]
                  if "persistentVolumeClaim" in v]
        assert claims == [name]
        inits = body["spec"]["initContainers"]
        assert [i["name"] for i in inits] == ["restore-fetch"]
        assert "--etag=e-1" in inits[0]["args"] and not any("staged" in arg for arg in inits[0]["args"])
        assert [container["name"] for container in body["spec"]["containers"]] == ["restore-check"]


PLACED = {"size": 3, "version": "3.6.16", "pod": {
    "nodeSelector": {"disk": "ssd"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "etcd", "effect": "NoSchedule"}],
    "affinity": {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]}]}]}},
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "etcd"}}, "topologyKey": "kubernetes.io/hostname"}]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {"labelSelector": {"matchLabels": {"etcd_cluster": "c"}},
                                              "topologyKey": "kubernetes.io/hostname"}}]}}}}
APART = {"labelSelector": {"matchLabels": {"etcd.database.coreos.com/restore": "r",
                                           "app.kubernetes.io/component": "restore-staging"}},
         "topologyKey": "kubernetes.io/hostname"}


def staging_pod_spec(cluster_spec: dict[str, Any], claim: str = "r-staging-1") -> dict[str, Any]:
    source = staging_source(restore(), FACTS, fetch_image="etcd-operator-py:x")
    body = build_staging_pod(restore(), parse_cluster_spec(cluster_spec), source, claim=claim, deadline_seconds=300.0)
    return dict(body["spec"])


def test_a_staging_pod_is_placed_like_the_members() -> None:
    """Its claim binds where it runs (WaitForFirstConsumer): it must run where a member may.
    Broken by dropping the members' nodeSelector, tolerations or node affinity, or by copying
    their pod (anti-)affinity (it selects member pods, not staging pods)."""
    spec = staging_pod_spec(PLACED)
    members = PLACED["pod"]
    assert spec["nodeSelector"] == members["nodeSelector"]
    assert spec["tolerations"] == members["tolerations"]
    assert spec["affinity"]["nodeAffinity"] == members["affinity"]["nodeAffinity"]
    assert "podAffinity" not in spec["affinity"]
    assert spec["affinity"]["podAntiAffinity"] == {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": APART}]}
    plain = staging_pod_spec({"size": 3, "version": "3.6.16"})
    assert "nodeSelector" not in plain and "tolerations" not in plain and "nodeAffinity" not in plain["affinity"]


@pytest.mark.parametrize(("anti_affinity", "required"), [(True, True), (False, False)])
def test_staging_pods_keep_apart_as_strictly_as_the_members(anti_affinity: bool, required: bool) -> None:
    """spec.pod.antiAffinity: the members require distinct nodes, so their claims must be on
    distinct nodes: required among the staging pods (too few nodes fail staging, before any
    delete); else preferred. Broken by a preferred term for antiAffinity members (two claims on
    one node: a member never schedules), or a required one otherwise."""
    spec = staging_pod_spec({"size": 3, "version": "3.6.16", "pod": {"antiAffinity": anti_affinity}})
    apart = spec["affinity"]["podAntiAffinity"]
    if required:
        assert apart == {"requiredDuringSchedulingIgnoredDuringExecution": [APART]}
    else:
        assert apart == {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": APART}]}
    labels = build_staging_claim(restore(), parse_cluster_spec({"size": 3}), 1, name="r-staging")["metadata"]["labels"]
    assert APART["labelSelector"]["matchLabels"].items() <= labels.items()  # type: ignore[attr-defined]
    assert staging_selector("r") == "etcd.database.coreos.com/restore=r,app.kubernetes.io/component=restore-staging"


def named(*pods: StagingPod | None) -> dict[str, StagingPod]:
    """The staging pods of THREE in order (None: absent)."""
    return {name: found for name, found in zip(THREE, pods, strict=True) if found is not None}


RUNNING = pod("Running", progress="restore-fetch fetching the snapshot")


@pytest.mark.parametrize(("case", "pods", "expected"), [
    ("two succeeded, one running: wait", named(pod("Succeeded"), pod("Succeeded"), RUNNING), a.Wait),
    ("one succeeded, two pending: wait", named(pod("Succeeded"), pod(progress="not scheduled"), RUNNING), a.Wait),
    ("two succeeded, one absent: stage it", named(pod("Succeeded"), None, pod("Succeeded")),
     a.Stage(EXISTING_SPEC, claims=THREE)),
    ("all succeeded: replace", named(pod("Succeeded"), pod("Succeeded"), pod("Succeeded")), a.ReplaceCluster),
])
def test_the_planner_waits_until_every_staging_pod_succeeded(case: str, pods: dict[str, StagingPod],
                                                             expected: Any) -> None:
    """Broken by going on (deleting the cluster) once some pods, not all, Succeeded."""
    action = p.plan_next_action(seen(staging_pods=pods, staging_claim=CLAIM))
    if isinstance(expected, a.Action):
        assert action == expected, f"{case}: {action}"
    else:
        assert isinstance(action, expected), f"{case}: {action}"


def test_the_wait_says_how_many_are_staged_and_where_the_others_are() -> None:
    """Broken by a message without the count, or without a pod's name and progress (an
    unschedulable pod must show: it times the restore out, before anything is deleted)."""
    unscheduled = pod(progress="not scheduled (Unschedulable: 0/2 nodes are available: 2 node(s) didn't match "
                               "pod anti-affinity rules)")
    action = p.plan_next_action(seen(staging_pods=named(pod("Succeeded"), RUNNING, unscheduled), staging_claim=CLAIM))
    assert isinstance(action, a.Wait) and action.phase_name == "Staging"
    assert "1 of 3 staged" in action.message, action.message
    assert "r-staging-1: restore-fetch fetching the snapshot" in action.message
    assert "r-staging-2: not scheduled (Unschedulable" in action.message
    assert "r-staging: " not in action.message  # done: not listed
    limit = staging_timeout_seconds(FACTS.size)
    recorded = RecordedRestore(snapshot=FACTS, phase="Staging", phase_started=NOW - timedelta(seconds=limit + 1))
    timed_out = p.plan_next_action(seen(staging_pods=named(pod("Succeeded"), RUNNING, unscheduled),
                                        staging_claim=CLAIM, recorded=recorded))
    assert isinstance(timed_out, a.Fail) and timed_out.reason == "RestoreTimedOut"
    assert "didn't match pod anti-affinity rules" in timed_out.message and "Nothing was deleted" in timed_out.message


def test_a_failure_names_the_failing_pod() -> None:
    """Broken by a message naming another pod (or none), or by waiting on the others first."""
    action = p.plan_next_action(seen(staging_pods=named(pod("Succeeded"), FAILED_POD, RUNNING), staging_claim=CLAIM))
    assert isinstance(action, a.Fail) and action.reason == "StagingFailed", action
    assert "staging pod r-staging-1 could not" in action.message and "s3://b/k changed" in action.message
    assert "kubectl describe pod r-staging-1" in action.message and "r-staging-2" not in action.message


def test_a_pod_name_held_by_another_object_is_named() -> None:
    foreign = StagingPod("Running", owned=False)
    action = p.plan_next_action(seen(staging_pods=named(pod("Succeeded"), None, foreign), staging_claim=CLAIM))
    assert isinstance(action, a.Fail) and action.reason == "StagingNameTaken", action
    assert "Pod r-staging-2 exists" in action.message and "r-staging-1" not in action.message


def test_a_claim_its_pod_staged_on_lost_fails_but_a_claim_not_staged_yet_is_created() -> None:
    """Broken by recreating (empty) a claim whose pod Succeeded: the member would find nothing."""
    pods = named(pod("Succeeded"), RUNNING, RUNNING)
    lost = p.plan_next_action(seen(staging_pods=pods, staging_claims=some(THREE[1:])))
    assert isinstance(lost, a.Fail) and lost.reason == "StagedClaimLost" and "r-staging " in lost.message, lost
    created = p.plan_next_action(seen(staging_pods=pods, staging_claims=some(THREE[:2])))
    assert created == a.Stage(EXISTING_SPEC, claims=THREE)


def test_a_finished_restore_removes_every_pod_and_claim_it_owns() -> None:
    """Broken by removing only the first pod, or one that is not ours."""
    recorded = RecordedRestore(snapshot=FACTS, phase="Failed", observed_generation=1)
    pods = {**named(pod("Succeeded"), FAILED_POD, RUNNING), "r-staging-4": StagingPod("Running", owned=False),
            "r-staging-5": pod(deleting=True)}
    action = p.plan_next_action(seen(staging_pods=pods, staging_claim=CLAIM, recorded=recorded))
    assert action == a.RemoveStaging(pods=THREE, claims=THREE)
