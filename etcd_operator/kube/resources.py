"""The Kubernetes objects the etcd operator reads and writes, one small facade per kind.

Every method takes and returns plain API dicts (camelCase, as `kubectl get -o json` shows),
raises `etcd_operator.kube.errors` exceptions and retries transient failures. Reads skip the
client's model classes: the dict is exactly what the apiserver sent.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kubernetes.client import ApiClient, CoreV1Api, CustomObjectsApi

from etcd_operator.constants import API_GROUP, API_VERSION, PLURAL
from etcd_operator.kube.client import fetch_json, list_items
from etcd_operator.kube.errors import Conflict, NotFound
from etcd_operator.kube.watching import EventHandler, watch_forever

MERGE_PATCH = "application/merge-patch+json"


class EtcdClusters:
    """EtcdCluster custom objects (etcd.database.coreos.com/v1beta2)."""

    def __init__(self, api: ApiClient) -> None:
        self._custom = CustomObjectsApi(api)

    def list(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """All EtcdClusters in `namespace`, or in every namespace when it is None."""
        if namespace is None:
            listing = fetch_json(self._custom.list_cluster_custom_object, group=API_GROUP, version=API_VERSION, plural=PLURAL)
        else:
            listing = fetch_json(
                self._custom.list_namespaced_custom_object,
                group=API_GROUP, version=API_VERSION, namespace=namespace, plural=PLURAL,
            )
        return list_items(listing)

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        return fetch_json(
            self._custom.get_namespaced_custom_object,
            group=API_GROUP, version=API_VERSION, namespace=namespace, plural=PLURAL, name=name,
        )

    def patch_status(
        self, namespace: str, name: str, status: dict[str, Any], *, resource_version: str | None = None
    ) -> dict[str, Any]:
        """Merge `status` into the object's status through the /status subresource.

        Without `resource_version` the patch always applies (last writer wins); with it the
        apiserver refuses with Conflict if the object changed since that version.
        """
        body: dict[str, Any] = {"status": status}
        if resource_version is not None:
            body["metadata"] = {"resourceVersion": resource_version}
        return fetch_json(
            self._custom.patch_namespaced_custom_object_status,
            group=API_GROUP, version=API_VERSION, namespace=namespace, plural=PLURAL, name=name,
            body=body, _content_type=MERGE_PATCH,
        )

    def watch(self, namespace: str | None, *, stop: threading.Event, on_event: EventHandler, **options: Any) -> None:
        """`watch_forever` over EtcdClusters in `namespace` (None: all namespaces)."""
        if namespace is None:
            watch_forever(
                self._custom.list_cluster_custom_object, stop=stop, on_event=on_event, name="etcdclusters",
                group=API_GROUP, version=API_VERSION, plural=PLURAL, **options,
            )
        else:
            watch_forever(
                self._custom.list_namespaced_custom_object, stop=stop, on_event=on_event,
                name=f"etcdclusters in {namespace}",
                group=API_GROUP, version=API_VERSION, namespace=namespace, plural=PLURAL, **options,
            )


def _delete_quietly(
    delete_fn: Callable[..., Any], namespace: str, name: str, *, grace_period_seconds: int | None = None,
    uid_precondition: str | None = None, propagation_policy: str | None = None,
) -> None:
    body: dict[str, Any] = {}
    if grace_period_seconds is not None:
        body["gracePeriodSeconds"] = grace_period_seconds
    if uid_precondition is not None:
        body["preconditions"] = {"uid": uid_precondition}
    if propagation_policy is not None:
        body["propagationPolicy"] = propagation_policy
    try:
        fetch_json(delete_fn, name=name, namespace=namespace, body=body or None)
    except NotFound:
        return  # already gone: what we wanted
    except Conflict:
        if uid_precondition is None:
            raise
        # The UID precondition failed: the object we meant is gone and a new one has its name.


class Pods:
    def __init__(self, api: ApiClient) -> None:
        self._core = CoreV1Api(api)

    def list(self, namespace: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        return list_items(fetch_json(self._core.list_namespaced_pod, namespace=namespace, label_selector=label_selector))

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        return fetch_json(self._core.read_namespaced_pod, name=name, namespace=namespace)

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create a pod. AlreadyExists may also mean an earlier attempt whose answer was lost
        did create it."""
        return fetch_json(self._core.create_namespaced_pod, namespace=namespace, body=body)

    def delete(
        self, namespace: str, name: str, grace_period_seconds: int | None = None, uid_precondition: str | None = None
    ) -> None:
        """Delete a pod; one already gone is fine. With `uid_precondition`, only that exact pod
        is deleted: a newer pod that took the name is left alone (and that counts as gone)."""
        _delete_quietly(
            self._core.delete_namespaced_pod, namespace, name,
            grace_period_seconds=grace_period_seconds, uid_precondition=uid_precondition,
        )

    def watch(
        self, namespace: str | None, label_selector: str | None, *, stop: threading.Event, on_event: EventHandler, **options: Any
    ) -> None:
        """`watch_forever` over pods matching `label_selector` in `namespace` (None: all)."""
        name = f"pods ({label_selector or 'all'}) in {namespace or 'all namespaces'}"
        if namespace is None:
            watch_forever(
                self._core.list_pod_for_all_namespaces, stop=stop, on_event=on_event, name=name,
                label_selector=label_selector, **options,
            )
        else:
            watch_forever(
                self._core.list_namespaced_pod, stop=stop, on_event=on_event, name=name,
                namespace=namespace, label_selector=label_selector, **options,
            )


class Services:
    def __init__(self, api: ApiClient) -> None:
        self._core = CoreV1Api(api)

    def list(self, namespace: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        return list_items(fetch_json(self._core.list_namespaced_service, namespace=namespace, label_selector=label_selector))

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        return fetch_json(self._core.read_namespaced_service, name=name, namespace=namespace)

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return fetch_json(self._core.create_namespaced_service, namespace=namespace, body=body)

    def delete(self, namespace: str, name: str) -> None:
        """Delete a service; one already gone is fine."""
        _delete_quietly(self._core.delete_namespaced_service, namespace, name)


class PersistentVolumeClaims:
    def __init__(self, api: ApiClient) -> None:
        self._core = CoreV1Api(api)

    def list(self, namespace: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        return list_items(
            fetch_json(self._core.list_namespaced_persistent_volume_claim, namespace=namespace, label_selector=label_selector)
        )

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        return fetch_json(self._core.read_namespaced_persistent_volume_claim, name=name, namespace=namespace)

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return fetch_json(self._core.create_namespaced_persistent_volume_claim, namespace=namespace, body=body)

    def delete(self, namespace: str, name: str) -> None:
        """Delete a claim; one already gone is fine."""
        _delete_quietly(self._core.delete_namespaced_persistent_volume_claim, namespace, name)
