"""The backup operator under test runs as a Deployment in the sandbox, under the shipped RBAC,
next to the etcd operator (which makes the etcd clusters it backs up)."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from etcd_common.storage import s3
from kube_sandbox.config import CHECKOUT_DIR
from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.backup_operator.backup_deployment import (
    backup_operator_logs,
    deploy_backup_operator,
    wait_backup_operator_leading,
)
from tests.integration.backup_operator.backups import Backups, sandbox_storage, unique_bucket
from tests.integration.backup_operator.stores import STORAGE_TYPES, SandboxStore, new_bucket, remove_bucket, sandbox_store
from tests.integration.etcd_operator.operator_clusters import Clusters
from tests.integration.etcd_operator.operator_deployment import deploy_operator, forbidden_lines, operator_logs
from tests.sandbox_sharing import setup_lock

S3_REFUSALS = (s3.REASON_ACCESS_DENIED,)


@pytest.fixture(scope="session")
def backup_operator(sandbox: Sandbox) -> Sandbox:
    """CRDs, the etcd operator and the backup operator deployed from this checkout's code."""
    with setup_lock(sandbox.config.state_dir):
        sandbox.kubectl("apply", "-f", str(CHECKOUT_DIR / "crds"))
        for crd in ("etcdclusters", "etcdbackups"):
            sandbox.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{crd}.etcd.database.coreos.com")
        sandbox.kubectl("api-resources", "--api-group=etcd.database.coreos.com")
        for manifest in ("namespace.yaml", "rbac.yaml"):
            sandbox.kubectl("apply", "-f", str(CHECKOUT_DIR / "deploy" / manifest))
        print(f"\n{deploy_operator(sandbox)}")
        print(deploy_backup_operator(sandbox))
        wait_for(lambda: "became leader" in operator_logs(sandbox), timeout=60, what="etcd operator leading")
        wait_backup_operator_leading(sandbox)
    return sandbox


@pytest.fixture
def backups(backup_operator: Sandbox, namespace: str) -> Iterator[Backups]:
    """EtcdBackups in this test's namespace (with the awsSecret); fails the test if the backup
    operator made a request its RBAC refused meanwhile."""
    # S3's own 403s (wrong credentials, a test's doing) are not RBAC refusals.
    before = set(forbidden_lines(backup_operator_logs(backup_operator), allowed=S3_REFUSALS))
    helper = Backups(backup_operator, namespace)
    helper.create_aws_secret()
    yield helper
    new = [line for line in forbidden_lines(backup_operator_logs(backup_operator), allowed=S3_REFUSALS)
           if line not in before]
    assert not new, "backup operator made forbidden requests:\n" + "\n".join(new[-5:])


@pytest.fixture
def clusters(backup_operator: Sandbox, namespace: str) -> Clusters:
    return Clusters(backup_operator, namespace)


@pytest.fixture
def storage(sandbox: Sandbox) -> s3.S3Storage:
    return sandbox_storage(sandbox)


@pytest.fixture
def bucket(storage: s3.S3Storage) -> Iterator[str]:
    """A bucket of the test's own, deleted afterwards (SeaweedFS gives each bucket volumes of its
    own and runs out of them after a few dozen buckets)."""
    name = unique_bucket("backups")
    storage.create_bucket(name)
    yield name
    for leftover in (name, f"{name}-later"):
        storage.delete_bucket(leftover)


@pytest.fixture(params=STORAGE_TYPES)
def other_store(request: pytest.FixtureRequest, backups: Backups) -> Iterator[tuple[SandboxStore, str]]:
    """Each of ABS (Azurite), GCS (fake-gcs-server) and OSS (SeaweedFS's S3 API) in turn: the
    store, its secret in the test's namespace and a bucket of the test's own, removed afterwards
    (retried while an EtcdBackup of the test may still be writing to it)."""
    store = sandbox_store(backups.sandbox, request.param)
    store.create_secret(backups)
    bucket = new_bucket(store, store.section)
    yield store, bucket
    for name in [b["metadata"]["name"] for b in backups.custom.list_namespaced_custom_object(
            "etcd.database.coreos.com", "v1beta2", backups.namespace, "etcdbackups")["items"]]:
        backups.delete(name)
    wait_for(lambda: remove_bucket(store, bucket) is None, timeout=60, what=f"bucket {bucket} removed")
