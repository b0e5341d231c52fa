"""The preflight: what fails a restore before anything is deleted, and how the seed will restore
(table-driven over plan_next_action, so the rules' order is tested with it)."""
from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from etcd_common.api.etcd_restore import parse_etcd_restore
from etcd_common.api.images import DEFAULT_TRUSTED_REPOSITORIES
from etcd_common.api.restore_source import parse_restore_source
from etcd_common.api.storage_locations import S3Location
from etcd_common.storage.s3 import ObjectInfo
from restore_operator import actions as a
from restore_operator import preflight as pf
from restore_operator import reasons
from restore_operator.acting import restored_cluster_body
from restore_operator.observed import ObservedRestore, RecordedRestore, SnapshotFacts, TargetCluster
from restore_operator.planning import plan_next_action
from restore_operator.preflight import RestorePolicy
from restore_operator.staging import StagingClaim, StagingPod
from tests.unit.restore_operator.etcd_restore_builders import FACTS, all_claims, all_pods, raw_restore, s3_spec

POLICY = RestorePolicy(bump_revision=1_000_000_000)


def restore(*, aws_secret: str = "aws", template: dict[str, Any] | None = None) -> Any:
    return parse_etcd_restore(raw_restore(s3_spec(aws_secret=aws_secret, template=template)))


def existing(spec: dict[str, Any]) -> TargetCluster:
    return TargetCluster(uid="cluster-uid", restore_uid="", deleting=False, spec=spec, phase="Running", ready=1,
                         members=1)


def seen(restore_: Any = None, cluster: TargetCluster | None = None, **recorded: Any) -> ObservedRestore:
    """Staged already (staging pod Succeeded, its claims there): only the preflight stands before a delete."""
    return ObservedRestore(restore_ or restore(), RecordedRestore(snapshot=FACTS, **recorded), cluster,
                           staging_claims=all_claims(StagingClaim(owned=True)), staging_pods=all_pods(StagingPod("Succeeded", owned=True)))


UNTRUSTED = "docker.io/attacker/anything"


@pytest.mark.parametrize(("case", "observed", "policy", "reason"), [
    ("no awsSecret: the seed could not fetch", seen(restore(aws_secret=""), existing({"size": 1})), POLICY,
     reasons.SEED_WITHOUT_CREDENTIALS),
    ("no awsSecret, new cluster from a template", seen(restore(aws_secret="", template={"size": 1})), POLICY,
     reasons.SEED_WITHOUT_CREDENTIALS),
    ("the cluster named does not exist, no template", seen(), POLICY, reasons.CLUSTER_NOT_FOUND),
    ("existing cluster on an unsupported version", seen(cluster=existing({"size": 1, "version": "3.3.25"})), POLICY,
     reasons.UNSUPPORTED_VERSION),
    ("template on an unsupported version", seen(restore(template={"version": "3.7.0"})), POLICY,
     reasons.UNSUPPORTED_VERSION),
    ("existing cluster with an unreadable spec", seen(cluster=existing({"size": 9})), POLICY,
     reasons.INVALID_CLUSTER_SPEC),
    ("existing cluster from an untrusted repository", seen(cluster=existing({"size": 1, "repository": UNTRUSTED})),
     POLICY, reasons.UNTRUSTED_IMAGE),
    ("the operator's fetch image untrusted", seen(cluster=existing({"size": 1})),
     replace(POLICY, fetch_image=f"{UNTRUSTED}:latest"), reasons.UNTRUSTED_IMAGE),
    ("fetch image untrusted, new cluster", seen(restore(template={"size": 1})),
     replace(POLICY, fetch_image=f"{UNTRUSTED}:latest"), reasons.UNTRUSTED_IMAGE),
    ("fetch image from a trusted mirror", seen(cluster=existing({"size": 1})),
     replace(POLICY, fetch_image="mirror.example/etcd-operator-py:1",
             trusted_repositories=(*DEFAULT_TRUSTED_REPOSITORIES, "mirror.example/")), None),
    ("a 3.6 cluster", seen(cluster=existing({"size": 3, "version": "3.6.16"})), POLICY, None),
    ("a 3.4 cluster (etcdctl restores it)", seen(cluster=existing({"size": 3, "version": "3.4.23"})), POLICY, None),
])
def test_preflight_refusals(case: str, observed: ObservedRestore, policy: RestorePolicy, reason: str | None) -> None:
    action = plan_next_action(observed, policy)
    if reason is None:
        assert isinstance(action, (a.ReplaceCluster, a.CreateCluster)), f"{case}: {action}"
        return
    assert isinstance(action, a.Fail) and action.reason == reason, f"{case}: {action}"
    if reason != reasons.CLUSTER_NOT_FOUND:
        assert "nothing was deleted" in action.message, action.message


def test_untrusted_image_message_names_the_field_and_the_trusted_list() -> None:
    action = plan_next_action(seen(cluster=existing({"size": 1})), replace(POLICY, fetch_image=f"{UNTRUSTED}:x"))
    assert isinstance(action, a.Fail)
    assert "--fetch-image" in action.message and UNTRUSTED in action.message
    assert ", ".join(DEFAULT_TRUSTED_REPOSITORIES) in action.message


def test_refusal_leaves_the_cluster_alone_whatever_its_state() -> None:
    """No action that deletes or creates comes out of a refused preflight."""
    for cluster in (existing({"size": 1, "repository": UNTRUSTED}), None):
        action = plan_next_action(seen(restore(aws_secret=""), cluster), POLICY)
        assert not isinstance(action, (a.ReplaceCluster, a.CreateCluster)), action


@pytest.mark.parametrize(("version", "bump", "warned"), [
    ("3.4.23", 0, True),  # etcdctl before 3.4.27: no --bump-revision
    ("3.4.27", 1_000_000_000, False),
    ("3.5.0", 0, True),  # etcdutl before 3.5.10: no --bump-revision
    ("3.5.9", 0, True),
    ("3.5.10", 1_000_000_000, False),
    ("3.6.16", 1_000_000_000, False),
])
def test_a_tool_without_bump_revision_restores_unbumped_with_a_warning(version: str, bump: int,
                                                                      warned: bool) -> None:
    recorded = {"phase": "Replacing", "cluster_spec": {"size": 3, "version": version}}
    action = plan_next_action(seen(**recorded), POLICY)
    assert isinstance(action, a.CreateCluster), action
    assert action.bump_revision == bump
    assert bool(action.warning) is warned
    if warned:
        assert "--bump-revision" in action.warning and "re-list" in action.warning


def test_bump_revision_zero_by_flag_is_no_warning() -> None:
    recorded = {"phase": "Replacing", "cluster_spec": {"size": 3, "version": "3.5.5"}}
    action = plan_next_action(seen(**recorded), replace(POLICY, bump_revision=0))
    assert isinstance(action, a.CreateCluster) and action.bump_revision == 0 and not action.warning


INFO = ObjectInfo(key="key", size=4096, last_modified=datetime(2024, 1, 1, tzinfo=UTC), etag="etag-1")


@pytest.mark.parametrize(("case", "facts", "info", "reason"), [
    ("still the object verified", replace(FACTS, etag="etag-1"), INFO, None),
    ("deleted since", replace(FACTS, etag="etag-1"), None, reasons.SNAPSHOT_MISSING),
    ("replaced, same size", replace(FACTS, etag="etag-1"), replace(INFO, etag="etag-2"), reasons.SNAPSHOT_CHANGED),
    ("no ETag recorded (older status): same size passes", FACTS, replace(INFO, etag="other"), None),
    ("no ETag recorded: another size is another object", FACTS, replace(INFO, size=10), reasons.SNAPSHOT_CHANGED),
])
def test_the_object_is_rechecked_before_the_delete(case: str, facts: SnapshotFacts, info: ObjectInfo | None,
                                                    reason: str | None) -> None:
    problem = pf.snapshot_object_problem("bucket/key", facts, info)
    assert (problem.reason if problem else None) == reason, case
    if problem is not None:
        assert "nothing was deleted" in problem.message and "s3://bucket/key" in problem.message


def test_the_verified_object_is_what_the_created_cluster_names() -> None:
    facts = replace(FACTS, etag="etag-1", version_id="v7")
    body = restored_cluster_body(restore(), {"size": 1}, facts, location=S3Location("bucket/key", aws_secret="aws"),
                                 fetch_image="etcd-operator-py:0.1.0", bump_revision=0)
    source = body["spec"]["restore"]
    assert (source["etag"], source["versionId"], source["bumpRevision"]) == ("etag-1", "v7", 0)
    parsed = parse_restore_source(source)
    assert parsed is not None and (parsed.etag, parsed.version_id) == ("etag-1", "v7")


def test_no_aws_secret_fails_before_anything_is_downloaded() -> None:
    unverified = ObservedRestore(restore(aws_secret=""), RecordedRestore(), existing({"size": 1}))
    action = plan_next_action(unverified, POLICY)
    assert isinstance(action, a.Fail) and action.reason == reasons.SEED_WITHOUT_CREDENTIALS
    assert "spec.s3.awsSecret" in action.message


@pytest.mark.parametrize("storage_type, section, fragment", [
    ("ABS", {"path": "container/snap.db"}, "spec.abs.absSecret is empty: the seed pod that fetches "
                                           "abs://container/snap.db would have no credentials"),
    ("GCS", {"path": "bucket/snap.db"}, "`access-token` or `credentials.json` in spec.gcs.gcpSecret"),
    ("OSS", {"path": "bucket/snap.db"}, "`accessKeyID` and `accessKeySecret` in spec.oss.ossSecret"),
])
def test_other_stores_need_a_secret_for_the_seed(storage_type: str, section: dict[str, Any], fragment: str) -> None:
    raw = {"metadata": {"namespace": "ns", "name": "r", "uid": "u", "generation": 1},
           "spec": {"etcdCluster": {"name": "c"}, "backupStorageType": storage_type, storage_type.lower(): section}}
    problem = pf.seed_credentials_problem(parse_etcd_restore(raw))
    assert problem is not None and problem.reason == reasons.SEED_WITHOUT_CREDENTIALS and fragment in problem.message
    with_secret = {**section, {"ABS": "absSecret", "GCS": "gcpSecret", "OSS": "ossSecret"}[storage_type]: "s"}
    raw["spec"][storage_type.lower()] = with_secret
    assert pf.seed_credentials_problem(parse_etcd_restore(raw)) is None
