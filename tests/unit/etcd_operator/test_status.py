"""compute_status: phase, reason, members and conditions from one pass."""
from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from etcd_common.etcd.types import EndpointStatus
from etcd_operator import actions
from etcd_operator.observed import ObservedCluster
from etcd_operator.planning import plan_next_action
from etcd_operator.spec import parse_etcd_cluster
from etcd_operator.status import CONDITION_TYPES, compute_status, format_time
from tests.unit.etcd_operator.etcd_cluster_builders import (
    CLUSTER,
    NEW_MEMBER,
    add_member,
    add_pod,
    healthy_cluster,
    leaderless,
    make_member,
    make_pod,
    member_list_unavailable,
    name,
    nothing_yet,
    raw_cluster,
    replace_pod,
    unhealthy,
    with_cluster,
    with_spec,
    without_pods,
)

NOW = datetime(2024, 6, 1, 8, 30, 0, tzinfo=UTC)


def _status(observed: ObservedCluster, **kwargs: Any) -> dict[str, Any]:
    return compute_status(observed, plan_next_action(observed), now=NOW, **kwargs)


def _conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def _seed_starting() -> ObservedCluster:
    observed = nothing_yet()
    return add_pod(observed, make_pod(observed.cluster, NEW_MEMBER, ready=False, state="new"))


def _learner_joining() -> ObservedCluster:
    observed = healthy_cluster(3, size=4)
    learner = make_member(observed.cluster, NEW_MEMBER, 0x9999, learner=True)
    observed = add_member(observed, learner, healthy=False, raft_index=10)
    return add_pod(observed, make_pod(observed.cluster, NEW_MEMBER, index=9, ready=False))


@pytest.mark.parametrize("observed, phase, reason, conditions", [
    pytest.param(healthy_cluster(3), "Running", "QuorumAvailable",
                 {"Available": "True", "Scaling": "False", "Upgrading": "False", "Recovering": "False",
                  "Degraded": "False"}, id="converged"),
    pytest.param(nothing_yet(), "Creating", "Bootstrapping", {"Available": "False", "Scaling": "Unknown"},
                 id="new-cluster"),
    pytest.param(_seed_starting(), "Creating", "Bootstrapping", {"Available": "False", "Degraded": "True"},
                 id="seed-starting"),
    pytest.param(healthy_cluster(1, size=3), "Running", "QuorumAvailable", {"Scaling": "True", "Degraded": "False"},
                 id="scaling-up"),
    pytest.param(_learner_joining(), "Running", "QuorumAvailable", {"Scaling": "True"}, id="learner-joining"),
    pytest.param(unhealthy(healthy_cluster(3), name(2)), "Running", "QuorumAvailable",
                 {"Available": "True", "Degraded": "True"}, id="one-member-unhealthy"),
    pytest.param(unhealthy(healthy_cluster(3), name(2), name(3)), "Failed", "QuorumLost",
                 {"Available": "False", "Degraded": "True"}, id="quorum-lost"),
    pytest.param(member_list_unavailable(without_pods(healthy_cluster(3), name(1), name(2), name(3))),
                 "Failed", "MembersLost", {"Available": "False", "Degraded": "True"}, id="members-lost"),
    pytest.param(member_list_unavailable(healthy_cluster(3)), "Running", "PodsReady",
                 {"Available": "True", "Degraded": "True", "Scaling": "Unknown"},
                 id="operator-cannot-reach-etcd-but-pods-ready"),
    pytest.param(member_list_unavailable(replace_pod(replace_pod(healthy_cluster(3), name(1), ready=False),
                                                     name(2), ready=False)),
                 "Failed", "EtcdUnreachable", {"Available": "False"}, id="etcd-unreachable"),
    pytest.param(leaderless(healthy_cluster(3), name(1)), "Failed", "QuorumLost",
                 {"Available": "False", "Degraded": "True"}, id="quorum-lost-no-member-list-pods-still-ready"),
    pytest.param(dataclasses.replace(leaderless(healthy_cluster(3), name(1)),
                                     endpoint_status={name(1): EndpointStatus(0x1001, 0x1002)}),
                 "Running", "PodsReady", {"Available": "True"}, id="no-member-list-but-a-leader-is-known"),
    pytest.param(with_spec(healthy_cluster(3, version="3.5.35"), version="3.6.16"), "Running", "QuorumAvailable",
                 {"Upgrading": "True"}, id="upgrading"),
    pytest.param(without_pods(healthy_cluster(3), name(2)), "Running", "QuorumAvailable",
                 {"Recovering": "True"}, id="replacing-dead-member"),
    pytest.param(with_spec(healthy_cluster(3), version="3.5.35"), "Failed", "InvalidSpec",
                 {"Available": "True", "Degraded": "True"}, id="downgrade-refused-cluster-still-serves"),
    pytest.param(with_cluster(healthy_cluster(3), parse_etcd_cluster(raw_cluster({"version": "3.0.0"}))),
                 "Failed", "InvalidSpec", {"Degraded": "True", "Upgrading": "Unknown"}, id="invalid-spec"),
])
def test_phase_and_conditions(observed: ObservedCluster, phase: str, reason: str, conditions: dict[str, str]) -> None:
    status = _status(observed)
    assert (status["phase"], status["reason"]) == (phase, reason), status["message"]
    got = {kind: value[0] for kind, value in _conditions(status).items()}
    assert {kind: got[kind] for kind in conditions} == conditions
    assert [c["type"] for c in status["conditions"]] == list(CONDITION_TYPES)


def test_running_cluster_fields() -> None:
    observed = unhealthy(healthy_cluster(3, leader=2), name(3))
    status = _status(observed)
    assert status["members"] == {"ready": [name(1), name(2)], "unready": [name(3)]}
    assert status["readyCount"] == 2 and status["size"] == 3
    assert status["leader"] == name(2)
    assert status["currentVersion"] == "3.6.16" and status["targetVersion"] == ""
    assert status["serviceName"] == f"{CLUSTER}-client" and status["clientPort"] == 2379
    assert status["observedGeneration"] == 4 and status["controlPaused"] is False
    assert status["bootstrapped"] is True and status["lastError"] == "" and status["warnings"] == []


def test_learner_is_unready() -> None:
    status = _status(_learner_joining())
    assert NEW_MEMBER in status["members"]["unready"] and status["readyCount"] == 3 and status["size"] == 4


def test_upgrade_versions() -> None:
    observed = with_spec(healthy_cluster(3, version="3.5.35", pvc=True), version="3.6.16")
    observed = replace_pod(observed, name(2), image="quay.io/coreos/etcd:v3.6.16")
    statuses = dict(observed.endpoint_status)
    statuses[name(2)] = dataclasses.replace(statuses[name(2)], version="3.6.16")
    statuses[name(1)] = dataclasses.replace(statuses[name(1)], version="3.5.35")
    statuses[name(3)] = dataclasses.replace(statuses[name(3)], version="3.5.35")
    status = _status(dataclasses.replace(observed, endpoint_status=statuses))
    assert status["currentVersion"] == "3.5.35" and status["targetVersion"] == "3.6.16"
    assert _conditions(status)["Upgrading"] == ("True", "RollingUpdate")


def test_paused_keeps_observed_phase() -> None:
    status = _status(with_spec(healthy_cluster(3), paused=True))
    assert status["controlPaused"] is True and status["phase"] == "Running"
    assert "paused" in status["message"]


def test_first_member_marks_bootstrapped() -> None:
    observed = with_cluster(healthy_cluster(1, size=3), parse_etcd_cluster(raw_cluster(status={})))
    assert not observed.cluster.recorded.bootstrapped
    assert _status(observed)["bootstrapped"] is True
    assert _status(nothing_yet())["bootstrapped"] is False


def test_warnings_and_last_error() -> None:
    observed = with_spec(healthy_cluster(3), pod={"busyboxImage": "busybox"})
    status = _status(observed, last_error="member add: etcdserver: unhealthy cluster")
    assert status["warnings"] and "busyboxImage" in status["warnings"][0]
    assert status["lastError"] == "member add: etcdserver: unhealthy cluster"
    assert "unhealthy cluster" in status["message"]


def test_action_in_message() -> None:
    observed = healthy_cluster(1, size=3)
    status = compute_status(observed, plan_next_action(observed), now=NOW)
    assert "add learner" in status["message"]
    assert compute_status(observed, None, now=NOW)["message"] == "1 of 1 voting members healthy, leader example-mem01"


def test_last_transition_time_kept_while_unchanged() -> None:
    earlier = NOW - timedelta(days=3)
    first = compute_status(healthy_cluster(3), actions.NoOp(), now=earlier)
    recorded_raw = raw_cluster(status=first)
    # next pass: same observation, later; then the cluster degrades
    observed = with_cluster(healthy_cluster(3), parse_etcd_cluster(recorded_raw))
    again = compute_status(observed, actions.NoOp(), now=NOW)
    assert all(c["lastTransitionTime"] == format_time(earlier) for c in again["conditions"])
    degraded = compute_status(unhealthy(observed, name(2)), None, now=NOW)
    times = {c["type"]: c["lastTransitionTime"] for c in degraded["conditions"]}
    assert times["Degraded"] == format_time(NOW) and times["Available"] == format_time(earlier)


def test_restart_never_marks_failed() -> None:
    """A new operator's first pass sees a running cluster: status says Running, whatever the
    previous status said."""
    recorded = {"phase": "Creating", "conditions": []}
    observed = with_cluster(healthy_cluster(3), parse_etcd_cluster(raw_cluster(status=recorded)))
    assert _status(observed)["phase"] == "Running"


def test_format_time() -> None:
    assert format_time(datetime(2024, 1, 2, 3, 4, 5, 999)) == "2024-01-02T03:04:05Z"
    assert format_time(datetime(2024, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2)))) == "2024-01-02T03:04:05Z"
