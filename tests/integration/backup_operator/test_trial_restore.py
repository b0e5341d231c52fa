"""Backups that prove themselves, through the backup operator's pod: an EtcdBackup with
spec.trialRestore has its backup restored into a throwaway etcd inside the operator's pod and
checked (Verified True, the revision and key count recorded); the same object corrupted in the
bucket is caught at the next trial (Verified False, BackupObjectCorrupt, one Warning event)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from etcd_common.storage import s3
from kube_sandbox.testing import Sandbox
from tests.integration.backup_operator.backups import Backups, etcd_backup
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster

pytestmark = pytest.mark.sandbox

KEYS = 40


def _verified(status: dict[str, Any]) -> tuple[str, str]:
    for condition in status.get("conditions") or []:
        if condition["type"] == "Verified":
            return condition.get("status", ""), condition.get("reason", "")
    return "", ""


def test_a_backup_is_restored_on_trial_and_a_corrupted_one_is_caught(
        backup_operator: Sandbox, backups: Backups, clusters: Clusters, bucket: str, storage: s3.S3Storage,
        tmp_path: Path) -> None:
    name, ns = "trial", clusters.namespace
    clusters.create(etcd_cluster(name, size=1))
    clusters.wait_running(name, ready=1, timeout=120)
    for index in range(KEYS):
        clusters.put(name, f"/trial/{index}", f"value-{index}")
    backups.create(etcd_backup("proved", {
        "etcdEndpoints": [f"http://{name}-client.{ns}.svc:2379"], "storageType": "S3",
        "s3": backups.s3_spec(f"{bucket}/proved.backup"), "trialRestore": {"intervalInSecond": 3},
    }))
    taken = backups.wait_succeeded("proved")
    status = backups.wait_status("proved", lambda s: _verified(s) == ("True", "BackupVerified"), "verified on trial",
                                 timeout=120)
    trial = status["trialRestore"]
    assert trial["verifiedRevision"] == taken["etcdRevision"], trial
    assert trial["keyCount"] == KEYS, trial  # what the throwaway etcd served: the keys written, nothing else
    assert trial["verifiedObject"] == status["lastBackup"]["key"] and trial["restoreSeconds"] > 0, trial

    # Corrupt the object where it lies: a run of bytes in its middle inverted.
    key = status["lastBackup"]["key"]
    original = tmp_path / "original"
    storage.download_file(bucket, key, str(original))
    data = bytearray(original.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(b ^ 0xFF for b in data[middle:middle + 64])  # never the same bytes
    corrupted = tmp_path / "corrupted"
    corrupted.write_bytes(bytes(data))
    storage.upload_file(bucket, key, str(corrupted))

    failed = backups.wait_status("proved", lambda s: _verified(s) == ("False", "BackupObjectCorrupt"),
                                 "the corrupted object caught", timeout=120)
    # A failed trial verified nothing: what status says was verified is still the last good trial's
    # (trials run every 3 s, so another good one may have run before the corruption landed).
    kept = failed["trialRestore"]
    assert kept["lastResult"] == "BackupObjectCorrupt" and kept["lastVerifiedTime"] <= kept["lastAttemptTime"], kept
    facts = ("verifiedObject", "verifiedRevision", "keyCount")
    assert {f: kept[f] for f in facts} == {f: trial[f] for f in facts}, "a failed trial verified nothing"
    warnings = [e for e in backups.events("proved") if e.type == "Warning" and e.reason == "BackupObjectCorrupt"]
    assert len(warnings) == 1, [(e.reason, e.message) for e in backups.events("proved")]
