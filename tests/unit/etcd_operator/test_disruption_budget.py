"""The PodDisruptionBudget decision: a quorum of the larger of spec.size and the voting members
etcd lists, created when missing, updated when that changes."""
from __future__ import annotations

import dataclasses

import pytest

from etcd_operator import actions as a
from etcd_operator.disruption_budget import plan_disruption_budget
from etcd_operator.manifests import build_disruption_budget
from etcd_operator.observed import ObservedDisruptionBudget, parse_disruption_budget
from etcd_operator.ownership import NameProblem
from tests.unit.etcd_operator.etcd_cluster_builders import UID, healthy_cluster, member_list_unavailable, with_spec


@pytest.mark.parametrize(("size", "voters", "wanted"), [
    (1, 1, 1), (3, 3, 2), (5, 5, 3), (7, 7, 4),
    (5, 3, 3),  # scaling up: quorum of the size asked for
    (3, 5, 3),  # scaling down: the five still running need three
    (3, 4, 3),  # an emptyDir upgrade's extra member
])
def test_a_missing_budget_is_created_at_a_quorum(size: int, voters: int, wanted: int) -> None:
    observed = with_spec(healthy_cluster(voters, size=voters), size=size)
    action = plan_disruption_budget(observed, None)
    assert isinstance(action, a.SetDisruptionBudget) and action.create and action.min_available == wanted
    budget = build_disruption_budget(observed.cluster, action.min_available)
    assert budget["apiVersion"] == "policy/v1" and budget["spec"]["minAvailable"] == wanted
    assert budget["spec"]["selector"] == {"matchLabels": {"app": "etcd", "etcd_cluster": "example"}}
    assert [ref["uid"] for ref in budget["metadata"]["ownerReferences"]] == [UID]


def test_a_budget_follows_resizes_and_is_left_alone_when_right() -> None:
    observed = with_spec(healthy_cluster(3, size=3), size=5)
    action = plan_disruption_budget(observed, ObservedDisruptionBudget("example", 2))
    assert isinstance(action, a.SetDisruptionBudget) and not action.create and action.min_available == 3
    assert plan_disruption_budget(observed, ObservedDisruptionBudget("example", 3)) is None


def test_without_a_member_list_an_existing_budget_is_not_changed() -> None:
    observed = member_list_unavailable(with_spec(healthy_cluster(3), size=5))
    assert plan_disruption_budget(observed, ObservedDisruptionBudget("example", 2)) is None


def test_no_budget_for_a_refused_or_paused_cluster() -> None:
    refused = dataclasses.replace(healthy_cluster(3), name_problem=NameProblem("ServiceNameTaken", "taken"))
    assert plan_disruption_budget(refused, None) is None
    assert plan_disruption_budget(with_spec(healthy_cluster(3), paused=True), None) is None


def test_parse_disruption_budget() -> None:
    parsed = parse_disruption_budget({"metadata": {"name": "example", "uid": "u"}, "spec": {"minAvailable": 2}})
    assert parsed == ObservedDisruptionBudget("example", 2, "u")
