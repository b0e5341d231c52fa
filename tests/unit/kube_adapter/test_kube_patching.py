"""Status writes: computed from a fresh read, submitted with its resourceVersion, redone on
Conflict."""
from __future__ import annotations

from typing import Any

import pytest

from kube_adapter.errors import Conflict
from kube_adapter.patching import patch_status_with_retry, status_merge_patch
from kube_adapter.resources import Resource, ResourceClient
from scripted_apiserver import Reply, ScriptedApiServer, status_body

OBJECT_PATH = "/apis/etcd.database.coreos.com/v1beta2/namespaces/ns/etcdclusters/c1"
ETCD_CLUSTERS = Resource("etcd.database.coreos.com", "v1beta2", "etcdclusters", "EtcdCluster")


def cluster(resource_version: str, generation: int, status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "etcd.database.coreos.com/v1beta2",
        "kind": "EtcdCluster",
        "metadata": {"name": "c1", "namespace": "ns", "resourceVersion": resource_version, "generation": generation},
        "spec": {"size": 3},
    }
    if status is not None:
        obj["status"] = status
    return obj


def observed_generation_status(obj: dict[str, Any]) -> dict[str, Any]:
    return {"phase": "Running", "observedGeneration": obj["metadata"]["generation"]}


CONFLICT = Reply(409, status_body(409, "Conflict", "the object has been modified; please apply your changes to the latest version"))


def test_merge_patch_removes_keys_the_new_status_lacks() -> None:
    current = {"phase": "Failed", "reason": "quorum lost", "size": 3}
    desired = {"phase": "Running", "size": 3}
    assert status_merge_patch(current, desired) == {"reason": None, "phase": "Running", "size": 3}


def test_conflict_rereads_recomputes_and_resubmits(apiserver: ScriptedApiServer) -> None:
    apiserver.script("GET", OBJECT_PATH, Reply(body=cluster("7", 1)), Reply(body=cluster("8", 2)))
    apiserver.script("PATCH", f"{OBJECT_PATH}/status", CONFLICT, Reply(body=cluster("9", 2, {"phase": "Running", "observedGeneration": 2})))

    written = patch_status_with_retry(ResourceClient(apiserver.api_client(), ETCD_CLUSTERS), "ns", "c1", observed_generation_status)

    assert written["status"]["observedGeneration"] == 2
    patches = [r.body for r in apiserver.seen if r.method == "PATCH"]
    assert patches == [
        {"status": {"phase": "Running", "observedGeneration": 1}, "metadata": {"resourceVersion": "7"}},
        {"status": {"phase": "Running", "observedGeneration": 2}, "metadata": {"resourceVersion": "8"}},
    ]


def test_an_unchanged_status_is_not_written(apiserver: ScriptedApiServer) -> None:
    current = cluster("7", 1, {"phase": "Running", "observedGeneration": 1})
    apiserver.script("GET", OBJECT_PATH, Reply(body=current))

    assert patch_status_with_retry(ResourceClient(apiserver.api_client(), ETCD_CLUSTERS), "ns", "c1", observed_generation_status) == current
    assert [r.method for r in apiserver.seen] == ["GET"]


def test_gives_up_after_the_attempts(apiserver: ScriptedApiServer) -> None:
    apiserver.fallback("GET", OBJECT_PATH, lambda request: Reply(body=cluster("7", 1)))
    apiserver.fallback("PATCH", f"{OBJECT_PATH}/status", lambda request: CONFLICT)

    with pytest.raises(Conflict):
        patch_status_with_retry(ResourceClient(apiserver.api_client(), ETCD_CLUSTERS), "ns", "c1", observed_generation_status, attempts=3)
    assert sum(r.method == "PATCH" for r in apiserver.seen) == 3
