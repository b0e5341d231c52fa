"""An EtcdRestore deleted in each of its phases leaves the original cluster serving, or the restored
one, never none (issue 41 finding 12: deleted while Replacing, it used to leave no cluster at all,
the old one deleted and no new one created). Real etcd, real S3 (SeaweedFS), both operators
deployed from this checkout."""
from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.restore_operator.conftest import GROUP, PLURAL, VERSION, Restores
from tests.integration.restore_operator.restore_steps import RESTORE_TIMEOUT, coreos_restore_cr, keys_of
from tests.integration.restore_operator.snapshots import BUCKET, create_aws_secret, snapshot_to_s3, unique_key

pytestmark = pytest.mark.sandbox

PHASES = ("Verifying", "Staging", "Replacing", "Restoring", "Completed")
# Deleted in these, the restore deleted nothing yet: the original cluster serves on.
BEFORE_THE_DELETE = ("Verifying", "Staging")
BACKED_UP = {"backed-up": "yes"}
ORIGINAL = {**BACKED_UP, "after-backup": "original"}


def _gone(restores: Restores, name: str) -> bool:
    try:
        restores.custom.get_namespaced_custom_object(GROUP, VERSION, restores.namespace, PLURAL, name)
    except ApiException as e:
        if e.status == 404:
            return True
        raise
    return False


@pytest.mark.parametrize("phase", ["Staging", "Replacing", "Restoring"])
def test_a_restore_deleted_midway_leaves_a_cluster_that_serves(clusters: Clusters, restores: Restores,
                                                               phase: str) -> None:
    """The restore is deleted as soon as it is seen in `phase` or later (Replacing may last less than
    a look; the phase it was deleted in is what decides the expected data)."""
    name = f"midway-{phase.lower()}"
    clusters.create(etcd_cluster(name, 1))
    clusters.wait_running(name, 1, timeout=120)
    for key, value in BACKED_UP.items():
        clusters.put(name, key, value)
    key = unique_key("midway")
    snapshot_to_s3(clusters, name, key)
    clusters.put(name, "after-backup", ORIGINAL["after-backup"])
    secret = create_aws_secret(clusters.sandbox, clusters.namespace, server_in_config=True)
    restores.create(coreos_restore_cr(name, f"{BUCKET}/{key}", secret))

    def reached() -> str | None:
        seen = restores.status(name).get("phase") or ""
        if seen == "Failed":
            raise AssertionError(f"restore failed before it was deleted: {restores.status(name)}")
        return seen if seen in PHASES and PHASES.index(seen) >= PHASES.index(phase) else None
    deleted_in = wait_for(reached, timeout=RESTORE_TIMEOUT, interval=0.1, what=f"restore {name} in {phase}")
    restores.custom.delete_namespaced_custom_object(GROUP, VERSION, restores.namespace, PLURAL, name)
    print(f"\nrestore deleted in phase {deleted_in}")

    wait_for(lambda: _gone(restores, name), timeout=RESTORE_TIMEOUT, interval=1.0,
             what=f"the deleted restore {name} to finish and go")
    cluster: dict[str, Any] = wait_for(lambda: clusters.get(name), timeout=60, what=f"EtcdCluster {name}")
    assert cluster, f"no EtcdCluster {name} after its restore was deleted in {deleted_in}"
    clusters.wait_running(name, 1, timeout=RESTORE_TIMEOUT)
    expected = ORIGINAL if deleted_in in BEFORE_THE_DELETE else BACKED_UP
    assert keys_of(clusters, name) == expected, f"deleted in {deleted_in}"
