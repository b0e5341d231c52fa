"""Bad input gets a clear reason in status and a Warning event, never a crash; fixing the cause
(the secret, the bucket, the spec) recovers by itself."""
from __future__ import annotations

from typing import Any

import pytest

from etcd_common.storage import s3
from kube_sandbox.testing import wait_for
from tests.integration.backup_operator.backup_deployment import backup_metric
from tests.integration.backup_operator.backups import Backups, etcd_backup
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster

pytestmark = pytest.mark.sandbox


def spec(backups: Backups, path: str, **extra: Any) -> dict[str, Any]:
    return {"etcdCluster": {"name": "source"}, "storageType": "S3", "s3": backups.s3_spec(path), **extra}


def test_bad_inputs_are_reported_and_recover_once_fixed(
    backups: Backups, clusters: Clusters, storage: s3.S3Storage, bucket: str,
) -> None:
    clusters.create(etcd_cluster("source", 1))
    clusters.wait_running("source", 1, timeout=180)
    backups.create_aws_secret("wrong-key", secret_key="not-the-secret")
    backups.create_aws_secret("malformed", files={"accessKey": "x", "secretKey": "y"})  # pre-CoreOS-format keys
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "missing-secret": (spec(backups, f"{bucket}/a", s3={**backups.s3_spec(f"{bucket}/a", secret="absent")}),
                           s3.REASON_SECRET_INVALID),
        "malformed-secret": (spec(backups, f"{bucket}/b", s3={**backups.s3_spec(f"{bucket}/b", secret="malformed")}),
                             s3.REASON_SECRET_INVALID),
        "wrong-credentials": (spec(backups, f"{bucket}/c", s3={**backups.s3_spec(f"{bucket}/c", secret="wrong-key")}),
                              s3.REASON_ACCESS_DENIED),
        "missing-bucket": (spec(backups, f"{bucket}-later/d"), s3.REASON_BUCKET_NOT_FOUND),
        "missing-cluster": ({**spec(backups, f"{bucket}/e"), "etcdCluster": {"name": "no-such-cluster"}},
                            "EtcdClusterNotFound"),
        # The source cluster's pod, at a port nothing listens on (an endpoint in the EtcdBackup's own
        # namespace: others are refused before anything is tried, test_tenants.py).
        "unreachable-etcd": ({"etcdEndpoints": [f"http://source-client.{backups.namespace}.svc:9"], "storageType": "S3",
                              "backupPolicy": {"timeoutInSecond": 20}, "s3": backups.s3_spec(f"{bucket}/f")},
                             "EtcdUnreachable"),
        # GCS works (issue 23); its secret missing is reported as such, and fixing the spec recovers.
        "gcs-without-secret": ({"etcdCluster": {"name": "source"}, "storageType": "GCS",
                                "gcs": {"path": f"{bucket}/g", "gcpSecret": "gcp"}}, "GCSSecretInvalid"),
        "unreachable-s3": ({**spec(backups, f"{bucket}/h"),
                            "s3": {**backups.s3_spec(f"{bucket}/h"), "endpoint": "http://127.0.0.1:9"},
                            "backupPolicy": {"timeoutInSecond": 20}}, s3.REASON_UNREACHABLE),
    }
    for name, (body, _) in cases.items():
        backups.create(etcd_backup(name, body))
    for name, (_, reason) in cases.items():
        status = backups.wait_failed(name, reason, timeout=120)
        assert reason in status["Reason"] and status["observedGeneration"] == 1, (name, status)
        condition = next(c for c in status["conditions"] if c["type"] == "Succeeded")
        assert condition["status"] == "False" and condition["reason"] == reason and condition["message"], condition
        wait_for(lambda: backups.has_event(name, "Warning", reason), timeout=30, what=f"{name}: {reason} event")
    assert (backup_metric(backups.sandbox, "etcd_backup_failures_total", {"reason": s3.REASON_ACCESS_DENIED})
            or 0) >= 1
    # A transient failure of a one-shot backup is retried (with backoff) within timeoutInSecond.
    retried = backups.wait_status("unreachable-etcd", lambda s: s.get("consecutiveFailures", 0) >= 2,
                                  "a second attempt", timeout=60)
    assert retried["firstAttemptTime"] != retried["lastAttemptTime"]

    # Fixing each cause recovers without touching the EtcdBackup.
    backups.create_aws_secret("absent")
    backups.create_aws_secret("wrong-key")
    backups.create_aws_secret("malformed")
    storage.create_bucket(f"{bucket}-later")
    # ... or by fixing the spec (a new generation is retried at once).
    backups.patch_spec("gcs-without-secret", {"storageType": "S3", "s3": backups.s3_spec(f"{bucket}/g")})
    backups.patch_spec("missing-cluster", {"etcdCluster": {"name": "source"}})
    for name in ("missing-secret", "malformed-secret", "wrong-credentials", "missing-bucket", "gcs-without-secret",
                 "missing-cluster"):
        status = backups.wait_succeeded(name, timeout=400)
        assert "Reason" not in status and status["lastResult"] == "Succeeded", (name, status)
