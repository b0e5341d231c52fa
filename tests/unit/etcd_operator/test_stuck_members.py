"""Progress never blocks forever: a voting member unhealthy past the bound, or a learner that
never answered within it (say, started with a stale --initial-cluster), is replaced while quorum
allows, leadership moved off it first."""
from __future__ import annotations

import dataclasses

import pytest
from datetime import timedelta

from tests.unit.etcd_operator.etcd_cluster_builders import (
    NEW_MEMBER,
    T0,
    add_member,
    add_pod,
    healthy_cluster,
    make_member,
    make_pod,
    name,
    replace_pod,
    unhealthy,
)

from etcd_operator import actions
from etcd_operator.observed import ObservedCluster, parse_pod
from etcd_operator.planning import plan_next_action
from etcd_operator.settings import parse_settings

TIMEOUT = 300.0  # observed_at is T0 + 1h; pods are created at T0 + index minutes


def _stuck_voter(member: int = 2, *, since: timedelta = timedelta(minutes=10), count: int = 5,
                 timeout: float | None = TIMEOUT, leader: int = 1) -> ObservedCluster:
    observed = unhealthy(healthy_cluster(count, size=count, leader=leader), name(member))
    observed = replace_pod(observed, name(member), ready=False, unready_since=T0 + since)
    return dataclasses.replace(observed, unhealthy_member_timeout_seconds=timeout)


def test_a_voter_unhealthy_past_the_bound_is_replaced() -> None:
    action = plan_next_action(_stuck_voter())
    assert isinstance(action, actions.RemoveMember) and action.member_name == name(2), action
    assert action.purpose == "replace" and "unhealthy for" in action.reason, action


def test_a_voter_unhealthy_for_less_than_the_bound_is_waited_for() -> None:
    observed = _stuck_voter(since=timedelta(minutes=59))  # 60 s before observed_at
    assert isinstance(plan_next_action(observed), actions.Wait)


def test_without_a_bound_unhealthy_voters_are_waited_for() -> None:
    assert isinstance(plan_next_action(_stuck_voter(timeout=None)), actions.Wait)


def test_a_stuck_leader_hands_leadership_over_first() -> None:
    action = plan_next_action(_stuck_voter(member=1, leader=1))
    assert isinstance(action, actions.MoveLeader) and action.from_member_name == name(1), action


def test_a_learner_that_never_answered_within_the_bound_is_replaced() -> None:
    observed = healthy_cluster(3, size=4)
    learner = make_member(observed.cluster, NEW_MEMBER, 0x9999, learner=True)
    observed = add_member(observed, learner, healthy=False, raft_index=None)
    observed = add_pod(observed, make_pod(observed.cluster, NEW_MEMBER, index=9, ready=False, restart_count=7))
    observed = dataclasses.replace(observed, unhealthy_member_timeout_seconds=TIMEOUT)
    action = plan_next_action(observed)
    assert isinstance(action, actions.RemoveMember) and action.member_name == NEW_MEMBER, action
    assert action.member_id == 0x9999 and action.purpose == "replace"
    young = dataclasses.replace(observed, observed_at=T0 + timedelta(minutes=9, seconds=30))
    assert isinstance(plan_next_action(young), actions.Wait)


def test_unready_since_is_the_ready_conditions_transition() -> None:
    pod = parse_pod({"metadata": {"name": "p"}, "status": {"conditions": [
        {"type": "Ready", "status": "False", "lastTransitionTime": "2024-05-01T12:00:00Z"}]}})
    assert pod.unready_since == T0
    ready = parse_pod({"metadata": {"name": "p"}, "status": {"conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2024-05-01T12:00:00Z"}]}})
    assert ready.unready_since is None


def test_the_bound_is_a_flag_with_an_env_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_settings([]).unhealthy_member_timeout_seconds == 300.0
    monkeypatch.setenv("UNHEALTHY_MEMBER_TIMEOUT_SECONDS", "60")
    assert parse_settings([]).unhealthy_member_timeout_seconds == 60.0
    assert parse_settings(["--unhealthy-member-timeout-seconds=0"]).unhealthy_member_timeout_seconds is None
