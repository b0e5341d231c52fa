"""The latest copy of each watched object, kept current by a watch and rebuilt by every relist.

Workers read the objects they manage from here instead of asking the API on every pass,
which keeps an idle operator's API load near zero. Nothing here is authoritative: a restart
rebuilds it from the API.

Writes (the API's answer to a create or patch) and the watch feed it from two threads, so what
arrives last is not always newest: a relist listed before a create would drop the created object,
an older listed or watched copy would replace a newer written one. Every change is therefore
ordered by resourceVersion, and a copy older than the one kept never replaces or removes it.
"""
from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
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
        """Keep `obj`, unless the copy kept is newer (a write the watch has not caught up with)."""
        key = object_key(obj)
        with self._lock:
            kept = self._objects.get(key)
            if kept is None or not _older(_version(obj), kept):
                self._objects[key] = obj
        return key

    def remove(self, obj: Mapping[str, Any]) -> bool:
        """Forget `obj`'s key, unless the copy kept is newer than `obj` (an object of that name
        created after this one was deleted). True if it went."""
        key = object_key(obj)
        with self._lock:
            kept = self._objects.get(key)
            if kept is None or _older(_version(obj), kept):
                return False
            del self._objects[key]
        return True

    def remove_unlisted(self, listed: Iterable[Key], resource_version: str) -> list[Key]:
        """After a list at `resource_version` that found `listed`: forget every other object,
        except one written after that list (it exists, and the watch from there reports it).
        Returns the keys forgotten."""
        listed_keys = set(listed)
        list_version = _parse_version(resource_version)
        with self._lock:
            gone = [key for key, kept in self._objects.items()
                    if key not in listed_keys and not _older(list_version, kept)]
            for key in gone:
                del self._objects[key]
        return gone

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


# resourceVersions are opaque by the API's contract; the kube-apiserver's are etcd revisions,
# integers that grow with every write, and those are what is compared. Any other (or none) is
# not compared: the copy that arrives last wins, as it would without ordering.

def _parse_version(resource_version: object) -> int | None:
    try:
        return int(str(resource_version))
    except ValueError:
        return None


def _version(obj: Mapping[str, Any]) -> int | None:
    return _parse_version((obj.get("metadata") or {}).get("resourceVersion"))


def _older(version: int | None, kept: Mapping[str, Any]) -> bool:
    """True when `version` is known to be older than the kept copy's."""
    kept_version = _version(kept)
    return version is not None and kept_version is not None and version < kept_version
