"""The watch cache orders what it is given by resourceVersion: a write the API answered stays
until something newer replaces or removes it, whichever thread delivers the older copy last."""
from __future__ import annotations

from typing import Any

from operator_runtime.cache import ObjectCache


def _obj(name: str, version: str | None, **fields: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "ns"}
    if version is not None:
        metadata["resourceVersion"] = version
    return {"metadata": metadata, **fields}


def _cache(*objects: dict[str, Any]) -> ObjectCache:
    cache = ObjectCache()
    for obj in objects:
        cache.upsert(obj)
    return cache


def test_an_older_copy_never_replaces_a_newer_one() -> None:
    cache = _cache(_obj("a", "12", spec={"written": True}))
    cache.upsert(_obj("a", "9", spec={"listed": True}))
    assert cache.get(("ns", "a")) == _obj("a", "12", spec={"written": True})
    cache.upsert(_obj("a", "12", spec={"watched": True}))
    cache.upsert(_obj("a", "13", spec={"watched": True}))
    assert cache.get(("ns", "a")) == _obj("a", "13", spec={"watched": True})


def test_a_delete_older_than_the_copy_kept_leaves_it() -> None:
    """The old incarnation's DELETED, after a create of the same name was written."""
    cache = _cache(_obj("a", "20"))
    assert not cache.remove(_obj("a", "18"))
    assert cache.get(("ns", "a")) is not None
    assert cache.remove(_obj("a", "21"))
    assert cache.get(("ns", "a")) is None
    assert not cache.remove(_obj("a", "22")), "nothing kept: nothing went"


def test_a_relist_keeps_only_what_it_listed_and_what_was_written_after_it() -> None:
    cache = _cache(_obj("listed", "5"), _obj("gone", "7"), _obj("written-after", "12"))
    gone = cache.remove_unlisted([("ns", "listed")], "10")
    assert gone == [("ns", "gone")]
    assert sorted(name for _, name in cache.keys()) == ["listed", "written-after"]


def test_versions_that_are_not_integers_are_not_compared() -> None:
    """The API calls them opaque: without two integers, the copy that arrives last wins."""
    cache = _cache(_obj("a", "12"))
    cache.upsert(_obj("a", None, spec={"last": True}))
    assert cache.get(("ns", "a")) == _obj("a", None, spec={"last": True})
    assert cache.remove(_obj("a", None))
    cache.upsert(_obj("b", "x1"))
    assert cache.remove_unlisted([], "") == [("ns", "b")]
