"""A member never rejoins with empty data under its old ID: a started member restarting on its
volume is started with only itself in --initial-cluster, so etcd runs only on the data it finds
(without it, etcd finds no peer to join through and refuses); the refusal is told in the status.
And etcd's initial corruption check is on where the version has it, without rolling members."""
from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from etcd_common.api import constants as c
from etcd_operator import actions
from etcd_operator.manifests import build_member_pod, member_peer_url, pod_policy_hash
from etcd_operator.member_start import MEMBER_DATA_MISSING, start_problems
from etcd_operator.observed import parse_pod
from etcd_operator.planning import plan_next_action
from tests.unit.etcd_operator.etcd_cluster_builders import healthy_cluster, make_cluster, name, unhealthy, without_pods

# etcd 3.6's last log line when it starts with state `existing`, no WAL and no peer to ask.
NO_PEERS = ('{"level":"fatal","msg":"discovery failed","error":"cannot fetch cluster info from peer urls: '
            'could not retrieve cluster information from the given URLs"}')


def test_a_started_member_restarts_on_its_volume_with_only_itself_in_initial_cluster() -> None:
    observed = unhealthy(without_pods(healthy_cluster(3, pvc=True), name(2)), name(2))
    action = plan_next_action(observed)
    assert isinstance(action, actions.CreateMemberPod) and action.member_name == name(2), action
    assert action.initial_cluster == ((name(2), member_peer_url(observed.cluster, name(2))),), action


def test_a_never_started_member_still_joins_with_every_member() -> None:
    observed = healthy_cluster(3, pvc=True)
    joining = dataclasses.replace(observed.members[1], name="", client_urls=())  # type: ignore[index]
    observed = without_pods(dataclasses.replace(
        observed, members=(observed.members[0], joining, observed.members[2])), name(2))  # type: ignore[index]
    action = plan_next_action(observed)
    assert isinstance(action, actions.CreateMemberPod) and len(action.initial_cluster) == 3, action


def _pod(initial: list[tuple[str, str]], **container_status: Any) -> dict[str, Any]:
    cluster = make_cluster()
    pod = build_member_pod(cluster, name(2), state="existing", initial_cluster=initial)
    pod["status"] = {"phase": "Running", "containerStatuses": [{"name": "etcd", **container_status}]}
    return pod


def _self_only() -> list[tuple[str, str]]:
    return [(name(2), member_peer_url(make_cluster(), name(2)))]


def _everyone() -> list[tuple[str, str]]:
    return [(name(i), member_peer_url(make_cluster(), name(i))) for i in (1, 2, 3)]


def test_a_pod_restarting_on_its_data_is_told_from_a_joining_one() -> None:
    assert parse_pod(_pod(_self_only())).rejoins_on_data
    assert not parse_pod(_pod(_everyone())).rejoins_on_data
    seed = build_member_pod(make_cluster(), name(1), state="new", initial_cluster=[(name(1), "http://x:2380")])
    assert not parse_pod(seed).rejoins_on_data


CRASHING = {"restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message": NO_PEERS}}}


def test_etcds_refusal_to_rejoin_without_data_is_reported_as_missing_data() -> None:
    observed = dataclasses.replace(healthy_cluster(3, pvc=True), pods=(parse_pod(_pod(_self_only(), **CRASHING)),))
    [problem] = start_problems(observed)
    assert problem.reason == MEMBER_DATA_MISSING, problem
    assert "finds no data on its volume" in problem.message and "replaced" in problem.message, problem


def test_a_joining_member_that_finds_no_peer_is_an_ordinary_crash_loop() -> None:
    observed = dataclasses.replace(healthy_cluster(3, pvc=True), pods=(parse_pod(_pod(_everyone(), **CRASHING)),))
    [problem] = start_problems(observed)
    assert problem.reason == "CrashLoopBackOff", problem


@pytest.mark.parametrize(("version", "flag"), [
    ("3.4.23", None),
    ("3.5.35", "--experimental-initial-corrupt-check=true"),
    ("3.6.16", "--feature-gates=InitialCorruptCheck=true"),
])
def test_the_initial_corruption_check_per_etcd_version(version: str, flag: str | None) -> None:
    pod = build_member_pod(make_cluster({"version": version}), name(1), state="new", initial_cluster=[])
    command = pod["spec"]["containers"][0]["command"]
    checks = [a for a in command if "corrupt" in a.lower()]
    assert checks == ([flag] if flag else []), command


def test_etcd_env_setting_the_check_or_the_feature_gates_wins() -> None:
    env = {"pod": {"etcdEnv": [{"name": "ETCD_FEATURE_GATES", "value": "StopGRPCServiceOnDefrag=true"}]}}
    pod = build_member_pod(make_cluster(env), name(1), state="new", initial_cluster=[])
    assert not [a for a in pod["spec"]["containers"][0]["command"] if a.startswith("--feature-gates")]


def test_the_corruption_check_rolls_no_existing_member() -> None:
    """Not in the pod-policy hash (the value pinned in test_pod_security.py before it existed)."""
    assert pod_policy_hash(make_cluster().require_spec()) == "99b96668afb7a678"
    assert c.ANNOTATION_POD_POLICY_HASH in build_member_pod(make_cluster(), name(1), state="new",
                                                            initial_cluster=[])["metadata"]["annotations"]


def _marked_leaving(observed: Any, member: str) -> Any:
    pvcs = tuple(dataclasses.replace(pvc, leaving=True) if pvc.member_name == member else pvc for pvc in observed.pvcs)
    return dataclasses.replace(observed, pvcs=pvcs)


def test_a_leaving_mark_left_on_a_running_members_volume_is_cleared() -> None:
    """StopMember marks the PVC, then deletes the pod: an operator that stopped in between (or a
    scale-down reverted) leaves the mark on a member that runs on. Broken by keeping it: the next
    time that pod goes, the healthy member is taken for dead and replaced instead of restarted."""
    marked = _marked_leaving(healthy_cluster(3, pvc=True), name(2))
    action = plan_next_action(marked)
    assert action == actions.ClearLeavingMark(name(2), name(2)), action
    # Once cleared, the member's pod going restarts it on its data.
    cleared = dataclasses.replace(marked, pvcs=healthy_cluster(3, pvc=True).pvcs)
    restart = plan_next_action(unhealthy(without_pods(cleared, name(2)), name(2)))
    assert isinstance(restart, actions.CreateMemberPod) and restart.member_name == name(2), restart
    # A mark whose pod is gone is StopMember's own: that member is removed, not restarted.
    stopped = plan_next_action(unhealthy(without_pods(marked, name(2)), name(2)))
    assert not isinstance(stopped, (actions.ClearLeavingMark, actions.CreateMemberPod)), stopped
