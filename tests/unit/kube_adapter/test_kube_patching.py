"""Status merge patches: keys the new status lacks are removed, the rest replaced."""
from __future__ import annotations

from kube_adapter.patching import status_merge_patch


def test_merge_patch_removes_keys_the_new_status_lacks() -> None:
    current = {"phase": "Failed", "reason": "quorum lost", "size": 3}
    desired = {"phase": "Running", "size": 3}
    assert status_merge_patch(current, desired) == {"reason": None, "phase": "Running", "size": 3}


def test_keys_gone_from_a_nested_map_are_removed_too() -> None:
    """A merge patch merges maps: `tls.peer.problem`, once fixed, must be set to null, or it stays."""
    current = {"tls": {"peer": {"secret": "s", "problem": "missing"}, "ca": {"secret": "c"}}, "phase": "Running"}
    desired = {"tls": {"peer": {"secret": "s", "notAfter": "2027-01-01T00:00:00Z"}}, "phase": "Running"}
    assert status_merge_patch(current, desired) == {
        "tls": {"peer": {"secret": "s", "problem": None, "notAfter": "2027-01-01T00:00:00Z"}, "ca": None},
        "phase": "Running",
    }
