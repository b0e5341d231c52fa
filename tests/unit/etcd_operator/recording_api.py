"""Stand-ins for the Pods/Services/PVCs facades the executor writes through: they record what is
created and deleted and answer as the API would."""
from __future__ import annotations

from typing import Any

from etcd_operator.acting import ActionExecutor
from operator_runtime.cached_client import CachedClient
from tests.unit.etcd_operator.recording_etcd import RecordingEtcd


class RecordingApi:
    """Stands in for the Pods/Services/PVCs facades: accepts a create and returns what the API would."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        stored = {**body, "metadata": {**body["metadata"], "namespace": namespace, "uid": f"uid-{len(self.created)}",
                                       "creationTimestamp": "2026-01-01T00:00:00Z"}}
        self.created.append(stored)
        return stored


class DeletingApi(RecordingApi):
    def __init__(self) -> None:
        super().__init__()
        self.deleted: list[str] = []

    def delete(self, namespace: str, name: str, **options: Any) -> None:
        self.deleted.append(name)


def recording_executor(api: DeletingApi, etcd: RecordingEtcd) -> ActionExecutor:
    return ActionExecutor(CachedClient(api), CachedClient(api), CachedClient(api), etcd)  # type: ignore[arg-type]
