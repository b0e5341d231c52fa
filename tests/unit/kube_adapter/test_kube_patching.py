"""Status merge patches: keys the new status lacks are removed, the rest replaced."""
from __future__ import annotations

from kube_adapter.patching import status_merge_patch


def test_merge_patch_removes_keys_the_new_status_lacks() -> None:
    current = {"phase": "Failed", "reason": "quorum lost", "size": 3}
    desired = {"phase": "Running", "size": 3}
    assert status_merge_patch(current, desired) == {"reason": None, "phase": "Running", "size": 3}
