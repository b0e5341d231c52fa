"""Every etcd version the operator runs restores from its own backup: a 3-member cluster on the
newest 3.4, 3.5 and 3.6 is backed up by the backup operator, changed after the backup, then
restored with CoreOS's restore_cr.yaml; the restored cluster runs the same version and serves
exactly the backed-up keys (the restore tools are chosen by what each version's image has: 3.4
has no etcdutl)."""
from __future__ import annotations

import pytest

from kube_sandbox.binaries import DEBIAN_ETCD_VERSION, newest_etcd_version
from kube_sandbox.testing import Sandbox
from tests.integration.backup_operator.backups import Backups, etcd_backup
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.restore_operator.conftest import Restores
from tests.integration.restore_operator.restore_steps import RESTORE_TIMEOUT, coreos_restore_cr, keys_of
from tests.integration.restore_operator.snapshots import BUCKET, ensure_bucket, unique_key

pytestmark = pytest.mark.sandbox


@pytest.mark.parametrize("minor", ["3.4", "3.5", "3.6"])  # 3.4: Debian's 3.4.23, as CoreOS clusters run
def test_a_cluster_restores_from_its_own_backup(backup_operator: Sandbox, backups: Backups, clusters: Clusters,
                                                restores: Restores, minor: str) -> None:
    name, ns = "example-etcd-cluster", clusters.namespace
    version = DEBIAN_ETCD_VERSION if minor == "3.4" else newest_etcd_version(minor)
    clusters.create(etcd_cluster(name, 3, version=version))
    clusters.wait_running(name, 3, timeout=180)
    backed_up = {f"v{minor}/{index}": f"value-{index}" for index in range(20)}
    for key, value in backed_up.items():
        clusters.put(name, key, value)
    ensure_bucket(clusters.sandbox)
    path = f"{BUCKET}/{unique_key(f'each-version-{minor}')}"
    backups.create(etcd_backup("backup", {
        "etcdEndpoints": [f"http://{name}-client.{ns}.svc:2379"], "storageType": "S3", "s3": backups.s3_spec(path)}))
    backups.wait_succeeded("backup")
    clusters.put(name, f"v{minor}/after-backup", "not in the backup")

    restores.create(coreos_restore_cr(name, path, "aws", clusters.sandbox.config.s3_endpoint))
    status = restores.wait_phase(name, "Completed", timeout=RESTORE_TIMEOUT)
    assert status["succeeded"] is True, status
    running = clusters.wait_running(name, 3, timeout=120)
    assert running["currentVersion"] == version, running
    assert keys_of(clusters, name) == backed_up
