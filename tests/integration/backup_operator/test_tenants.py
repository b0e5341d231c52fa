"""An EtcdBackup reaches only its own namespace's clusters: naming another namespace's cluster
(by its client URL, or by a name only that namespace has) or an address outside the cluster is
refused with a reason naming the endpoint and the flag that would allow it, before anything is
read or written (the backup operator runs with its default flags here)."""
from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from etcd_common.storage import s3
from kube_sandbox.testing import wait_for
from tests.integration.backup_operator.backups import Backups, etcd_backup
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster

pytestmark = pytest.mark.sandbox

ENDPOINT_NOT_ALLOWED = "EndpointNotAllowed"


@pytest.fixture
def other_namespace(backups: Backups, namespace: str) -> Iterator[str]:
    """A second namespace of this test's own ("namespace B"), deleted afterwards."""
    name = f"{namespace[:50]}-b-{secrets.token_hex(2)}"
    backups.core.create_namespace({"metadata": {"name": name, "labels": {"sandbox-test": "true"}}})
    yield name
    backups.core.delete_namespace(name)


def test_another_namespaces_cluster_is_refused(backups: Backups, other_namespace: str, storage: s3.S3Storage,
                                               bucket: str) -> None:
    Clusters(backups.sandbox, other_namespace).create(etcd_cluster("victim", 1))
    victim_url = f"http://victim-client.{other_namespace}.svc:2379"

    def spec(path: str, **source: Any) -> dict[str, Any]:
        return {**source, "storageType": "S3", "s3": backups.s3_spec(f"{bucket}/{path}")}

    refused = {
        "other-namespace-url": (spec("a", etcdEndpoints=[victim_url]), victim_url),
        "other-namespace-pod": (spec("b", etcdEndpoints=[f"http://victim-0.victim.{other_namespace}.svc.cluster.local:2379"]),
                                f"victim-0.victim.{other_namespace}.svc.cluster.local"),
        "ip-address": (spec("c", etcdEndpoints=["http://127.0.0.1:2379"]), "127.0.0.1"),
    }
    # Not a plain URL: no flag allows it.
    backups.create(etcd_backup("user-info", spec("d", etcdEndpoints=[f"http://x@victim-client.{backups.namespace}.svc:2379"])))
    for name, (body, _) in refused.items():
        backups.create(etcd_backup(name, body))
    # The name alone always means a cluster of the EtcdBackup's own namespace.
    backups.create(etcd_backup("other-namespace-name", spec("e", etcdCluster={"name": "victim"})))

    for name, (_, fragment) in refused.items():
        status = backups.wait_failed(name, ENDPOINT_NOT_ALLOWED, timeout=120)
        assert fragment in status["Reason"] and "--allow-cross-namespace-endpoints" in status["Reason"], (name, status)
        condition = next(c for c in status["conditions"] if c["type"] == "Succeeded")
        assert condition["reason"] == ENDPOINT_NOT_ALLOWED and fragment in condition["message"], (name, condition)
        wait_for(lambda: backups.has_event(name, "Warning", ENDPOINT_NOT_ALLOWED), timeout=30,
                 what=f"{name}: {ENDPOINT_NOT_ALLOWED} event")
    status = backups.wait_failed("user-info", ENDPOINT_NOT_ALLOWED, timeout=120)
    assert "user information" in status["Reason"], status
    status = backups.wait_failed("other-namespace-name", "EtcdClusterNotFound", timeout=120)
    assert f"{backups.namespace}/victim" in status["Reason"], status
    assert storage.list(bucket, "") == [], "nothing may be written for a refused backup"
