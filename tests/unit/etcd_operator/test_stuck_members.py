"""Progress never blocks forever: a voting member unhealthy past the bound, or a learner that
never answered within it (say, started with a stale --initial-cluster), is replaced while quorum
allows, leadership moved off it first."""
from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from etcd_operator import actions
from etcd_operator.observed import ObservedCluster, parse_pod
from etcd_operator.planning import PlanningPolicy, plan_next_action
from etcd_operator.planning.findings import CONDITION_MEMBER_POD_MISSING
from etcd_operator.settings import parse_settings
from etcd_operator.status import compute_status, format_time
from tests.unit.etcd_operator.etcd_cluster_builders import (
    NEW_MEMBER,
    T0,
    add_member,
    add_pod,
    healthy_cluster,
    make_cluster,
    make_member,
    make_pod,
    member_id,
    name,
    replace_pod,
    unhealthy,
    with_cluster,
    without_pods,
)

TIMEOUT = 300.0  # observed_at is T0 + 1h; pods are created at T0 + index minutes
POLICY = PlanningPolicy(unhealthy_member_timeout_seconds=TIMEOUT)


def _stuck_voter(member: int = 2, *, since: timedelta = timedelta(minutes=10), count: int = 5,
                 leader: int = 1) -> ObservedCluster:
    observed = unhealthy(healthy_cluster(count, size=count, leader=leader), name(member))
    return replace_pod(observed, name(member), ready=False, unready_since=T0 + since)


def test_a_voter_unhealthy_past_the_bound_is_replaced() -> None:
    action = plan_next_action(_stuck_voter(), POLICY)
    assert isinstance(action, actions.RemoveMember) and action.member_name == name(2), action
    assert action.purpose == "replace" and "unhealthy for" in action.reason, action


def test_a_voter_unhealthy_for_less_than_the_bound_is_waited_for() -> None:
    observed = _stuck_voter(since=timedelta(minutes=59))  # 60 s before observed_at
    assert isinstance(plan_next_action(observed, POLICY), actions.Wait)


def test_without_a_bound_unhealthy_voters_are_waited_for() -> None:
    assert isinstance(plan_next_action(_stuck_voter(), PlanningPolicy(unhealthy_member_timeout_seconds=None)),
                      actions.Wait)


# Unhealthy for 400 s: past the bound, not yet twice it.
PAST_THE_BOUND = timedelta(hours=1) - timedelta(seconds=400)


def test_a_stuck_leader_hands_leadership_over_first() -> None:
    action = plan_next_action(_stuck_voter(member=1, leader=1, since=PAST_THE_BOUND), POLICY)
    assert isinstance(action, actions.MoveLeader) and action.from_member_name == name(1), action


def test_a_stuck_leader_hands_over_to_the_oldest_healthy_voter_and_is_then_replaced() -> None:
    observed = _stuck_voter(member=1, leader=1, since=PAST_THE_BOUND)
    action = plan_next_action(observed, POLICY)
    assert isinstance(action, actions.MoveLeader), action
    assert (action.from_member_id, action.to_member_name) == (member_id(1), name(2)), action
    # Once another member leads, the stuck one (no longer leader) is the one removed.
    after = dataclasses.replace(observed, endpoint_status={
        n: dataclasses.replace(s, leader_id=member_id(2)) for n, s in observed.endpoint_status.items()})
    removal = plan_next_action(after, POLICY)
    assert isinstance(removal, actions.RemoveMember) and removal.member_name == name(1), removal
    assert removal.purpose == "replace"


def test_a_stuck_leader_that_answers_nothing_is_removed_as_leader() -> None:
    """A leader that answers no client (not even `endpoint status`) cannot serve move-leader,
    which etcd serves on the leader only; waiting for a handover would block forever, so it is
    removed as leader (etcd elects another) while the rest keeps quorum."""
    observed = _stuck_voter(member=1, leader=1, since=PAST_THE_BOUND)
    silent = dataclasses.replace(observed, endpoint_status={
        n: s for n, s in observed.endpoint_status.items() if n != name(1)})
    assert silent.leader_id == member_id(1), "the others still name it leader"
    action = plan_next_action(silent, POLICY)
    assert isinstance(action, actions.RemoveMember) and action.member_id == member_id(1), action
    assert "cannot hand leadership over" in action.reason, action.reason
    young = dataclasses.replace(silent, observed_at=T0 + timedelta(minutes=10, seconds=60))
    assert isinstance(plan_next_action(young, POLICY), actions.Wait), "not before the bound"


def test_a_stuck_leader_is_not_removed_when_that_would_lose_quorum() -> None:
    observed = unhealthy(_stuck_voter(member=1, leader=1, count=3), name(2))
    assert isinstance(plan_next_action(observed, POLICY), actions.ReportQuorumLoss)


# Its pod's grace period ended long ago (its node is gone, say): the member is dead.
PAST_GRACE = T0


def test_a_dead_member_that_still_leads_and_answers_hands_leadership_over_first() -> None:
    """Its emptyDir pod is terminating (its data goes with it) and it fails the health check, but
    its etcd still leads and answers `endpoint status`: MoveLeader first, so clients see no
    election, then it is removed. (One that still passes the health check, or that a healthy peer
    has an active stream to, serves: it is waited for, test_cluster_planning's
    member-pod-terminating-emptydir-past-its-grace-but-healthy-waits.)"""
    observed = unhealthy(replace_pod(healthy_cluster(3, leader=2), name(2), deleting=True,
                                     deletion_deadline=PAST_GRACE), name(2))
    action = plan_next_action(observed)
    assert isinstance(action, actions.MoveLeader), action
    assert action.from_member_name == name(2) and action.to_member_name == name(1), action
    moved = dataclasses.replace(observed, endpoint_status={
        n: dataclasses.replace(s, leader_id=member_id(1)) for n, s in observed.endpoint_status.items()})
    removal = plan_next_action(moved)
    assert isinstance(removal, actions.RemoveMember) and removal.member_name == name(2), removal


def test_a_dead_leader_that_does_not_answer_is_removed_at_once() -> None:
    """It cannot hand over (move-leader is served by the leader only); its data is gone anyway."""
    observed = unhealthy(replace_pod(healthy_cluster(3, leader=2), name(2), deleting=True, deletion_deadline=PAST_GRACE), name(2))
    observed = dataclasses.replace(observed, endpoint_status={
        n: s for n, s in observed.endpoint_status.items() if n != name(2)})
    assert observed.leader_id == member_id(2), "the others still name it leader"
    action = plan_next_action(observed)
    assert isinstance(action, actions.RemoveMember) and action.member_name == name(2), action


def test_a_learner_that_never_answered_within_the_bound_is_replaced() -> None:
    observed = healthy_cluster(3, size=4)
    learner = make_member(observed.cluster, NEW_MEMBER, 0x9999, learner=True)
    observed = add_member(observed, learner, healthy=False, raft_index=None)
    observed = add_pod(observed, make_pod(observed.cluster, NEW_MEMBER, index=9, ready=False, restart_count=7))
    action = plan_next_action(observed, POLICY)
    assert isinstance(action, actions.RemoveMember) and action.member_name == NEW_MEMBER, action
    assert action.member_id == 0x9999 and action.purpose == "replace"
    young = dataclasses.replace(observed, observed_at=T0 + timedelta(minutes=9, seconds=30))
    assert isinstance(plan_next_action(young, POLICY), actions.Wait)


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


# --- a learner whose pod cannot be created (rule 6b)

REFUSED = ('pods "example-zz9zz" is forbidden: violates PodSecurity "restricted:latest": '
           'allowPrivilegeEscalation != false')


def _learner_without_pod(*, missing_since: timedelta | None = timedelta(minutes=50),
                         message: str = f"member(s) {NEW_MEMBER} added to etcd but without a pod; "
                                        f"creating it failed: {REFUSED}") -> ObservedCluster:
    """3 healthy voters and NEW_MEMBER added as a learner whose pod was never created; the recorded
    MemberPodMissing condition True since T0 + `missing_since` (None: no pass saw it yet)."""
    observed = healthy_cluster()
    observed = add_member(observed, make_member(observed.cluster, NEW_MEMBER, 0x9999, learner=True, started=False),
                          healthy=False, raft_index=None)
    conditions = [] if missing_since is None else [{
        "type": CONDITION_MEMBER_POD_MISSING, "status": "True", "reason": "MemberPodNotCreated", "message": message,
        "lastTransitionTime": format_time(T0 + missing_since)}]
    return with_cluster(observed, make_cluster({"size": 3}, status={"bootstrapped": True, "conditions": conditions}))


def test_a_learner_whose_pod_was_never_created_gets_its_pod_at_once() -> None:
    action = plan_next_action(_learner_without_pod(missing_since=None), POLICY)
    assert isinstance(action, actions.CreateMemberPod) and action.member_name == NEW_MEMBER, action


def test_a_learner_whose_pod_create_keeps_failing_is_retried_within_the_bound() -> None:
    action = plan_next_action(_learner_without_pod(missing_since=timedelta(minutes=59)), POLICY)  # 60 s
    assert isinstance(action, actions.CreateMemberPod) and action.member_name == NEW_MEMBER, action


def test_a_learner_whose_pod_cannot_be_created_is_removed_past_the_bound_with_the_create_error() -> None:
    action = plan_next_action(_learner_without_pod(), POLICY)  # 600 s without a pod
    assert isinstance(action, actions.RemoveMember) and action.member_name == NEW_MEMBER, action
    assert action.purpose == "replace" and REFUSED in action.reason, action


def test_without_a_bound_a_learner_whose_pod_cannot_be_created_is_retried() -> None:
    action = plan_next_action(_learner_without_pod(), PlanningPolicy(unhealthy_member_timeout_seconds=None))
    assert isinstance(action, actions.CreateMemberPod), action


def test_a_failing_learner_pod_create_does_not_block_replacing_a_dead_voter() -> None:
    observed = without_pods(_learner_without_pod(missing_since=timedelta(minutes=59)), name(2))  # emptyDir: data gone
    action = plan_next_action(observed, POLICY)
    assert isinstance(action, actions.RemoveMember) and action.member_name == name(2), action
    assert action.purpose == "replace"


def test_a_failing_learner_pod_create_does_not_block_replacing_a_stuck_voter() -> None:
    observed = unhealthy(_learner_without_pod(missing_since=timedelta(minutes=59)), name(2))
    observed = replace_pod(observed, name(2), ready=False, unready_since=T0 + timedelta(minutes=10))
    action = plan_next_action(observed, POLICY)
    assert isinstance(action, actions.RemoveMember) and action.member_name == name(2), action


def test_status_records_since_when_and_why_a_learner_has_no_pod() -> None:
    observed = _learner_without_pod(missing_since=None)
    create = plan_next_action(observed, POLICY)
    status = compute_status(observed, create, now=T0 + timedelta(hours=1), last_error=REFUSED)
    missing = next(c for c in status["conditions"] if c["type"] == CONDITION_MEMBER_POD_MISSING)
    assert (missing["status"], missing["reason"]) == ("True", "MemberPodNotCreated"), missing
    assert REFUSED in missing["message"] and NEW_MEMBER in missing["message"], missing
    assert REFUSED in status["lastError"]
    # A later pass that does something else keeps the create's error and the time it began.
    later = _learner_without_pod(missing_since=timedelta(hours=1), message=missing["message"])
    again = compute_status(later, actions.NoOp("other work"), now=T0 + timedelta(hours=2))
    kept = next(c for c in again["conditions"] if c["type"] == CONDITION_MEMBER_POD_MISSING)
    assert kept["message"] == missing["message"] and kept["lastTransitionTime"] == missing["lastTransitionTime"]
    gone = compute_status(healthy_cluster(), actions.NoOp("converged"), now=T0)
    assert next(c for c in gone["conditions"] if c["type"] == CONDITION_MEMBER_POD_MISSING)["status"] == "False"
