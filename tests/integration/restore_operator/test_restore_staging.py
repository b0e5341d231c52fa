"""Issue 22 item 1: nothing is deleted before the replacement is proven. The restore operator
stages the verified snapshot on a claim per member of the restored cluster with the seed's own
fetch step (and copy step) and the target version's etcdutl before it deletes anything; each failure injected after verification (an image that
cannot be pulled, the object replaced, the credentials Secret deleted, no space on the staging
volume) leaves the original cluster serving every key, the EtcdRestore Failed with why, and no
staging object behind. A normal restore goes through staging and its seed copies the staged
snapshot with no credentials.

The tests that inject a failure "after verification" stop the (shared) restore operator, record
the verification in the EtcdRestore's status themselves (what the operator would have written:
the object's sha256, size and ETag), break something, and start the operator again: it resumes
from status alone (issue 22 item 1.3) and meets the failure at the staging step, every time.
No space needs no stopped operator: the staging volume only exists after verification, and the
sandbox's fault takes its space as it is bound."""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from kubernetes import client as k8s

from kube_sandbox.kubelet.sized_volumes import SIZED_STORAGE_CLASS
from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.restore_operator.conftest import GROUP, PLURAL, VERSION, Restores
from tests.integration.restore_operator.restore_deployment import DEPLOYMENT, NAMESPACE, POD_SELECTOR
from tests.integration.restore_operator.restore_steps import RESTORE_TIMEOUT, assert_failed_with, coreos_restore_cr, keys_of
from tests.integration.restore_operator.snapshots import (
    BUCKET,
    create_aws_secret,
    put_object,
    s3_client,
    snapshot_to_s3,
    unique_key,
)

pytestmark = pytest.mark.sandbox
# A trusted repository (--trusted-repositories' default) with a tag the sandbox has no etcd for:
# the kubelet reports ErrImagePull, as a real one would for a tag that does not exist.
UNPULLABLE_ETCD_VERSION = "3.5.1"
UNPULLABLE_FETCH_IMAGE = "quay.io/coreos/etcd:v3.5.999"
KEYS = {f"kept/{index}": f"value-{index}" for index in range(5)}
RESTORE_LABEL = "etcd.database.coreos.com/restore"


def serving_cluster_with_a_backup(clusters: Clusters, name: str) -> tuple[str, str, bytes]:
    """A Running 1-member cluster holding KEYS, and its snapshot in S3: (uid, key, bytes)."""
    clusters.create(etcd_cluster(name, 1))
    clusters.wait_running(name, 1, timeout=120)
    for key, value in KEYS.items():
        clusters.put(name, key, value)
    key = unique_key(name)
    content = snapshot_to_s3(clusters, name, key)
    return clusters.get(name)["metadata"]["uid"], key, content


def assert_serving_all_its_keys(clusters: Clusters, name: str, uid: str) -> None:
    cluster = clusters.get(name)
    assert cluster["metadata"]["uid"] == uid and cluster["metadata"].get("deletionTimestamp") is None, cluster
    assert keys_of(clusters, name) == KEYS
    wait_for(lambda: clusters.status(name).get("phase") == "Running", timeout=30, what=f"{name} still Running")


def staging_objects(sandbox: Sandbox, namespace: str, restore: str) -> list[str]:
    """The restore's staging pods and claims (the first by name, and any labelled with the
    restore's name) that exist and are not being deleted."""
    core = k8s.CoreV1Api(sandbox.api_client())
    found = []
    for kind, read in (("pod", core.read_namespaced_pod),
                       ("claim", core.read_namespaced_persistent_volume_claim)):
        try:
            obj = read(f"{restore}-staging", namespace)
        except k8s.ApiException as error:
            if error.status == 404:
                continue
            raise
        if obj.metadata.deletion_timestamp is None:
            found.append(kind)
    for kind, listing in (("pod", core.list_namespaced_pod), ("claim", core.list_namespaced_persistent_volume_claim)):
        labelled = listing(namespace, label_selector=f"{RESTORE_LABEL}={restore}")
        found += [f"{kind} {obj.metadata.name}" for obj in labelled.items
                  if obj.metadata.deletion_timestamp is None and obj.metadata.name != f"{restore}-staging"]
    return found


def assert_staging_removed(sandbox: Sandbox, namespace: str, restore: str) -> None:
    wait_for(lambda: not staging_objects(sandbox, namespace, restore), timeout=60,
             what=f"staging objects of {restore} removed (left: {staging_objects(sandbox, namespace, restore)})")


def scale_restore_operator(sandbox: Sandbox, replicas: int) -> None:
    sandbox.kubectl("-n", NAMESPACE, "scale", f"deployment/{DEPLOYMENT}", f"--replicas={replicas}")
    if replicas:
        sandbox.kubectl("-n", NAMESPACE, "rollout", "status", f"deployment/{DEPLOYMENT}", "--timeout=120s")
        return
    core = k8s.CoreV1Api(sandbox.api_client())
    wait_for(lambda: not core.list_namespaced_pod(NAMESPACE, label_selector=POD_SELECTOR).items, timeout=120,
             what="restore operator stopped")


@contextmanager
def restore_operator_stopped(sandbox: Sandbox) -> Iterator[None]:
    scale_restore_operator(sandbox, 0)
    try:
        yield
    finally:
        scale_restore_operator(sandbox, 1)


def record_verification(restores: Restores, name: str, key: str, content: bytes) -> None:
    """Status as the operator's verification writes it, for the object as it is now."""
    head = s3_client(restores.sandbox).head_object(Bucket=BUCKET, Key=key)
    snapshot = {"sha256": hashlib.sha256(content).hexdigest(), "size": len(content), "revision": 1,
                "totalKeys": len(KEYS), "hash": 0, "etag": head["ETag"]}
    restores.custom.patch_namespaced_custom_object_status(GROUP, VERSION, restores.namespace, PLURAL, name, {
        "status": {"phase": "Verifying", "message": "snapshot verified (recorded by the test)",
                   "observedGeneration": 1, "snapshot": snapshot}})


def test_a_restore_goes_through_staging_and_its_seed_copies_the_staged_snapshot(
        clusters: Clusters, restores: Restores) -> None:
    name = "staged"
    old_uid, key, _ = serving_cluster_with_a_backup(clusters, name)
    clusters.put(name, "after-backup", "must-not-come-back")
    secret = create_aws_secret(clusters.sandbox, clusters.namespace, server_in_config=True)

    restores.create(coreos_restore_cr(name, f"{BUCKET}/{key}", secret))
    status = restores.wait_phase(name, "Completed", timeout=RESTORE_TIMEOUT)

    assert keys_of(clusters, name) == KEYS
    assert status["staging"] == {"claim": f"{name}-staging", "pod": f"{name}-staging", "staged": True}, status
    restored = clusters.get(name)
    assert restored["metadata"]["uid"] != old_uid
    assert restored["spec"]["restore"]["stagedClaim"] == f"{name}-staging"
    restores.events_once_recorded(name, {"SnapshotVerified", "Staging", "ReplacingCluster", "ClusterCreated",
                                         "RestoreSucceeded"})
    for pod in clusters.pods(name):  # the seed (and every member) runs without the awsSecret
        assert not any(volume.secret is not None and volume.secret.secret_name == secret
                       for volume in pod.spec.volumes or []), pod.metadata.name
    # The claim the seed still mounts stays Terminating until the seed pod goes: removed either way.
    assert_staging_removed(clusters.sandbox, clusters.namespace, name)


def test_a_restored_cluster_of_three_is_staged_on_a_claim_per_member(clusters: Clusters, restores: Restores) -> None:
    """A staging pod per claim fetches the verified object onto it and checks it; the created
    EtcdCluster names all three (spec.restore.stagedClaims) and serves every key with 3 members,
    all started at once (each pod `new`, with all three in --initial-cluster: none joined a seed);
    every staging object goes when the restore ends."""
    _, key, _ = serving_cluster_with_a_backup(clusters, "source3")
    secret = create_aws_secret(clusters.sandbox, clusters.namespace, server_in_config=True)
    body = coreos_restore_cr("three", f"{BUCKET}/{key}", secret)
    body["spec"]["clusterSpec"] = {"size": 3}
    restores.create(body)

    status = restores.wait_phase("three", "Completed", timeout=RESTORE_TIMEOUT)

    claims = ["three-staging", "three-staging-1", "three-staging-2"]
    assert status["staging"] == {"claim": claims[0], "claims": claims, "pod": "three-staging", "staged": True}, status
    restored = clusters.get("three")
    assert restored["spec"]["restore"]["stagedClaim"] == claims[0], restored["spec"]["restore"]
    assert restored["spec"]["restore"]["stagedClaims"] == claims, restored["spec"]["restore"]
    assert keys_of(clusters, "three") == KEYS
    pods = clusters.pods("three")
    members = sorted(pod.metadata.name for pod in pods)
    assert len(members) == 3, members
    for pod in pods:
        command = list(pod.spec.containers[0].command or [])
        initial = next(flag for flag in command if flag.startswith("--initial-cluster="))
        assert sorted(pair.split("=")[0] for pair in initial.split("=", 1)[1].split(",")) == members, command
        assert "--initial-cluster-state=new" in command, command
    assert_staging_removed(clusters.sandbox, clusters.namespace, "three")


def test_an_etcd_image_that_cannot_be_pulled_fails_staging_and_creates_nothing(
        clusters: Clusters, restores: Restores) -> None:
    """The staging pod checks the snapshot with the new cluster's own etcd image: not pullable,
    the restore fails before anything is created, and the source cluster keeps serving."""
    source_uid, key, _ = serving_cluster_with_a_backup(clusters, "source")
    secret = create_aws_secret(clusters.sandbox, clusters.namespace, server_in_config=True)
    body = coreos_restore_cr("fresh", f"{BUCKET}/{key}", secret)
    body["spec"]["clusterSpec"] = {"size": 1, "version": UNPULLABLE_ETCD_VERSION}
    restores.create(body)

    status = assert_failed_with(restores, "fresh", "StagingFailed")

    # ErrImagePull, or ImagePullBackOff once the kubelet backs off (the operator may see either first).
    pulled = "ErrImagePull" in status["message"] or "ImagePullBackOff" in status["message"]
    assert pulled and UNPULLABLE_ETCD_VERSION in status["message"], status
    assert clusters.pods("fresh") == []
    assert_serving_all_its_keys(clusters, "source", source_uid)
    assert_staging_removed(clusters.sandbox, clusters.namespace, "fresh")


@pytest.mark.alone
def test_a_fetch_image_that_cannot_be_pulled_leaves_the_cluster_serving(clusters: Clusters,
                                                                        restores: Restores) -> None:
    """The restore operator's --fetch-image (the seed's fetch step) points at an image the kubelet
    cannot pull: the staging pod never starts; the cluster to replace is not touched."""
    name = "kept"
    uid, key, _ = serving_cluster_with_a_backup(clusters, name)
    secret = create_aws_secret(clusters.sandbox, clusters.namespace, server_in_config=True)
    sandbox = clusters.sandbox
    deployed = sandbox.kubectl("-n", NAMESPACE, "get", f"deployment/{DEPLOYMENT}", "-o",
                               "jsonpath={.spec.template.spec.containers[0].env[?(@.name=='RESTORE_FETCH_IMAGE')].value}"
                               ).stdout.strip()
    assert deployed, "deploy/restore-operator.yaml sets RESTORE_FETCH_IMAGE"
    sandbox.kubectl("-n", NAMESPACE, "set", "env", f"deployment/{DEPLOYMENT}",
                    f"RESTORE_FETCH_IMAGE={UNPULLABLE_FETCH_IMAGE}")
    try:
        sandbox.kubectl("-n", NAMESPACE, "rollout", "status", f"deployment/{DEPLOYMENT}", "--timeout=120s")
        restores.create(coreos_restore_cr(name, f"{BUCKET}/{key}", secret))

        status = assert_failed_with(restores, name, "StagingFailed")
    finally:
        sandbox.kubectl("-n", NAMESPACE, "set", "env", f"deployment/{DEPLOYMENT}", f"RESTORE_FETCH_IMAGE={deployed}")
        sandbox.kubectl("-n", NAMESPACE, "rollout", "status", f"deployment/{DEPLOYMENT}", "--timeout=120s")

    assert "ErrImagePull" in status["message"] and UNPULLABLE_FETCH_IMAGE in status["message"], status
    assert "nothing was deleted" in status["message"], status
    assert_serving_all_its_keys(clusters, name, uid)
    assert_staging_removed(sandbox, clusters.namespace, name)


@pytest.mark.alone
def test_the_object_replaced_after_verification_is_refused_by_the_staging_pod(clusters: Clusters,
                                                                             restores: Restores) -> None:
    name = "kept"
    uid, key, content = serving_cluster_with_a_backup(clusters, name)
    secret = create_aws_secret(clusters.sandbox, clusters.namespace, server_in_config=True)
    with restore_operator_stopped(clusters.sandbox):
        restores.create(coreos_restore_cr(name, f"{BUCKET}/{key}", secret))
        record_verification(restores, name, key, content)
        put_object(clusters.sandbox, key, b"another object under the same key")

    status = assert_failed_with(restores, name, "StagingFailed")

    assert "changed since the restore verified it" in status["message"], status
    assert "nothing was deleted" in status["message"], status
    assert_serving_all_its_keys(clusters, name, uid)
    assert_staging_removed(clusters.sandbox, clusters.namespace, name)


@pytest.mark.alone
def test_the_credentials_secret_deleted_after_verification_fails_before_any_delete(clusters: Clusters,
                                                                                  restores: Restores) -> None:
    name = "kept"
    uid, key, content = serving_cluster_with_a_backup(clusters, name)
    secret = create_aws_secret(clusters.sandbox, clusters.namespace, server_in_config=True)
    with restore_operator_stopped(clusters.sandbox):
        restores.create(coreos_restore_cr(name, f"{BUCKET}/{key}", secret))
        record_verification(restores, name, key, content)
        k8s.CoreV1Api(clusters.sandbox.api_client()).delete_namespaced_secret(secret, clusters.namespace)

    status = assert_failed_with(restores, name, "SecretNotFound")

    assert secret in status["message"] and "nothing was deleted" in status["message"], status
    assert_serving_all_its_keys(clusters, name, uid)
    assert_staging_removed(clusters.sandbox, clusters.namespace, name)


def test_no_space_on_the_staging_volume_after_verification_leaves_the_cluster_serving(
        clusters: Clusters, restores: Restores) -> None:
    """The cluster's members use sized claims (the sandbox's StorageClass `kube-sandbox-sized`: a
    tmpfs of the claim's size), so the staging claim, of the members' class, is one too. The
    verification passes (the object, and the staging claim's size by the seed's rule); then the
    staging volume has no space: the fault, armed for the staging claim's name, takes effect when
    the claim is bound, which is after verification and before the staging pod can start."""
    name = "kept"
    claim_spec = {"storageClassName": SIZED_STORAGE_CLASS, "accessModes": ["ReadWriteOnce"],
                  "resources": {"requests": {"storage": "256Mi"}}}
    clusters.create(etcd_cluster(name, 1, pod={"persistentVolumeClaimSpec": claim_spec}))
    clusters.wait_running(name, 1, timeout=120)
    for key, value in KEYS.items():
        clusters.put(name, key, value)
    key = unique_key(name)
    content = snapshot_to_s3(clusters, name, key)
    uid = clusters.get(name)["metadata"]["uid"]
    members = {pod.metadata.name: pod.metadata.uid for pod in clusters.pods(name)}
    core = k8s.CoreV1Api(clusters.sandbox.api_client())
    member_claims = {c.metadata.name: c.metadata.uid for c in core.list_namespaced_persistent_volume_claim(
        clusters.namespace).items}
    assert member_claims and all(c.spec.storage_class_name == SIZED_STORAGE_CLASS for c in
                                 core.list_namespaced_persistent_volume_claim(clusters.namespace).items)
    secret = create_aws_secret(clusters.sandbox, clusters.namespace, server_in_config=True)
    staging = f"{name}-staging"
    armed = clusters.sandbox.faults.fill_volume(clusters.namespace, staging, leave_bytes=0)
    assert armed.startswith("armed"), armed
    try:
        restores.create(coreos_restore_cr(name, f"{BUCKET}/{key}", secret))

        status = assert_failed_with(restores, name, "StagingFailed")
    finally:
        clusters.sandbox.faults.fill_volume(clusters.namespace, staging, leave_bytes=None)

    # Verified first (the object's sha256 recorded, its event sent), then no space while staging.
    assert status["snapshot"]["sha256"] == hashlib.sha256(content).hexdigest(), status
    restores.events_once_recorded(name, {"SnapshotVerified", "Staging", "RestoreFailed"})
    assert "No space left on device" in status["message"], status
    assert "no space left on the staging claim, which asked for" in status["message"], status
    assert "nothing was deleted" in status["message"], status
    assert_serving_all_its_keys(clusters, name, uid)
    assert {pod.metadata.name: pod.metadata.uid for pod in clusters.pods(name)} == members
    assert_staging_removed(clusters.sandbox, clusters.namespace, name)
    left = {c.metadata.name: c.metadata.uid for c in core.list_namespaced_persistent_volume_claim(
        clusters.namespace).items if c.metadata.deletion_timestamp is None}
    assert left == member_claims, left
