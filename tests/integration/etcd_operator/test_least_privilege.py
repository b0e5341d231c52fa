"""No confused deputy: whoever may write an EtcdCluster cannot make the operator run an image
from a repository it does not trust, or override what it manages through etcdEnv. Both fail the
cluster with a reason and a Warning event; nothing is started for it."""
from __future__ import annotations

from typing import Any

import pytest

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster


@pytest.mark.parametrize(("name", "spec", "says"), [
    ("untrusted", {"repository": "registry.example.com/anything/etcd"}, "registry.example.com/anything/etcd"),
    ("forced", {"pod": {"etcdEnv": [{"name": "ETCD_FORCE_NEW_CLUSTER", "value": "true"}]}}, "ETCD_FORCE_NEW_CLUSTER"),
])
def test_refused_spec_starts_nothing(clusters: Clusters, name: str, spec: dict[str, Any], says: str) -> None:
    clusters.create(etcd_cluster(name, size=1, **spec))
    status = clusters.wait_status(name, lambda s: s.get("phase") == "Failed", "phase Failed", timeout=60)
    assert status.get("reason") == "InvalidSpec" and says in status["message"], status
    event = wait_for(lambda: next((e for e in clusters.events(name) if e.reason == "InvalidSpec"), None),
                     timeout=30, what="an InvalidSpec event")
    assert event.type == "Warning" and says in event.message
    assert clusters.pods(name) == []
