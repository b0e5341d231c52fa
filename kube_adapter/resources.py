"""Any Kubernetes resource, built-in or custom, through one reference and one client.

`Resource(group, version, plural, kind, namespaced)` names a kind; `ResourceClient(api,
resource)` reads and writes its objects. Every method takes and returns plain API dicts
(camelCase, as `kubectl get -o json` shows), raises `kube_adapter.errors` exceptions and retries
transient failures. Reads skip the client's model classes: the dict is exactly what the
apiserver sent. Built-in kinds go through the client's typed API class (which also checks a
body before it is sent); kinds it does not know (custom resources) through CustomObjectsApi.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import kubernetes.client
from kubernetes.client import ApiClient, CustomObjectsApi

from kube_adapter.client import fetch_json_once, list_items
from kube_adapter.clock import SYSTEM_CLOCK, Clock
from kube_adapter.errors import Conflict, NotFound, retry_policy
from kube_adapter.watching import EventHandler, watch_forever

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


@dataclass(frozen=True)
class Resource:
    """A kind of Kubernetes object: `group` is "" for the core group (pods, services, ...)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


PODS = Resource("", "v1", "pods", "Pod")
SERVICES = Resource("", "v1", "services", "Service")
PERSISTENT_VOLUME_CLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
SECRETS = Resource("", "v1", "secrets", "Secret")
EVENTS = Resource("", "v1", "events", "Event")
POD_DISRUPTION_BUDGETS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")


def _snake_case(kind: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()


def _typed_api_class(resource: Resource) -> type[Any] | None:
    """The client's API class for a built-in kind (CoreV1Api, BatchV1Api, ...), or None."""
    if resource.group in ("", "core"):
        prefix = "Core"
    else:
        prefix = "".join(part.capitalize() for part in resource.group.removesuffix(".k8s.io").split("."))
    api_class = getattr(kubernetes.client, f"{prefix}{resource.version.capitalize()}Api", None)
    scope = "namespaced_" if resource.namespaced else ""
    if not isinstance(api_class, type) or not hasattr(api_class, f"read_{scope}{_snake_case(resource.kind)}"):
        return None
    return api_class


Call = tuple[Callable[..., Any], dict[str, Any]]


class ResourceClient:
    """Reads and writes objects of one `Resource`; safe to share between threads. `clock` is
    what its retries and watch backoff wait on (tests pass a fake)."""

    def __init__(self, api: ApiClient, resource: Resource, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.resource = resource
        self._clock = clock
        self._fetch_json = retry_policy(clock=clock)(fetch_json_once)
        api_class = _typed_api_class(resource)
        self._typed: Any = api_class(api) if api_class is not None else None
        self._custom = CustomObjectsApi(api) if api_class is None else None
        self._snake = _snake_case(resource.kind)

    # --- which client method does what

    def _method(self, verb: str, namespace: str | None, suffix: str = "") -> Call:
        """The client method and its arguments for `verb` (list, read, create, delete, patch)
        in `namespace` (None: all namespaces, or a cluster-scoped kind)."""
        r = self.resource
        if self._typed is not None:
            if not r.namespaced:
                return getattr(self._typed, f"{verb}_{self._snake}{suffix}"), {}
            if namespace is None and verb == "list":
                return getattr(self._typed, f"list_{self._snake}_for_all_namespaces"), {}
            return getattr(self._typed, f"{verb}_namespaced_{self._snake}{suffix}"), {"namespace": namespace}
        assert self._custom is not None
        custom_verb = "get" if verb == "read" else verb
        kwargs: dict[str, Any] = {"group": r.group, "version": r.version, "plural": r.plural}
        if r.namespaced and namespace is not None:
            kwargs["namespace"] = namespace
            return getattr(self._custom, f"{custom_verb}_namespaced_custom_object{suffix}"), kwargs
        return getattr(self._custom, f"{custom_verb}_cluster_custom_object{suffix}"), kwargs

    def list_function(self, namespace: str | None) -> Call:
        """The list method (and its arguments) that `watch_forever` lists and watches with."""
        return self._method("list", namespace)

    # --- reading and writing

    def list(self, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> list[dict[str, Any]]:
        """Objects in `namespace` (None: every namespace) matching `label_selector` and `field_selector`."""
        fn, kwargs = self._method("list", namespace)
        if label_selector is not None:
            kwargs["label_selector"] = label_selector
        if field_selector is not None:
            kwargs["field_selector"] = field_selector
        return list_items(self._fetch_json(fn, **kwargs))

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        fn, kwargs = self._method("read", namespace)
        return self._fetch_json(fn, name=name, **kwargs)

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create an object. AlreadyExists may also mean an earlier attempt whose answer was
        lost did create it."""
        fn, kwargs = self._method("create", namespace)
        return self._fetch_json(fn, body=body, **kwargs)

    def delete(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None,
        uid_precondition: str | None = None, propagation_policy: str | None = None,
    ) -> None:
        """Delete an object; one already gone is fine. With `uid_precondition`, only that exact
        object is deleted: a newer one that took the name is left alone (and that counts as
        gone)."""
        body: dict[str, Any] = {}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        if uid_precondition is not None:
            body["preconditions"] = {"uid": uid_precondition}
        if propagation_policy is not None:
            body["propagationPolicy"] = propagation_policy
        fn, kwargs = self._method("delete", namespace)
        try:
            self._fetch_json(fn, name=name, body=body or None, **kwargs)
        except NotFound:
            return  # already gone: what we wanted
        except Conflict:
            if uid_precondition is None:
                raise
            # The UID precondition failed: the object we meant is gone and a new one has its name.

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """Merge `patch` into the object (JSON merge patch: maps merge, lists are replaced)."""
        fn, kwargs = self._method("patch", namespace)
        return self._fetch_json(fn, name=name, body=patch, _content_type=MERGE_PATCH, **kwargs)

    def patch_json(self, namespace: str, name: str, operations: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Apply a JSON patch (RFC 6902): for what a merge patch cannot say, such as one field of
        one list item; its `test` operations make it conditional (the apiserver refuses the whole
        patch, as Invalid, when one fails)."""
        fn, kwargs = self._method("patch", namespace)
        return self._fetch_json(fn, name=name, body=list(operations), _content_type=JSON_PATCH, **kwargs)

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
        fn, kwargs = self._method("patch", namespace, "_status")
        return self._fetch_json(fn, name=name, body=body, _content_type=MERGE_PATCH, **kwargs)

    def watch(
        self, namespace: str | None, label_selector: str | None = None, *,
        stop: threading.Event, on_event: EventHandler, **options: Any,
    ) -> None:
        """`watch_forever` over the objects matching `label_selector` in `namespace` (None:
        all namespaces) until `stop` is set."""
        where = namespace or "all namespaces"
        selected = f" ({label_selector})" if label_selector else ""
        fn, kwargs = self._method("list", namespace)
        if label_selector is not None:
            kwargs["label_selector"] = label_selector
        options.setdefault("clock", self._clock)
        watch_forever(fn, stop=stop, on_event=on_event, name=f"{self.resource.plural}{selected} in {where}",
                      **kwargs, **options)
