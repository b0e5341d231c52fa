"""Fakes at our adapter boundary for the backup operator's supervisor tests: the EtcdBackup API
applies status patches to the cache as the API server would, the event recorder records."""
from __future__ import annotations

from typing import Any

from operator_runtime.cache import ObjectCache


class FakeBackupApi:
    """Merge patches applied as the API server applies them (null removes a field)."""

    def __init__(self, cache: ObjectCache) -> None:
        self.cache = cache
        self.patches: list[dict[str, Any]] = []

    def patch_status(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patches.append(patch)
        current = self.cache.get((namespace, name)) or {}
        status = {k: v for k, v in {**(current.get("status") or {}), **patch}.items() if v is not None}
        return {**current, "status": status}


class FakeEvents:
    """Records (type, reason, message) of each event."""

    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []

    def record(self, involved: dict[str, Any], type: str, reason: str, message: str) -> None:
        self.recorded.append((type, reason, message))
