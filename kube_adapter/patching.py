"""Status writes as merge patches that also remove what the new status no longer has."""
from __future__ import annotations

from typing import Any


def status_merge_patch(current: dict[str, Any], desired: dict[str, Any]) -> dict[str, Any]:
    """A merge patch turning status `current` into `desired`: top-level keys that `desired`
    lacks are removed (set to null), the rest replaced."""
    patch: dict[str, Any] = {key: None for key in current if key not in desired}
    patch.update(desired)
    return patch
