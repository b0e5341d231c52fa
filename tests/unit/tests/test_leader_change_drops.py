"""The client contract the write-under-change tests hold the operator to (docs/clients.md): only
etcd's own drops at a leader change, at most two per change."""
from __future__ import annotations

import pytest

from tests.integration.etcd_operator.client_writes import assert_only_leader_change_drops

DROPPED = "Error: etcdserver: request timed out"
DEADLINE = 'rpc error: code = DeadlineExceeded desc = context deadline exceeded"}\nError: context deadline exceeded'


def test_drops_at_leader_changes_are_allowed_up_to_two_each() -> None:
    assert_only_leader_change_drops([DROPPED, DEADLINE], 1, "a change")
    assert_only_leader_change_drops([], 0, "a change")


@pytest.mark.parametrize("failures, leader_changes", [
    ([DEADLINE], 0),  # no leader change explains it
    ([DROPPED, DROPPED, DEADLINE], 1),  # more than a leader change explains
    (["Error: rpc error: code = Unavailable desc = error reading from server: EOF"], 1),  # a cut connection
    (["Error: etcdserver: server stopped"], 1),
])
def test_anything_else_fails(failures: list[str], leader_changes: int) -> None:
    with pytest.raises(AssertionError):
        assert_only_leader_change_drops(failures, leader_changes, "a change")
