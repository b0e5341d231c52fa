"""What the restore tests share: the CoreOS example manifest filled in, the keys a cluster holds,
how a failed restore is reported."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kube_sandbox.config import CHECKOUT_DIR
from tests.integration.etcd_operator.operator_clusters import Clusters
from tests.integration.restore_operator.conftest import Restores

RESTORE_TIMEOUT = 300
EXAMPLE_CLUSTER = "example-etcd-cluster"  # the name examples/restore_cr.yaml restores


def coreos_restore_cr(name: str, path: str, secret: str, endpoint: str = "") -> dict[str, Any]:
    """examples/restore_cr.yaml (the CoreOS example) with its placeholders filled in, restoring
    EtcdCluster `name` (EXAMPLE_CLUSTER: the manifest as it is). The S3 server is the one the
    secret's config file names (create_aws_secret(server_in_config=True)); `endpoint` is for tests
    whose secret names none: added as spec.s3.endpoint with forcePathStyle."""
    text = (Path(CHECKOUT_DIR) / "examples" / "restore_cr.yaml").read_text()
    text = text.replace("<full-s3-path>", path).replace("<aws-secret>", secret)
    body: dict[str, Any] = yaml.safe_load(text)
    body["metadata"]["name"] = name
    body["spec"]["etcdCluster"]["name"] = name
    if endpoint:
        body["spec"]["s3"].update({"endpoint": endpoint, "forcePathStyle": True})
    return body


def keys_of(clusters: Clusters, name: str) -> dict[str, str]:
    lines = clusters.etcdctl(name, "get", "", "--prefix").splitlines()
    return dict(zip(lines[0::2], lines[1::2]))


def assert_failed_with(restores: Restores, name: str, reason: str) -> dict[str, Any]:
    status = restores.wait_phase(name, "Failed", timeout=180)
    assert status["reason"] == reason and status["succeeded"] is False, status
    events = [e for e in restores.events_once_recorded(name, {"RestoreFailed"}) if e.reason == "RestoreFailed"]
    assert len(events) == 1 and events[0].type == "Warning" and reason in events[0].message, events
    return status
