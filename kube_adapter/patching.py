"""Status writes that never rest on a stale read.

A plain merge patch of status cannot conflict, but it can write a status computed from an old
spec (say, observedGeneration from before the user's last edit). `patch_status_with_retry`
reads the object, computes the status from what it read, and submits it with that read's
resourceVersion: if the object changed meanwhile the apiserver answers Conflict and we go
round again (re-read, re-compute, re-submit), a bounded number of times.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kube_adapter.errors import Conflict
from kube_adapter.resources import ResourceClient

logger = logging.getLogger(__name__)

STATUS_PATCH_ATTEMPTS = 5


def status_merge_patch(current: dict[str, Any], desired: dict[str, Any]) -> dict[str, Any]:
    """A merge patch turning status `current` into `desired`: top-level keys that `desired`
    lacks are removed (set to null), the rest replaced."""
    patch: dict[str, Any] = {key: None for key in current if key not in desired}
    patch.update(desired)
    return patch


def patch_status_with_retry(
    objects: ResourceClient,
    namespace: str,
    name: str,
    compute_status: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    attempts: int = STATUS_PATCH_ATTEMPTS,
) -> dict[str, Any]:
    """Set the object's status to `compute_status(fresh_object)`; returns the object as
    written (or as read, when the status was already that). Raises NotFound if the object is
    gone, Conflict if it kept changing for `attempts` rounds."""
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    for attempt in range(1, attempts + 1):
        current = objects.get(namespace, name)
        desired = compute_status(current)
        current_status = current.get("status") or {}
        if desired == current_status:
            return current
        resource_version = (current.get("metadata") or {}).get("resourceVersion")
        try:
            return objects.patch_status(
                namespace, name, status_merge_patch(current_status, desired), resource_version=resource_version
            )
        except Conflict:
            if attempt == attempts:
                raise
            logger.info(
                "%s/%s changed while its status was being written (attempt %d of %d); re-reading",
                namespace, name, attempt, attempts,
            )
    raise AssertionError("unreachable")
