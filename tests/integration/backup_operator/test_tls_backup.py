"""A cluster serving TLS to clients is backed up, with CoreOS's `clientTLSSecret` and with
`etcdCluster.name` (the client certificate then comes from the cluster's operatorSecret)."""
from __future__ import annotations

from pathlib import Path

import pytest

from etcd_common.storage import s3
from tests.integration.backup_operator.backups import Backups, download, etcd_backup, keys_in_snapshot
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.etcd_operator.tls_certs import coreos_static_tls

pytestmark = pytest.mark.sandbox


def test_tls_cluster_is_backed_up(backups: Backups, clusters: Clusters, storage: s3.S3Storage, bucket: str,
                                  tmp_path: Path) -> None:
    name = "secure"
    tls = coreos_static_tls(tmp_path / "pki", name, clusters.namespace)
    for secret in tls.secrets():
        clusters.core.create_namespaced_secret(clusters.namespace, secret)
    clusters.create(etcd_cluster(name, size=1, TLS=tls.spec()))
    clusters.wait_running(name, ready=1, timeout=180)
    client_url = f"https://{name}-client.{clusters.namespace}.svc:2379"
    result = clusters.sandbox.etcdctl([client_url], *tls.client_flags(), "put", "/secure/key", "value")
    assert result.returncode == 0, result.stderr

    backups.create(etcd_backup("by-endpoint", {
        "etcdEndpoints": [client_url], "clientTLSSecret": tls.operator_secret, "storageType": "S3",
        "s3": backups.s3_spec(f"{bucket}/by-endpoint.backup"),
    }))
    backups.create(etcd_backup("by-cluster", {
        "etcdCluster": {"name": name}, "storageType": "S3", "s3": backups.s3_spec(f"{bucket}/by-cluster.backup"),
    }))
    for backup in ("by-endpoint", "by-cluster"):
        status = backups.wait_succeeded(backup, timeout=180)
        assert status["lastBackup"]["endpoint"].startswith("https://"), status
        restored = keys_in_snapshot(download(storage, bucket, f"{backup}.backup"), tmp_path / backup)
        assert restored == {"/secure/key": "value"}

    # Without the client certificate the TLS cluster refuses the backup, with a clear reason.
    backups.create(etcd_backup("no-client-cert", {
        "etcdEndpoints": [client_url], "clientTLSSecret": "no-such-secret", "storageType": "S3",
        "s3": backups.s3_spec(f"{bucket}/none.backup"),
    }))
    status = backups.wait_failed("no-client-cert", "EtcdClientTLSUnavailable", timeout=120)
    assert "no-such-secret" in status["Reason"]
