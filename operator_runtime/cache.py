"""The latest copy of each watched object, kept current by a watch and rebuilt by every relist.

Workers read the objects they manage from here instead of asking the API on every pass,
which keeps an idle operator's API load near zero. Nothing here is authoritative: a restart
rebuilds it from the API.
"""
from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from kube_adapter.watching import object_key

Key = tuple[str, str]  # (namespace, name): `kube_adapter.watching.ObjectKey` is one
Object = dict[str, Any]


class ObjectCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[Key, Object] = {}
        self._synced = threading.Event()

    def upsert(self, obj: Object) -> Key:
        key = object_key(obj)
        with self._lock:
            self._objects[key] = obj
        return key

    def remove(self, obj: Mapping[str, Any]) -> Key:
        key = object_key(obj)
        with self._lock:
            self._objects.pop(key, None)
        return key

    def mark_synced(self) -> None:
        self._synced.set()

    def is_synced(self) -> bool:
        """True once the first full list arrived: before that, absence means nothing."""
        return self._synced.is_set()

    def get(self, key: Key) -> Object | None:
        with self._lock:
            return self._objects.get(key)

    def select(self, namespace: str, labels: Mapping[str, str]) -> list[Object]:
        """Objects in `namespace` whose labels include every pair in `labels`."""
        with self._lock:
            candidates = [o for (ns, _), o in self._objects.items() if ns == namespace]
        return [
            o for o in candidates
            if all(((o.get("metadata") or {}).get("labels") or {}).get(k) == v for k, v in labels.items())
        ]

    def keys(self) -> list[Key]:
        with self._lock:
            return list(self._objects)
