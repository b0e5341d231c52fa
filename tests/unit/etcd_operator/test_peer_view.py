"""Health from the cluster's view (issue 27 item 3), the peers' side: while voters fail the
operator's health check, the healthy voters' active peer streams (`peer_views`) tell a member cut
off from the operator only (seen connected by peers) from one cut off from its peers while its pod
is Ready (MemberPartitioned), and on etcd 3.4, which answers no linearizable member list, the
operator cut off from a quorum loss. Neither is acted on; one Warning event per change."""
from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from etcd_common.etcd.types import EndpointStatus
from etcd_operator import actions as a
from etcd_operator import supervisor as supervisor_module
from etcd_operator.metrics import OperatorMetrics
from etcd_operator.observed import ObservedCluster
from etcd_operator.planning import plan_next_action
from etcd_operator.status import compute_status, peer_view_event
from tests.unit.etcd_operator.etcd_cluster_builders import (
    T0,
    healthy_cluster,
    make_cluster,
    member_id,
    name,
    raw_cluster,
    replace_pod,
    unhealthy,
    with_cluster,
)
from tests.unit.etcd_operator.supervisor_fakes import supervisor_with_fakes

DESTRUCTIVE = (a.RemoveMember, a.DeletePod, a.DeletePVC, a.StopMember, a.StartQuorumRecovery)


def _views(**connected: tuple[int, ...]) -> dict[str, frozenset[int]]:
    """peer_views from `mem01=(2, 3)`: member example-mem01 has peer streams to members 2 and 3."""
    return {f"example-{member}": frozenset(member_id(i) for i in ids) for member, ids in connected.items()}


def _etcd34_cut_off(*, seen: tuple[int, ...] = (2, 3), leader: int = 1) -> ObservedCluster:
    """etcd 3.4: members 2 and 3 do not answer the operator (no health, no status); member 1 is
    healthy, follows `leader` (0: none) and has peer streams to `seen`. No linearizable member list."""
    observed = unhealthy(healthy_cluster(3, version="3.4.23"), name(2), name(3), error="dial tcp: i/o timeout")
    statuses = {name(1): EndpointStatus(member_id(1), member_id(leader) if leader else 0, "3.4.23", raft_index=100)}
    return dataclasses.replace(observed, endpoint_status=statuses, quorum_confirmed_by=None,
                               peer_views=_views(mem01=seen))


def _one_unhealthy(views: dict[str, frozenset[int]], *, ready: bool = True) -> ObservedCluster:
    """Member 3 fails the operator's health check (its pod Ready or not); 1 and 2 show `views`."""
    observed = unhealthy(healthy_cluster(3), name(3))
    observed = dataclasses.replace(observed, peer_views=views,
                                   endpoint_status={k: v for k, v in observed.endpoint_status.items() if k != name(3)})
    return replace_pod(observed, name(3), ready=ready)


def _partitioned() -> ObservedCluster:
    return _one_unhealthy(_views(mem01=(2,), mem02=(1,)))


def _conditions(status: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {c["type"]: c for c in status["conditions"]}


def _status(observed: ObservedCluster) -> dict[str, Any]:
    return compute_status(observed, plan_next_action(observed), now=T0)


def _quorum_gauge(observed: ObservedCluster) -> float:
    metrics = OperatorMetrics(CollectorRegistry())
    metrics.set_cluster_members("ns", "c", members=3, ready=1, has_quorum=observed.quorum_available)
    [value] = [s.value for m in metrics.registry.collect() if m.name == "etcd_operator_cluster_quorum"
               for s in m.samples]
    return value


# --- etcd 3.4: the peers' view tells the operator cut off from a quorum loss


@pytest.mark.parametrize("seen", [(2, 3), (2,)], ids=["both-seen", "one-seen"])
def test_etcd34_operator_cut_off_is_told_by_the_peers_view(seen: tuple[int, ...]) -> None:
    observed = _etcd34_cut_off(seen=seen)
    assert observed.operator_cut_off and observed.quorum_available and not observed.has_quorum
    action = plan_next_action(observed)
    assert isinstance(action, a.Wait) and "has quorum" in action.reason, action
    status = _status(observed)
    assert (status["phase"], status["reason"]) == ("Running", "MembersUnreachableFromOperator"), status
    seen_names = ", ".join(name(i) for i in seen)
    assert f"seen connected by peers: {seen_names}" in status["message"]
    # Member 3, not seen connected while its pod is Ready, is cut off from its peers as well.
    degraded = "MembersUnreachableFromOperator" if seen == (2, 3) else "MemberPartitioned"
    assert _conditions(status)["Degraded"]["reason"] == degraded
    assert _quorum_gauge(observed) == 1.0


@pytest.mark.parametrize("case", ["no-leader", "none-seen", "views-unknown"])
def test_etcd34_without_the_peers_evidence_it_stays_a_quorum_loss(case: str) -> None:
    observed = {
        "no-leader": _etcd34_cut_off(leader=0),  # connected, but no leader: no proof of a quorum
        "none-seen": _etcd34_cut_off(seen=()),
        "views-unknown": dataclasses.replace(_etcd34_cut_off(), peer_views={}),
    }[case]
    assert not observed.operator_cut_off and not observed.quorum_available
    assert isinstance(plan_next_action(observed), a.ReportQuorumLoss)
    status = _status(observed)
    assert (status["phase"], status["reason"]) == ("Failed", "QuorumLost"), status
    assert peer_view_event(observed, status) is None
    assert _quorum_gauge(observed) == 0.0


# --- a member partitioned from its peers, or cut off from the operator only


def test_a_ready_member_no_healthy_peer_is_connected_to_is_reported_partitioned() -> None:
    observed = _partitioned()
    assert [m.member_name for m in observed.partitioned_voters] == [name(3)]
    status = _status(observed)
    conditions = _conditions(status)
    assert (conditions["Available"]["status"], conditions["Available"]["reason"]) == ("True", "QuorumAvailable")
    degraded = conditions["Degraded"]
    assert (degraded["status"], degraded["reason"]) == ("True", "MemberPartitioned"), degraded
    assert f"{name(3)} not connected to their peers" in degraded["message"]
    assert "kubelet reports their pods Ready" in degraded["message"]
    assert status["phase"] == "Running"


def test_a_partitioned_member_is_not_replaced_however_long_it_lasts() -> None:
    observed = dataclasses.replace(_partitioned(), observed_at=T0.replace(year=2025))
    action = plan_next_action(observed)
    assert not isinstance(action, DESTRUCTIVE), action


@pytest.mark.parametrize("case", ["pod-not-ready", "views-unknown"])
def test_a_dead_member_or_an_unknown_peer_view_is_no_partition(case: str) -> None:
    observed = (_one_unhealthy(_views(mem01=(2,), mem02=(1,)), ready=False) if case == "pod-not-ready"
                else _one_unhealthy({}))
    assert observed.partitioned_voters == ()
    degraded = _conditions(_status(observed))["Degraded"]
    assert (degraded["reason"], degraded["message"]) == ("MembersUnhealthy", f"unhealthy voting member(s): {name(3)}")


def test_a_member_only_the_operator_cannot_reach_is_seen_connected_by_peers() -> None:
    observed = _one_unhealthy(_views(mem01=(2, 3), mem02=(1, 3)))
    assert observed.partitioned_voters == () and [m.member_name for m in observed.voters_seen_connected] == [name(3)]
    degraded = _conditions(_status(observed))["Degraded"]
    assert (degraded["status"], degraded["reason"]) == ("True", "MembersUnreachableFromOperator")
    assert degraded["message"] == f"the operator cannot reach {name(3)}; seen connected by peers: {name(3)}"


# --- events: one per change


def _recorded(observed: ObservedCluster, status: dict[str, Any]) -> ObservedCluster:
    """`observed` as the next pass sees it: the cluster carries the status this pass wrote."""
    return with_cluster(observed, make_cluster(status={"bootstrapped": True, "conditions": status["conditions"]}))


def test_a_peer_view_warning_is_due_once_per_change() -> None:
    first = _partitioned()
    status = _status(first)
    assert peer_view_event(first, status) == ("MemberPartitioned", _conditions(status)["Degraded"]["message"])
    again = _recorded(_partitioned(), status)
    assert peer_view_event(again, _status(again)) is None, "the same partition, a later pass"
    seen = _recorded(_one_unhealthy(_views(mem01=(2, 3), mem02=(1, 3))), status)
    assert peer_view_event(seen, _status(seen)) is not None, "now seen connected: a change"
    healed = _recorded(healthy_cluster(3), status)
    assert peer_view_event(healed, _status(healed)) is None


def test_the_supervisor_records_one_warning_for_a_lasting_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = {"observed": _partitioned()}
    monkeypatch.setattr(supervisor_module, "observe",
                        lambda cluster, kube, etcd: dataclasses.replace(scenario["observed"], cluster=cluster))
    supervisor, executor, events = supervisor_with_fakes(raw_cluster(status={"bootstrapped": True, "phase": "Running"}))
    for _ in range(3):
        supervisor.reconcile_once()
    scenario["observed"] = healthy_cluster(3)
    supervisor.reconcile_once()
    scenario["observed"] = _partitioned()
    supervisor.reconcile_once()
    assert [r for r in events.recorded if r[1] == "MemberPartitioned"] == [("Warning", "MemberPartitioned")] * 2
    assert not any(isinstance(action, DESTRUCTIVE) for action in executor.executed), executor.executed
