"""The etcdctl wrapper against real etcd 3.5.1 and 3.4.23 processes on loopback."""
from __future__ import annotations

import time

import pytest

from etcd_operator.etcdctl import (
    ClusterUnhealthy,
    Etcdctl,
    LearnerNotReady,
    Member,
    PeerURLExists,
    TooManyLearners,
    Unreachable,
)

from etcd_processes import EtcdCluster, wait_for

# Nothing listens here: an address of the same loopback block that no fixture hands out.
DEAD_ENDPOINT = "http://127.0.49.254:23790"


def test_fresh_cluster_lists_its_seed_and_stores_keys(etcd_cluster: EtcdCluster, etcd_version: str) -> None:
    seed = etcd_cluster.start_seed()
    etcdctl = etcd_cluster.etcdctl()

    [member] = etcdctl.member_list()
    assert member.name == "m1"
    assert member.peer_urls == (seed.peer_url,)
    assert member.client_urls == (seed.client_url,)
    assert member.started and not member.is_learner

    [status] = etcdctl.endpoint_status()
    assert status.reachable and status.is_leader and status.member_id == member.id
    assert status.version == etcd_version
    assert status.raft_term >= 1 and status.raft_index >= 1 and status.db_size > 0

    etcdctl.put("greeting", "--hello world--")
    assert etcdctl.get("greeting") == "--hello world--"
    assert etcdctl.get("absent") is None


def test_learner_is_added_rejected_twice_and_promoted_once_in_sync(etcd_cluster: EtcdCluster) -> None:
    etcd_cluster.start_seed()
    etcdctl = etcd_cluster.etcdctl()
    second = etcd_cluster.new_member("m2")

    added = etcdctl.member_add("m2", [second.peer_url], learner=True)
    assert added.id != 0 and added.is_learner
    assert added.peer_urls == (second.peer_url,)
    assert not added.started, "a member that never ran has no name and no client URLs"
    assert added in etcdctl.member_list()

    with pytest.raises(PeerURLExists):
        etcdctl.member_add("m2-again", [second.peer_url], learner=True)
    with pytest.raises(TooManyLearners):
        etcdctl.member_add("m3", ["http://127.0.49.253:23800"], learner=True)
    with pytest.raises(LearnerNotReady):
        etcdctl.member_promote(added.id)

    etcd_cluster.start_added_member(second, etcdctl.member_list())
    started = time.monotonic()
    wait_for(
        lambda: _promoted(etcdctl, added.id), timeout=20, what="learner promoted", interval=0.1,
        describe=etcd_cluster.describe,
    )
    print(f"learner promotable {time.monotonic() - started:.2f}s after its start")
    etcdctl.member_promote(added.id)  # already voting: quietly done

    etcd_cluster.wait_healthy(second)
    members = wait_for(
        lambda: _all_started(etcdctl), timeout=10, what="both members started", describe=etcd_cluster.describe
    )
    assert sorted(m.name for m in members) == ["m1", "m2"]
    assert not any(m.is_learner for m in members)


def _all_started(etcdctl: Etcdctl) -> list[Member] | None:
    members = etcdctl.member_list()
    return members if all(m.started for m in members) else None


def _promoted(etcdctl: Etcdctl, member_id: int) -> bool:
    try:
        etcdctl.member_promote(member_id)
    except LearnerNotReady:
        return False
    return True


def test_removing_a_member_twice_is_quiet(etcd_cluster: EtcdCluster) -> None:
    etcd_cluster.start_seed()
    etcdctl = etcd_cluster.etcdctl()
    ghost = etcdctl.member_add("m2", ["http://127.0.49.252:23800"], learner=True)

    etcdctl.member_remove(ghost.id)
    etcdctl.member_remove(ghost.id)

    assert [m.name for m in etcdctl.member_list()] == ["m1"]


def test_dead_endpoints_are_reported_beside_live_ones(etcd_cluster: EtcdCluster) -> None:
    seed = etcd_cluster.start_seed()
    etcdctl = Etcdctl([DEAD_ENDPOINT, seed.client_url], dial_timeout_seconds=0.5, command_timeout_seconds=1.0)

    dead, live = etcdctl.endpoint_status()
    assert (dead.endpoint, dead.reachable) == (DEAD_ENDPOINT, False)
    assert dead.errors and "deadline" in dead.errors[0]
    assert (live.endpoint, live.reachable, live.is_leader) == (seed.client_url, True, True)

    dead_health, live_health = etcdctl.endpoint_health()
    assert (dead_health.endpoint, dead_health.healthy) == (DEAD_ENDPOINT, False) and dead_health.error
    assert (live_health.endpoint, live_health.healthy, live_health.error) == (seed.client_url, True, "")

    assert [m.name for m in etcdctl.member_list()] == ["m1"], "a dead first endpoint is skipped"


def test_only_dead_endpoints_raise_unreachable_within_the_timeouts() -> None:
    etcdctl = Etcdctl([DEAD_ENDPOINT], dial_timeout_seconds=0.5, command_timeout_seconds=1.0)
    started = time.monotonic()
    with pytest.raises(Unreachable):
        etcdctl.endpoint_status()
    with pytest.raises(Unreachable):
        etcdctl.member_list()
    assert time.monotonic() - started < 2 * (0.5 + 1.0 + 1.0)


def test_leadership_moves_to_the_member_asked_for(etcd_cluster: EtcdCluster) -> None:
    members, _ = etcd_cluster.grow(2)
    live_only = etcd_cluster.etcdctl()
    leader = next(s for s in live_only.endpoint_status() if s.is_leader)
    follower = next(s for s in live_only.endpoint_status() if not s.is_leader)
    with_a_dead_endpoint = Etcdctl([DEAD_ENDPOINT] + [m.client_url for m in members], command_timeout_seconds=1.0)

    with_a_dead_endpoint.move_leader(follower.member_id)

    new_leader = wait_for(
        lambda: next((s for s in live_only.endpoint_status() if s.is_leader), None),
        timeout=10, what="a leader after the move", describe=etcd_cluster.describe,
    )
    assert new_leader.member_id == follower.member_id != leader.member_id
    live_only.move_leader(follower.member_id)  # already the leader: nothing to do


def test_member_add_right_after_a_promotion_is_refused_as_unhealthy(etcd_cluster: EtcdCluster) -> None:
    """etcd (3.4 and 3.5) refuses membership changes until every voting member has been
    connected for 5 s (strict reconfig check); the operator must treat that as "retry later"."""
    members, timings = etcd_cluster.grow(2)
    etcdctl = etcd_cluster.etcdctl()
    third = etcd_cluster.new_member("m3")

    started = time.monotonic()
    with pytest.raises(ClusterUnhealthy):
        etcdctl.member_add("m3", [third.peer_url], learner=True)
    wait_for(
        lambda: _added(etcdctl, "m3", third.peer_url), timeout=15, what="member add accepted", interval=0.2,
        describe=etcd_cluster.describe,
    )
    print(f"grow(2) timings {timings}; add refused for {time.monotonic() - started:.2f}s after promotion")


def _added(etcdctl: Etcdctl, name: str, peer_url: str) -> bool:
    try:
        etcdctl.member_add(name, [peer_url], learner=True)
    except ClusterUnhealthy:
        return False
    return True


def test_etcdctl_3_4_output_parses_the_same(etcd_3_5_cluster: EtcdCluster, etcdctl_3_4_binary: str) -> None:
    seed = etcd_3_5_cluster.start_seed()
    etcdctl = Etcdctl([seed.client_url, DEAD_ENDPOINT], binary=etcdctl_3_4_binary, command_timeout_seconds=1.0)

    assert [m.name for m in etcdctl.member_list()] == ["m1"]
    live, dead = etcdctl.endpoint_status()
    assert live.is_leader and not dead.reachable
    assert [h.healthy for h in etcdctl.endpoint_health()] == [True, False]
    learner = Etcdctl([seed.client_url], binary=etcdctl_3_4_binary).member_add(
        "m2", ["http://127.0.49.251:23800"], learner=True
    )
    assert learner.is_learner and not learner.started
