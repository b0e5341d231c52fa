"""Fakes at our adapter boundary for the restore operator's supervisor and observation tests: one
kind's objects held by name, with the calls made."""
from __future__ import annotations

from typing import Any

from kube_adapter.errors import AlreadyExists, NotFound


class FakeClient:
    """One kind's objects by (namespace, name), with the calls made."""

    def __init__(self, objects: dict[str, dict[str, Any]] | None = None) -> None:
        self.objects = dict(objects or {})
        self.calls: list[tuple[str, str]] = []

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        if name not in self.objects:
            raise NotFound(f"{name} not found")
        return self.objects[name]

    def list(self, namespace: str | None = None, label_selector: str | None = None) -> list[dict[str, Any]]:
        """The objects with every label `k=v` of the selector."""
        wanted = dict(term.split("=", 1) for term in (label_selector or "").split(",") if term)
        return [body for body in self.objects.values()
                if wanted.items() <= ((body.get("metadata") or {}).get("labels") or {}).items()]

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        self.calls.append(("create", name))
        if name in self.objects:
            raise AlreadyExists(name)
        self.objects[name] = {**body, "metadata": {**body["metadata"], "uid": f"uid-{name}"}}
        return self.objects[name]

    def delete(self, namespace: str, name: str, **_: Any) -> None:
        self.calls.append(("delete", name))
        self.objects.pop(name, None)

    def patch_status(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("the restores' API is RestoreApi")
