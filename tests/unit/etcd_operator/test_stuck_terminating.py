"""A member pod on a volume that stays Terminating (a finalizer nobody removes, a node that never
confirms) blocks nothing forever: reported from the end of its grace period on, its member counts
as dead past the bound and is replaced while quorum allows; its volume is left alone while the pod
stays (planning.py, rule 6)."""
from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from etcd_operator import actions
from etcd_operator.member_start import STUCK_TERMINATING, start_problems
from etcd_operator.observed import STOP_MARGIN_SECONDS, ObservedCluster, format_timestamp, parse_pod
from etcd_operator.planning import PlanningPolicy, plan_next_action
from etcd_operator.planning.member_pods import STUCK_TERMINATING_SECONDS
from etcd_operator.status import compute_status
from tests.unit.etcd_operator.etcd_cluster_builders import (
    T0,
    healthy_cluster,
    member_id,
    name,
    replace_pod,
    unhealthy,
    without_members,
)

TIMEOUT = 300.0
POLICY = PlanningPolicy(unhealthy_member_timeout_seconds=TIMEOUT)
NOW = T0 + timedelta(hours=1)  # healthy_cluster's observed_at
FINALIZER = "example.com/hold"


def _stuck(seconds_past_grace: float, *, member: int = 2, finalizers: tuple[str, ...] = (FINALIZER,)) -> ObservedCluster:
    """A 3-member cluster on volumes whose member `member`'s pod was deleted and is still there
    `seconds_past_grace` after its deletionTimestamp (not probed, so unhealthy)."""
    observed = unhealthy(healthy_cluster(3, pvc=True), name(member))
    return replace_pod(observed, name(member), deleting=True, ready=False, finalizers=finalizers,
                       node_name="sandbox-node-2", deletion_deadline=NOW - timedelta(seconds=seconds_past_grace))


def test_a_member_pod_stuck_terminating_past_the_bound_is_replaced() -> None:
    action = plan_next_action(_stuck(STOP_MARGIN_SECONDS + TIMEOUT + 1), POLICY)
    assert isinstance(action, actions.RemoveMember) and action.member_name == name(2), action
    assert action.purpose == "replace", action
    assert f"its pod {name(2)} is stuck terminating" in action.reason and FINALIZER in action.reason, action
    assert f"volume {name(2)} is kept while the pod stays" in action.reason, action


def test_a_member_pod_stuck_past_the_bound_whose_etcd_still_serves_is_not_replaced() -> None:
    """Its node is cut off from the control plane (the pod stays deleted, held by nobody), yet a
    healthy voter has an active peer stream to it: no proof it is dead, so it is waited for."""
    observed = dataclasses.replace(_stuck(STOP_MARGIN_SECONDS + TIMEOUT + 1, finalizers=()),
                                   peer_views={name(1): frozenset({member_id(2), member_id(3)})})
    action = plan_next_action(observed, POLICY)
    assert isinstance(action, actions.Wait), action
    assert "still serves" in action.reason, action


def test_a_member_pod_terminating_within_the_bound_is_waited_for_and_says_why() -> None:
    action = plan_next_action(_stuck(60), POLICY)
    assert isinstance(action, actions.Wait), action
    assert "grace period ended at 2024-05-01T12:59:00Z" in action.reason and FINALIZER in action.reason, action
    replaced_at = format_timestamp(NOW - timedelta(seconds=60 - STOP_MARGIN_SECONDS - TIMEOUT))
    assert f"replaced at {replaced_at}" in action.reason, action


def test_waiting_for_a_stuck_pod_reads_the_same_pass_after_pass() -> None:
    """Calm: the same wait and status each pass (rechecking.py backs off; status is not rewritten)."""
    first, later = _stuck(60), dataclasses.replace(_stuck(60), observed_at=NOW + timedelta(seconds=7))
    later = replace_pod(later, name(2), deletion_deadline=NOW - timedelta(seconds=60))
    assert plan_next_action(first, POLICY) == plan_next_action(later, POLICY)
    assert start_problems(first) == start_problems(later)


def test_without_an_unhealthy_member_timeout_the_bound_is_a_constant() -> None:
    assert isinstance(plan_next_action(_stuck(STUCK_TERMINATING_SECONDS)), actions.Wait)
    action = plan_next_action(_stuck(STOP_MARGIN_SECONDS + STUCK_TERMINATING_SECONDS + 1))
    assert isinstance(action, actions.RemoveMember) and action.member_name == name(2), action


def test_a_pod_held_by_its_node_says_so() -> None:
    action = plan_next_action(_stuck(60, finalizers=()), POLICY)
    assert isinstance(action, actions.Wait) and "node sandbox-node-2 has not confirmed" in action.reason, action


def test_a_stuck_member_is_not_removed_without_quorum() -> None:
    observed = unhealthy(_stuck(STOP_MARGIN_SECONDS + TIMEOUT + 1), name(3))
    assert isinstance(plan_next_action(observed, POLICY), actions.ReportQuorumLoss)


def test_after_its_removal_the_replacement_is_added_and_the_volume_kept_while_the_pod_stays() -> None:
    observed = without_members(_stuck(STOP_MARGIN_SECONDS + TIMEOUT + 100), name(2))
    action = plan_next_action(observed, POLICY)
    assert isinstance(action, actions.AddMember) and action.member_name != name(2), action
    # Once the pod is gone, the removed member's volume goes as a leftover (rule 10).
    gone = dataclasses.replace(observed, pods=tuple(p for p in observed.pods if p.name != name(2)))
    assert isinstance(plan_next_action(gone, POLICY), actions.DeletePVC)


def test_a_stuck_pod_is_reported_in_status_and_as_one_warning_incident() -> None:
    observed = _stuck(60)
    [problem] = start_problems(observed)
    assert (problem.pod, problem.reason) == (name(2), STUCK_TERMINATING) and FINALIZER in problem.message
    status: dict[str, Any] = compute_status(observed, plan_next_action(observed, POLICY), now=NOW)
    assert f"member pod {name(2)} is stuck terminating" in status["message"], status["message"]
    condition = next(c for c in status["conditions"] if c["type"] == "MemberStartBlocked")
    assert (condition["status"], condition["reason"]) == ("True", STUCK_TERMINATING)


def test_a_pod_within_its_grace_period_is_no_problem() -> None:
    assert start_problems(_stuck(-10)) == ()


def test_finalizers_and_node_are_read_from_the_pod() -> None:
    pod = parse_pod({"metadata": {"name": "p", "finalizers": [FINALIZER], "deletionTimestamp": "2024-05-01T12:00:00Z"},
                     "spec": {"nodeName": "sandbox-node-1", "containers": [{"name": "etcd"}]}})
    assert pod.finalizers == (FINALIZER,) and pod.node_name == "sandbox-node-1" and pod.deleting
