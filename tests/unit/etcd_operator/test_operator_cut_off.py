"""Health from the cluster's view (issue 27 item 3): when too few voters answer the operator's
health check for a quorum but the cluster answered a linearizable member list (etcd 3.5+: its leader
confirmed its leadership with a majority), the operator is cut off from members its peers serve
with. That is reported as such, Available, never as a quorum loss (no QuorumLost event, no quorum
alert), and nothing is changed meanwhile."""
from __future__ import annotations

import dataclasses

from prometheus_client import CollectorRegistry

from etcd_common.etcd import types as etcd_types
from etcd_operator import actions as a
from etcd_operator.metrics import OperatorMetrics
from etcd_operator.observed import ObservedCluster
from etcd_operator.observing import _linearizable_responder
from etcd_operator.planning import plan_next_action
from etcd_operator.status import compute_status
from tests.unit.etcd_operator.etcd_cluster_builders import T0, healthy_cluster, name, unhealthy


def _cut_off(confirmed_by: str | None = name(1)) -> ObservedCluster:
    observed = unhealthy(healthy_cluster(3), name(2), name(3), error="dial tcp: i/o timeout")
    return dataclasses.replace(observed, quorum_confirmed_by=confirmed_by)


def test_a_confirmed_quorum_with_members_out_of_reach_is_a_wait_not_a_quorum_loss() -> None:
    observed = _cut_off()
    assert observed.operator_cut_off and observed.quorum_available and not observed.has_quorum
    action = plan_next_action(observed)
    assert isinstance(action, a.Wait), action
    assert "cannot reach" in action.reason and name(2) in action.reason and "has quorum" in action.reason


def test_status_says_available_and_who_the_operator_cannot_reach() -> None:
    observed = _cut_off()
    status = compute_status(observed, plan_next_action(observed), now=T0)
    assert (status["phase"], status["reason"]) == ("Running", "MembersUnreachableFromOperator"), status
    assert name(2) in status["message"] and name(3) in status["message"]
    available = next(c for c in status["conditions"] if c["type"] == "Available")
    assert available["status"] == "True"


def test_without_the_clusters_confirmation_it_stays_a_quorum_loss() -> None:
    observed = _cut_off(confirmed_by=None)
    assert not observed.operator_cut_off
    assert isinstance(plan_next_action(observed), a.ReportQuorumLoss)
    status = compute_status(observed, plan_next_action(observed), now=T0)
    assert (status["phase"], status["reason"]) == ("Failed", "QuorumLost"), status


def test_the_quorum_gauge_follows_the_clusters_view() -> None:
    metrics = OperatorMetrics(CollectorRegistry())
    for cluster, observed in (("cut-off", _cut_off()), ("lost", _cut_off(confirmed_by=None))):
        metrics.set_cluster_members("ns", cluster, members=3, ready=1,
                                    has_quorum=observed.quorum_available)
    values = {s.labels["cluster"]: s.value for m in metrics.registry.collect()
              if m.name == "etcd_operator_cluster_quorum" for s in m.samples}
    assert values == {"cut-off": 1.0, "lost": 0.0}


def test_only_a_member_that_honours_the_linearizable_flag_confirms_a_quorum() -> None:
    """etcd 3.4 ignores the flag and answers from its own view, quorum or not."""
    for version, confirmed in (("3.6.16", name(2)), ("3.5.35", name(2)), ("3.4.23", None)):
        observed = healthy_cluster(3, version=version)
        members = tuple(observed.members or ())
        answer = etcd_types.MemberList(members, 1, member_id=members[1].id)
        assert _linearizable_responder(observed, answer) == confirmed, version
