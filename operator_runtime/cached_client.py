"""One kind's API client and its watch cache as one object, writing through: an object the API
accepted goes into the cache at once, so the next pass sees what this one wrote even before the
watch event arrives (or it would act on the old picture: say, create a second seed pod)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kube_adapter.errors import AlreadyExists, NotFound
from kube_adapter.resources import ResourceClient
from operator_runtime.cache import Object, ObjectCache


@dataclass(frozen=True)
class CachedClient:
    """Reads come from `cache` (what the watch delivered), or from the API when asked by name
    (`find`, `fetch`); writes go to the API, and what it answers goes into `cache`. A delete
    leaves the cache alone: the object lingers (say, a terminating pod) until the watch says it
    is gone."""

    client: ResourceClient
    cache: ObjectCache = field(default_factory=ObjectCache)

    # --- reading the cache

    def cached(self, namespace: str, name: str) -> Object | None:
        return self.cache.get((namespace, name))

    def select(self, namespace: str, labels: Mapping[str, str]) -> list[Object]:
        """Cached objects in `namespace` whose labels include every pair in `labels`."""
        return self.cache.select(namespace, labels)

    def is_synced(self) -> bool:
        """True once the watch listed every object once: before that, absence means nothing."""
        return self.cache.is_synced()

    # --- reading the API

    def find(self, namespace: str, name: str) -> Object | None:
        """The cached copy, else the API's (None: there is no such object). The API's answer is
        not cached: the watch may not select that object (say, one without our labels)."""
        cached = self.cached(namespace, name)
        if cached is not None:
            return cached
        try:
            return self.client.get(namespace, name)
        except NotFound:
            return None

    def fetch(self, namespace: str, name: str) -> Object:
        """The API's copy now (NotFound if there is none), kept in the cache."""
        return self._keep(self.client.get(namespace, name))

    # --- writing

    def create(self, namespace: str, body: dict[str, Any]) -> Object:
        """AlreadyExists is raised as the client raises it (an earlier attempt may have created it),
        once the existing object is read into the cache: a caller that did not see it (the cache
        lost it, or the answer to the earlier create was lost) sees it on its next pass, instead of
        acting on the same stale picture again (a learner's pod, which changes no more once
        Running, would never be seen and the learner never promoted)."""
        try:
            return self._keep(self.client.create(namespace, body))
        except AlreadyExists:
            name = str((body.get("metadata") or {}).get("name") or "")
            try:
                self.fetch(namespace, name)
            except NotFound:
                pass  # deleted meanwhile: the next pass sees it gone
            raise

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> Object:
        return self._keep(self.client.patch(namespace, name, patch))

    def patch_json(self, namespace: str, name: str, operations: list[dict[str, Any]]) -> Object:
        return self._keep(self.client.patch_json(namespace, name, operations))

    def patch_status(self, namespace: str, name: str, status: dict[str, Any], *,
                     resource_version: str | None = None) -> Object:
        return self._keep(self.client.patch_status(namespace, name, status, resource_version=resource_version))

    def delete(self, namespace: str, name: str, *, uid_precondition: str | None = None) -> None:
        self.client.delete(namespace, name, uid_precondition=uid_precondition)

    def _keep(self, obj: Object) -> Object:
        if obj:
            self.cache.upsert(obj)
        return obj
