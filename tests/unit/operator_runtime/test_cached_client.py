"""The write-through client: what the API accepted is in the cache at once; a create refused as
existing reads the existing object in; what else it refused, or a delete, leaves the cache as the
watch left it; reads by name fall back to the API without caching."""
from __future__ import annotations

from typing import Any

import pytest

from kube_adapter.errors import AlreadyExists, Conflict, NotFound
from operator_runtime.cache import ObjectCache
from operator_runtime.cached_client import CachedClient


def _obj(name: str, version: str = "1", **fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version}, **fields}


class FakeApi:
    """The API side of one kind: objects by name; writes recorded."""

    def __init__(self, *existing: dict[str, Any]) -> None:
        self.objects = {o["metadata"]["name"]: o for o in existing}
        self.calls: list[tuple[str, str]] = []

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        self.calls.append(("get", name))
        if name not in self.objects:
            raise NotFound(f"{name!r} not found")
        return self.objects[name]

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        self.calls.append(("create", name))
        if name in self.objects:
            raise AlreadyExists(f"{name!r} already exists")
        self.objects[name] = {**body, "metadata": {**body["metadata"], "namespace": namespace, "resourceVersion": "1"}}
        return self.objects[name]

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("patch", name))
        self.objects[name] = {**self.objects[name], **patch, "metadata": {**self.objects[name]["metadata"],
                                                                           "resourceVersion": "2"}}
        return self.objects[name]

    def patch_status(self, namespace: str, name: str, status: dict[str, Any], *,
                     resource_version: str | None = None) -> dict[str, Any]:
        self.calls.append(("patch_status", name))
        current = self.objects[name]
        if resource_version is not None and resource_version != current["metadata"]["resourceVersion"]:
            raise Conflict("the object has been modified")
        self.objects[name] = {**current, "status": status}
        return self.objects[name]

    def delete(self, namespace: str, name: str, *, uid_precondition: str | None = None) -> None:
        self.calls.append(("delete", name))
        self.objects.pop(name, None)


def _client(api: FakeApi, *cached: dict[str, Any]) -> CachedClient:
    cache = ObjectCache()
    for obj in cached:
        cache.upsert(obj)
    return CachedClient(api, cache)  # type: ignore[arg-type]


def test_a_created_object_is_cached_before_any_watch_event() -> None:
    client = _client(FakeApi())
    created = client.create("ns", _obj("a"))
    assert client.cached("ns", "a") == created
    assert client.select("ns", {}) == [created]


def test_a_create_the_api_refuses_as_existing_reads_the_object_into_the_cache() -> None:
    """An object an earlier pass created, which the watch cache lost (or whose create answer was
    lost): the refused create reads it into the cache, so the next pass sees it (a learner's pod
    otherwise stays unseen, as it changes no more once Running, and the learner is never promoted)."""
    api = FakeApi(_obj("learner-pod", "7", spec={"x": 1}))
    client = _client(api)
    assert client.cached("ns", "learner-pod") is None
    with pytest.raises(AlreadyExists):
        client.create("ns", _obj("learner-pod"))
    assert client.cached("ns", "learner-pod") == api.objects["learner-pod"]
    assert api.calls == [("create", "learner-pod"), ("get", "learner-pod")]


def test_a_create_refused_as_existing_of_an_object_deleted_meanwhile_caches_nothing() -> None:
    class GoneMeanwhile(FakeApi):
        def get(self, namespace: str, name: str) -> dict[str, Any]:
            self.objects.pop(name, None)
            return super().get(namespace, name)

    client = _client(GoneMeanwhile(_obj("a", "7")))
    with pytest.raises(AlreadyExists):
        client.create("ns", _obj("a"))
    assert client.cached("ns", "a") is None


def test_patches_and_status_writes_replace_the_cached_copy() -> None:
    api = FakeApi(_obj("a"))
    client = _client(api, _obj("a"))
    client.patch("ns", "a", {"spec": {"x": 1}})
    assert client.cached("ns", "a")["spec"] == {"x": 1}  # type: ignore[index]
    client.patch_status("ns", "a", {"phase": "Running"}, resource_version="2")
    assert client.cached("ns", "a")["status"] == {"phase": "Running"}  # type: ignore[index]


def test_a_refused_status_write_keeps_the_cached_copy() -> None:
    client = _client(FakeApi(_obj("a", "5")), _obj("a", "4"))
    with pytest.raises(Conflict):
        client.patch_status("ns", "a", {"phase": "Running"}, resource_version="4")
    assert "status" not in client.cached("ns", "a")  # type: ignore[operator]


def test_a_delete_leaves_the_object_to_the_watch() -> None:
    """A deleted pod terminates for a while: the watch, not the delete, says when it is gone."""
    api = FakeApi(_obj("a"))
    client = _client(api, _obj("a"))
    client.delete("ns", "a", uid_precondition="uid-a")
    assert ("delete", "a") in api.calls and client.cached("ns", "a") is not None


def test_find_asks_the_api_only_for_what_the_cache_lacks_and_caches_nothing() -> None:
    api = FakeApi(_obj("cached", "1"), _obj("unlabelled", "1"))
    client = _client(api, _obj("cached", "1"))
    assert client.find("ns", "cached") is not None and api.calls == []
    assert client.find("ns", "unlabelled") == _obj("unlabelled", "1")
    assert client.find("ns", "missing") is None
    assert api.calls == [("get", "unlabelled"), ("get", "missing")]
    assert client.cached("ns", "unlabelled") is None, "the watch may not select it: not cached"


def test_fetch_reads_the_api_and_refreshes_the_cache() -> None:
    client = _client(FakeApi(_obj("a", "9")), _obj("a", "3"))
    assert client.fetch("ns", "a")["metadata"]["resourceVersion"] == "9"
    assert client.cached("ns", "a")["metadata"]["resourceVersion"] == "9"  # type: ignore[index]
    with pytest.raises(NotFound):
        client.fetch("ns", "missing")


def test_synced_is_the_caches() -> None:
    client = _client(FakeApi())
    assert not client.is_synced()
    client.cache.mark_synced()
    assert client.is_synced()
