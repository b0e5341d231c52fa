"""The generic resource client through the real kubernetes client against a scripted apiserver: the
requests they make, the dicts they return, which failures they swallow, retry or raise."""
from __future__ import annotations

from typing import Any

import pytest

from kube_adapter.errors import Conflict, Invalid, NotFound
from kube_adapter.resources import PERSISTENT_VOLUME_CLAIMS, PODS, SERVICES, Resource, ResourceClient
from tests.unit.kube_adapter.recording_clock import RecordingClock
from tests.unit.kube_adapter.scripted_apiserver import Reply, ScriptedApiServer, status_body

GROUP_VERSION = "/apis/etcd.database.coreos.com/v1beta2"
# A custom resource: not a kind the client has a typed API class for.
ETCD_CLUSTERS = Resource("etcd.database.coreos.com", "v1beta2", "etcdclusters", "EtcdCluster")
CLUSTER = {
    "apiVersion": "etcd.database.coreos.com/v1beta2",
    "kind": "EtcdCluster",
    "metadata": {"name": "c1", "namespace": "ns", "resourceVersion": "7", "generation": 2},
    "spec": {"size": 3, "version": "3.5.1"},
}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "c1-abcde", "namespace": "ns", "labels": {"app": "etcd", "etcd_cluster": "c1"}},
    "spec": {
        "hostname": "c1-abcde",
        "subdomain": "c1",
        "restartPolicy": "Never",
        "containers": [{"name": "etcd", "image": "quay.io/coreos/etcd:v3.5.1", "command": ["/usr/local/bin/etcd"],
                        "ports": [{"containerPort": 2379, "name": "client"}]}],
    },
}


def listing(kind: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": "9"}, "items": list(items)}


def test_clusters_listed_across_or_within_namespaces(apiserver: ScriptedApiServer) -> None:
    apiserver.script("GET", f"{GROUP_VERSION}/etcdclusters", Reply(body=listing("EtcdClusterList", CLUSTER)))
    apiserver.script("GET", f"{GROUP_VERSION}/namespaces/ns/etcdclusters", Reply(body=listing("EtcdClusterList")))
    clusters = ResourceClient(apiserver.api_client(), ETCD_CLUSTERS)

    assert clusters.list(None) == [CLUSTER]
    assert clusters.list("ns") == []


def test_cluster_get_returns_the_object_or_not_found(apiserver: ScriptedApiServer) -> None:
    path = f"{GROUP_VERSION}/namespaces/ns/etcdclusters/c1"
    apiserver.script("GET", path, Reply(body=CLUSTER), Reply(404, status_body(404, "NotFound", "etcdclusters \"c1\" not found")))
    clusters = ResourceClient(apiserver.api_client(), ETCD_CLUSTERS)

    assert clusters.get("ns", "c1") == CLUSTER
    with pytest.raises(NotFound, match="not found"):
        clusters.get("ns", "c1")


def test_status_is_merge_patched_through_the_status_subresource(apiserver: ScriptedApiServer) -> None:
    path = f"{GROUP_VERSION}/namespaces/ns/etcdclusters/c1/status"
    apiserver.script("PATCH", path, Reply(body={**CLUSTER, "status": {"phase": "Running"}}))
    clusters = ResourceClient(apiserver.api_client(), ETCD_CLUSTERS)

    written = clusters.patch_status("ns", "c1", {"phase": "Running", "conditions": [{"type": "Available", "status": "True"}]})

    assert written["status"] == {"phase": "Running"}
    request = apiserver.next_request()
    assert request.headers["Content-Type"] == "application/merge-patch+json"
    assert request.body == {"status": {"phase": "Running", "conditions": [{"type": "Available", "status": "True"}]}}


def test_status_patch_with_a_resource_version_can_conflict(apiserver: ScriptedApiServer) -> None:
    path = f"{GROUP_VERSION}/namespaces/ns/etcdclusters/c1/status"
    apiserver.script("PATCH", path, Reply(409, status_body(409, "Conflict", "the object has been modified")))
    clusters = ResourceClient(apiserver.api_client(), ETCD_CLUSTERS)

    with pytest.raises(Conflict):
        clusters.patch_status("ns", "c1", {"phase": "Running"}, resource_version="7")
    assert apiserver.next_request().body == {"status": {"phase": "Running"}, "metadata": {"resourceVersion": "7"}}


def test_pod_body_goes_out_as_given(apiserver: ScriptedApiServer) -> None:
    created = {**POD, "metadata": {**POD["metadata"], "uid": "u-1", "resourceVersion": "10"}}
    apiserver.script("POST", "/api/v1/namespaces/ns/pods", Reply(201, created))

    assert ResourceClient(apiserver.api_client(), PODS).create("ns", POD) == created
    assert apiserver.next_request().body == POD


def test_pods_listed_by_label(apiserver: ScriptedApiServer) -> None:
    apiserver.script("GET", "/api/v1/namespaces/ns/pods", Reply(body=listing("PodList", POD)))

    assert ResourceClient(apiserver.api_client(), PODS).list("ns", "app=etcd,etcd_cluster=c1") == [POD]
    assert apiserver.next_request().query["labelSelector"] == "app=etcd,etcd_cluster=c1"


def test_deleting_a_pod_that_is_gone_is_quiet(apiserver: ScriptedApiServer) -> None:
    apiserver.script("DELETE", "/api/v1/namespaces/ns/pods/c1-abcde", Reply(404, status_body(404, "NotFound")))
    ResourceClient(apiserver.api_client(), PODS).delete("ns", "c1-abcde")


def test_pod_delete_carries_grace_period_and_uid_precondition(apiserver: ScriptedApiServer) -> None:
    apiserver.script("DELETE", "/api/v1/namespaces/ns/pods/c1-abcde", Reply(body=POD))
    ResourceClient(apiserver.api_client(), PODS).delete("ns", "c1-abcde", grace_period_seconds=0, uid_precondition="u-1")

    assert apiserver.next_request().body == {"gracePeriodSeconds": 0, "preconditions": {"uid": "u-1"}}


def test_a_failed_uid_precondition_means_our_pod_is_already_gone(apiserver: ScriptedApiServer) -> None:
    precondition_failed = status_body(409, "Conflict", "Precondition failed: UID in precondition: u-1, UID in object meta: u-2")
    apiserver.script("DELETE", "/api/v1/namespaces/ns/pods/c1-abcde", Reply(409, precondition_failed), Reply(409, precondition_failed))
    pods = ResourceClient(apiserver.api_client(), PODS)

    pods.delete("ns", "c1-abcde", uid_precondition="u-1")
    with pytest.raises(Conflict):
        pods.delete("ns", "c1-abcde")


def test_transient_failures_are_retried(apiserver: ScriptedApiServer, recording_clock: RecordingClock) -> None:
    apiserver.script(
        "GET", "/api/v1/namespaces/ns/pods/c1-abcde",
        Reply(503, status_body(503, "ServiceUnavailable")),
        Reply(429, status_body(429, "TooManyRequests"), headers={"Retry-After": "1"}),
        Reply(body=POD),
    )

    assert ResourceClient(apiserver.api_client(), PODS, clock=recording_clock).get("ns", "c1-abcde") == POD
    assert len(apiserver.seen) == 3
    after_503, after_429 = recording_clock.waits
    assert after_503 <= 0.2, "the first backoff"
    assert after_429 == 1.0, "Retry-After: 1 was not honoured"


def test_invalid_requests_are_not_retried(apiserver: ScriptedApiServer) -> None:
    apiserver.script("POST", "/api/v1/namespaces/ns/pods", Reply(422, status_body(422, "Invalid", "spec.containers: Required value")))

    with pytest.raises(Invalid, match="Required value"):
        ResourceClient(apiserver.api_client(), PODS).create("ns", POD)
    assert len(apiserver.seen) == 1


def test_a_body_the_client_cannot_build_fails_before_sending(apiserver: ScriptedApiServer) -> None:
    with pytest.raises(Invalid):
        ResourceClient(apiserver.api_client(), PODS).create("ns", {**POD, "spec": {**POD["spec"], "notAField": True}})
    assert apiserver.seen == []


def test_listed_items_look_like_objects_from_a_get(apiserver: ScriptedApiServer) -> None:
    bare = {"metadata": {"name": "c1-abcde", "namespace": "ns"}}
    apiserver.script("GET", "/api/v1/namespaces/ns/pods", Reply(body=listing("PodList", bare)))

    assert ResourceClient(apiserver.api_client(), PODS).list("ns") == [{**bare, "kind": "Pod", "apiVersion": "v1"}]


@pytest.mark.parametrize(
    ("resource", "plural", "kind"),
    [(SERVICES, "services", "Service"), (PERSISTENT_VOLUME_CLAIMS, "persistentvolumeclaims", "PersistentVolumeClaim")],
)
def test_services_and_claims(
    apiserver: ScriptedApiServer, resource: Resource, plural: str, kind: str
) -> None:
    base = f"/api/v1/namespaces/ns/{plural}"
    item = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "c1-client", "namespace": "ns"}, "spec": {}}
    apiserver.script("GET", base, Reply(body=listing(f"{kind}List", item)))
    apiserver.script("POST", base, Reply(201, item))
    apiserver.script("GET", f"{base}/c1-client", Reply(body=item))
    apiserver.script("DELETE", f"{base}/c1-client", Reply(body=item), Reply(404, status_body(404, "NotFound")))
    resources = ResourceClient(apiserver.api_client(), resource)

    assert resources.list("ns", "etcd_cluster=c1") == [item]
    assert resources.create("ns", item) == item
    assert resources.get("ns", "c1-client") == item
    resources.delete("ns", "c1-client")
    resources.delete("ns", "c1-client")
    assert [r.method for r in apiserver.seen] == ["GET", "POST", "GET", "DELETE", "DELETE"]


def test_any_built_in_kind_goes_through_its_typed_api(apiserver: ScriptedApiServer) -> None:
    """What the backup operator needs for its Jobs: a group other than core, same client."""
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "b1", "namespace": "ns"}}
    apiserver.script("GET", "/apis/batch/v1/namespaces/ns/jobs", Reply(body=listing("JobList", job)))
    apiserver.script("GET", "/apis/batch/v1/jobs", Reply(body=listing("JobList", job)))
    jobs = ResourceClient(apiserver.api_client(), Resource("batch", "v1", "jobs", "Job"))

    assert jobs.list("ns", "app=backup") == [job]
    assert jobs.list(None) == [job]
    assert [r.path for r in apiserver.seen] == ["/apis/batch/v1/namespaces/ns/jobs", "/apis/batch/v1/jobs"]
    assert apiserver.seen[0].query["labelSelector"] == "app=backup"


def test_cluster_scoped_kinds(apiserver: ScriptedApiServer) -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    apiserver.script("GET", "/api/v1/namespaces/team-a", Reply(body=namespace))
    apiserver.script("GET", "/apis/example.com/v1/widgets/w1", Reply(body={"metadata": {"name": "w1"}}))

    assert ResourceClient(apiserver.api_client(), Resource("", "v1", "namespaces", "Namespace", namespaced=False)
                          ).get("", "team-a") == namespace
    assert ResourceClient(apiserver.api_client(), Resource("example.com", "v1", "widgets", "Widget", namespaced=False)
                          ).get("", "w1") == {"metadata": {"name": "w1"}}
