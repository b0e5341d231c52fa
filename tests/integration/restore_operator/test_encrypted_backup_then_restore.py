"""A compressed, encrypted backup (EtcdBackup spec.compression Gzip, spec.encryption) with every
real part: the backup operator writes it, an EtcdRestore without the key fails before anything
is touched, one with the key (spec.encryption) brings back exactly the backup's keys: the restore
operator's verification and the seed pod's fetch step both decode it."""
from __future__ import annotations

import base64
import os

import pytest

from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.backup_operator.backups import Backups, etcd_backup
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.restore_operator.conftest import Restores
from tests.integration.restore_operator.restore_steps import RESTORE_TIMEOUT, coreos_restore_cr, keys_of
from tests.integration.restore_operator.snapshots import BUCKET, ensure_bucket, unique_key

pytestmark = pytest.mark.sandbox
KEY_SECRET = "backup-encryption-key"


def test_encrypted_backup_restores_exactly_its_keys_and_needs_its_key(
        backup_operator: Sandbox, backups: Backups, clusters: Clusters, restores: Restores) -> None:
    name = "encrypted"
    ns = clusters.namespace
    clusters.create(etcd_cluster(name, 1))
    clusters.wait_running(name, 1, timeout=120)
    backed_up = {f"app/{index}": f"value-{index}-" + "x" * 100 for index in range(20)}
    for key, value in backed_up.items():
        clusters.put(name, key, value)
    clusters.core.create_namespaced_secret(ns, {"metadata": {"name": KEY_SECRET},
                                                "stringData": {"key": base64.b64encode(os.urandom(32)).decode()}})

    ensure_bucket(clusters.sandbox)
    path = f"{BUCKET}/{unique_key('encrypted')}"
    backups.create(etcd_backup("encrypted-backup", {
        "etcdEndpoints": [f"http://{name}-client.{ns}.svc:2379"], "storageType": "S3",
        "s3": backups.s3_spec(path), "compression": "Gzip", "encryption": {"secretName": KEY_SECRET},
    }))
    backup_status = backups.wait_succeeded("encrypted-backup")
    last = backup_status["lastBackup"]
    assert last["compression"] == "Gzip" and len(last["encryptionKeyId"]) == 16, last
    clusters.put(name, "after-backup", "lost with the restore")
    uid = clusters.get(name)["metadata"]["uid"]

    # Without the key: refused while verifying; the cluster is not touched.
    no_key = coreos_restore_cr(name, path, "aws", clusters.sandbox.config.s3_endpoint)
    no_key["metadata"]["name"] = "without-key"
    restores.create(no_key)
    failed = restores.wait_phase("without-key", "Failed", timeout=120)
    assert failed["reason"] == "EncryptionKeyMissing" and last["encryptionKeyId"] in failed["message"], failed
    cluster = clusters.get(name)
    assert cluster["metadata"]["uid"] == uid and cluster["metadata"].get("deletionTimestamp") is None
    assert clusters.get_value(name, "after-backup") == "lost with the restore"

    with_key = coreos_restore_cr(name, path, "aws", clusters.sandbox.config.s3_endpoint)
    with_key["spec"]["encryption"] = {"secretName": KEY_SECRET}
    restores.create(with_key)
    status = restores.wait_phase(name, "Completed", timeout=RESTORE_TIMEOUT)
    assert status["snapshot"]["encryptionKeyId"] == last["encryptionKeyId"]
    assert status["snapshot"]["compression"] == "Gzip"
    assert status["snapshot"]["sha256"] == last["sha256"]
    assert wait_for(lambda: keys_of(clusters, name) == backed_up, timeout=30, what="exactly the backup's keys")
