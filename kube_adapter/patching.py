"""Status writes as merge patches that also remove what the new status no longer has."""
from __future__ import annotations

from typing import Any


def status_merge_patch(current: dict[str, Any], desired: dict[str, Any]) -> dict[str, Any]:
    """A merge patch (RFC 7386) turning status `current` into `desired`: keys `desired` lacks are
    removed (set to null), at every level of nested maps (a merge patch merges maps, so a key left
    out of a nested map would stay); lists and other values are replaced."""
    patch: dict[str, Any] = {key: None for key in current if key not in desired}
    for key, value in desired.items():
        before = current.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            patch[key] = status_merge_patch(before, value)
        else:
            patch[key] = value
    return patch
