"""Fakes at our adapter boundary for supervisor tests: the caches (and the write-through clients
around them) are real, the API clients, executor and event recorder record what they are asked."""
from __future__ import annotations

import threading
from typing import Any

from prometheus_client import CollectorRegistry

from etcd_common.etcd.access import EtcdAccess
from etcd_operator import actions as a
from etcd_operator.metrics import OperatorMetrics
from etcd_operator.observed import ObservedCluster
from etcd_operator.observing import KubeSources
from etcd_operator.supervisor import ClusterSupervisor, SupervisorContext
from kube_adapter.errors import Conflict, NotFound
from operator_runtime.cache import ObjectCache
from operator_runtime.cached_client import CachedClient


class FakeServices:
    def __init__(self, existing: dict[str, dict[str, Any]] | None = None) -> None:
        self.existing = existing or {}

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        if name not in self.existing:
            raise NotFound(f"services {name!r} not found")
        return self.existing[name]


class FakeListing:
    """Events and EndpointSlices: there are none."""

    def list(self, namespace: str, label_selector: str | None = None,
             field_selector: str | None = None) -> list[dict[str, Any]]:
        return []


class FakeExecutor:
    def __init__(self) -> None:
        self.executed: list[a.Action] = []
        self.failures: dict[type[a.Action], Exception] = {}  # raised for actions of that kind

    def execute(self, action: a.Action, observed: ObservedCluster) -> None:
        self.executed.append(action)
        failure = self.failures.get(type(action))
        if failure is not None:
            raise failure


class FakeClusterApi:
    """The status subresource: merge patches, a resourceVersion that moves, Conflict on a stale one."""

    def __init__(self, cache: ObjectCache) -> None:
        self.cache = cache
        self.patches: list[tuple[dict[str, Any], str | None]] = []
        self.server_version: str | None = None  # set by a test: the object changed elsewhere
        self.server_metadata: dict[str, Any] = {}  # set by a test: what the API has beyond the cache
        self.gets = 0

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        self.gets += 1
        current = self.cache.get((namespace, name))
        if current is None:
            raise NotFound(f"etcdclusters {name!r} not found")
        return {**current, "metadata": {**current.get("metadata", {}), **self.server_metadata}}

    def patch_status(self, namespace: str, name: str, status: dict[str, Any], *,
                     resource_version: str | None = None) -> dict[str, Any]:
        self.patches.append((status, resource_version))
        current = self.cache.get((namespace, name)) or {}
        metadata = current.get("metadata") or {}
        if self.server_version is not None and resource_version is not None and resource_version != self.server_version:
            raise Conflict("the object has been modified; please apply your changes to the latest version")
        merged_status = {k: v for k, v in {**(current.get("status") or {}), **status}.items() if v is not None}
        version = str(int(metadata.get("resourceVersion") or "100") + 1)
        return {**current, "metadata": {**metadata, "resourceVersion": version}, "status": merged_status}


class FakeEvents:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str]] = []

    def record(self, involved: dict[str, Any], type: str, reason: str, message: str) -> None:
        self.recorded.append((type, reason))


def supervisor_with_fakes(raw: dict[str, Any], *, services: dict[str, dict[str, Any]] | None = None,
                          objects: list[dict[str, Any]] | None = None, may_act: Any = None,
                          ) -> tuple[ClusterSupervisor, FakeExecutor, FakeEvents]:
    clusters, pods, service_cache, pvcs, pdbs = ObjectCache(), ObjectCache(), ObjectCache(), ObjectCache(), ObjectCache()
    for cache in (clusters, pods, service_cache, pvcs, pdbs):
        cache.mark_synced()
    clusters.upsert(raw)
    for obj in objects or ():
        service_cache.upsert(obj)
    executor = FakeExecutor()
    events = FakeEvents()
    cluster_client = CachedClient(FakeClusterApi(clusters), clusters)  # type: ignore[arg-type]
    kube = KubeSources(
        cluster_client,
        *(CachedClient(api, cache) for api, cache in  # type: ignore[arg-type]
          ((FakeServices(), pods), (FakeServices(services), service_cache), (FakeServices(), pvcs),
           (FakeServices(), pdbs))),
        events=FakeListing(),  # type: ignore[arg-type]
        slices=FakeListing(),  # type: ignore[arg-type]
    )
    context = SupervisorContext(
        clusters=cluster_client,
        kube=kube,
        executor=executor,  # type: ignore[arg-type]
        etcd=EtcdAccess(lambda ns, name: {}),
        events=events,  # type: ignore[arg-type]
        metrics=OperatorMetrics(CollectorRegistry()),
        resync_seconds=10.0,
        stop=threading.Event(),
        **({"may_act": may_act} if may_act is not None else {}),
    )
    return ClusterSupervisor(("default", raw["metadata"]["name"]), context), executor, events
