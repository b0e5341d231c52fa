"""A running plaintext cluster moved to TLS (tls_transition.py): pod TLS modes, the two steps,
what the planner rolls in each, the peer URL change on a volume, status."""
from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from etcd_common.api.etcd_cluster import EtcdCluster
from etcd_operator import actions as a
from etcd_operator.acting import ActionExecutor
from etcd_operator.manifests import build_member_pod, member_client_url, member_peer_url, pod_policy_hash
from etcd_operator.observed import TLS_MODE_BRIDGE, TLS_MODE_PLAIN, TLS_MODE_TLS, ObservedCluster, parse_pod
from etcd_operator.planning import plan_next_action
from etcd_operator.status import REASON_MOVING_TO_TLS, compute_status
from etcd_operator.tls_transition import with_tls_step
from tests.unit.etcd_operator.etcd_cluster_builders import (
    healthy_cluster,
    member_id,
    name,
    plan_through_drain,
    with_issued_certificates,
    with_spec,
)


def _with_modes(observed: ObservedCluster, *modes: str) -> ObservedCluster:
    """Pods 1.. run the given TLS modes (bridge and TLS pods were built from the current spec);
    the cluster as observing.py hands it on (with_tls_step)."""
    spec_hash = pod_policy_hash(observed.cluster.require_spec())
    pods = tuple(dataclasses.replace(pod, tls_mode=mode, pod_policy_hash=spec_hash if mode != TLS_MODE_PLAIN
                                     else pod.pod_policy_hash)
                 for pod, mode in zip(observed.pods, modes, strict=True))
    return dataclasses.replace(observed, pods=pods, cluster=with_tls_step(observed.cluster, pods))


def _moving(*modes: str, pvc: bool = False) -> ObservedCluster:
    """A healthy 3-member cluster whose pods run `modes`, its spec now asking for issued TLS."""
    plain = healthy_cluster(3, pvc=pvc)
    return _with_modes(with_issued_certificates(plain), *modes)


def _mode_of_pod_built_for(cluster: EtcdCluster) -> str:
    pod = build_member_pod(cluster, name(1), state="existing", initial_cluster=((name(1), "http://x:2380"),))
    return parse_pod(pod).tls_mode


def _command(cluster: EtcdCluster) -> list[str]:
    pod = build_member_pod(cluster, name(1), state="existing", initial_cluster=((name(1), "http://x:2380"),))
    return list(pod["spec"]["containers"][0]["command"])


def test_a_pods_tls_mode_is_read_from_the_flags_it_was_built_with() -> None:
    plain = healthy_cluster(3)
    issued = with_issued_certificates(plain).cluster
    bridging = with_tls_step(issued, plain.pods)
    assert issued.require_spec().tls_bridge is False and bridging.require_spec().tls_bridge is True
    assert _mode_of_pod_built_for(plain.cluster) == TLS_MODE_PLAIN
    assert _mode_of_pod_built_for(bridging) == TLS_MODE_BRIDGE
    assert _mode_of_pod_built_for(issued) == TLS_MODE_TLS


def test_a_bridge_pod_keeps_peers_on_http_and_serves_clients_on_both_schemes() -> None:
    bridging = with_tls_step(with_issued_certificates(healthy_cluster(3)).cluster, healthy_cluster(3).pods)
    command = _command(bridging)
    assert "--listen-client-urls=http://$(POD_IP):2379,https://$(POD_IP):2379" in command
    assert "--listen-peer-urls=http://$(POD_IP):2380" in command
    assert any(flag.startswith("--peer-cert-file=") for flag in command), "dials https peers with its certificate"
    assert any(flag.startswith("--cert-file=") for flag in command)
    assert member_peer_url(bridging, name(1)).startswith("http://")
    assert member_client_url(bridging, name(1)).startswith("http://"), "the operator speaks http in step 1"


@pytest.mark.parametrize(("modes", "bridge"), [
    ((TLS_MODE_PLAIN, TLS_MODE_PLAIN, TLS_MODE_PLAIN), True),
    ((TLS_MODE_BRIDGE, TLS_MODE_PLAIN, TLS_MODE_BRIDGE), True),
    ((TLS_MODE_BRIDGE, TLS_MODE_BRIDGE, TLS_MODE_BRIDGE), False),
    ((TLS_MODE_TLS, TLS_MODE_BRIDGE, TLS_MODE_TLS), False),
    ((TLS_MODE_TLS, TLS_MODE_TLS, TLS_MODE_TLS), False),
])
def test_the_step_is_read_from_the_pods(modes: tuple[str, ...], bridge: bool) -> None:
    """Nothing remembered: an operator restarted at any point picks the step up from the pods."""
    assert _moving(*modes).cluster.require_spec().tls_bridge is bridge


def test_no_bridge_without_a_tls_spec() -> None:
    assert _with_modes(healthy_cluster(3), TLS_MODE_PLAIN, TLS_MODE_PLAIN, TLS_MODE_PLAIN) \
        .cluster.require_spec().tls_bridge is False


def test_step_1_on_emptydir_adds_a_bridge_member_on_http_peers() -> None:
    action = plan_through_drain(_moving(TLS_MODE_PLAIN, TLS_MODE_PLAIN, TLS_MODE_PLAIN))
    assert isinstance(action, a.AddMember) and action.purpose == "upgrade", action
    assert action.peer_url.startswith("http://"), action
    assert "step 1 of 2" in action.reason


def test_step_1_on_volumes_restarts_a_follower_without_changing_its_peer_url() -> None:
    action = plan_through_drain(_moving(TLS_MODE_PLAIN, TLS_MODE_PLAIN, TLS_MODE_PLAIN, pvc=True))
    assert isinstance(action, a.UpgradeMember) and not action.in_place, action
    assert action.member_name != name(1), "the leader goes last"
    assert action.peer_url == ""


def test_step_2_on_volumes_moves_the_peer_url_to_https_with_the_restart() -> None:
    observed = _moving(TLS_MODE_BRIDGE, TLS_MODE_BRIDGE, TLS_MODE_BRIDGE, pvc=True)
    action = plan_through_drain(observed)
    assert isinstance(action, a.UpgradeMember) and not action.in_place, action
    assert action.peer_url == member_peer_url(observed.cluster, action.member_name), action
    assert action.peer_url.startswith("https://")
    assert action.member_id == member_id(int(action.member_name[-1])), action
    assert "step 2 of 2" in action.reason


def test_step_2_on_emptydir_adds_a_member_on_https_peers() -> None:
    action = plan_through_drain(_moving(TLS_MODE_TLS, TLS_MODE_BRIDGE, TLS_MODE_BRIDGE))
    assert isinstance(action, a.AddMember) and action.peer_url.startswith("https://"), action


def test_nothing_rolls_once_every_pod_serves_tls() -> None:
    action = plan_next_action(_moving(TLS_MODE_TLS, TLS_MODE_TLS, TLS_MODE_TLS))
    assert not isinstance(action, (a.AddMember, a.UpgradeMember, a.RemoveMember, a.StopMember)), action


def test_a_step_waits_for_an_unhealthy_member() -> None:
    observed = _moving(TLS_MODE_BRIDGE, TLS_MODE_PLAIN, TLS_MODE_PLAIN)
    observed = dataclasses.replace(observed, health={**observed.health, name(3): dataclasses.replace(
        observed.health[name(3)], healthy=False)})
    action = plan_next_action(observed)
    assert not isinstance(action, (a.AddMember, a.UpgradeMember, a.SetServing)), action


def test_turning_tls_off_on_a_running_cluster_is_refused() -> None:
    on_tls = _moving(TLS_MODE_TLS, TLS_MODE_TLS, TLS_MODE_TLS)
    members = tuple(dataclasses.replace(m, peer_urls=tuple(u.replace("http://", "https://") for u in m.peer_urls),
                                        client_urls=tuple(u.replace("http://", "https://") for u in m.client_urls))
                    for m in on_tls.members or ())
    observed = with_spec(dataclasses.replace(on_tls, members=members))
    action = plan_next_action(observed)
    assert isinstance(action, a.RejectSpec) and "cannot be turned off" in action.reason, action


def test_peer_only_tls_on_a_running_cluster_stays_refused() -> None:
    observed = with_spec(healthy_cluster(), TLS={"static": {"member": {"peerSecret": "peer"}}})
    assert isinstance(plan_next_action(with_tls_step_observed(observed)), a.RejectSpec)


def with_tls_step_observed(observed: ObservedCluster) -> ObservedCluster:
    return dataclasses.replace(observed, cluster=with_tls_step(observed.cluster, observed.pods))


def test_status_says_which_step_is_under_way() -> None:
    observed = _moving(TLS_MODE_BRIDGE, TLS_MODE_PLAIN, TLS_MODE_PLAIN)
    status = compute_status(observed, plan_next_action(observed), now=datetime(2026, 1, 1, tzinfo=UTC))
    upgrading = next(cond for cond in status["conditions"] if cond["type"] == "Upgrading")
    assert upgrading["reason"] == REASON_MOVING_TO_TLS, upgrading
    assert "step 1 of 2" in upgrading["message"] and "2 of 3" in upgrading["message"], upgrading


class _Pods:
    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls

    def delete(self, namespace: str, pod: str, **options: Any) -> None:
        self.calls.append(("delete pod", pod))


class _Etcd:
    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls

    def client(self, cluster: Any, endpoints: Any, **options: Any) -> Any:
        calls = self.calls

        class Client:
            def member_update(self, member: int, peer_urls: list[str]) -> None:
                calls.append(("member update", member, peer_urls))
        return Client()


def test_the_peer_url_is_updated_right_before_the_pod_goes() -> None:
    observed = _moving(TLS_MODE_BRIDGE, TLS_MODE_BRIDGE, TLS_MODE_BRIDGE, pvc=True)
    calls: list[Any] = []
    executor = ActionExecutor(_Pods(calls), _Pods(calls), _Pods(calls), _Etcd(calls))  # type: ignore[arg-type]
    url = f"https://{name(2)}.example:2380"
    executor.execute(a.UpgradeMember(name(2), name(2), "moving", "uid-2", member_id=member_id(2), peer_url=url),
                     observed)
    assert calls == [("member update", member_id(2), [url]), ("delete pod", name(2))]


def test_the_last_plain_member_restarting_on_its_volume_gets_a_bridge_pod() -> None:
    """Step 1 on volumes: once the last plain pod is deleted, no pod serves plaintext and the pass
    sees step 2; the member's peer URL is still http, so its new pod must bridge, not TLS."""
    observed = _moving(TLS_MODE_PLAIN, TLS_MODE_BRIDGE, TLS_MODE_BRIDGE, pvc=True)
    gone = dataclasses.replace(observed, pods=observed.pods[1:])
    gone = dataclasses.replace(gone, cluster=with_tls_step(gone.cluster, gone.pods))
    assert gone.cluster.require_spec().tls_bridge is False, "no plain pod left: step 2"
    action = plan_next_action(gone)
    assert isinstance(action, a.CreateMemberPod) and action.member_name == name(1), action
    assert action.tls_bridge is True, action

    created: list[dict[str, Any]] = []

    class Api:
        def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
            created.append(body)
            return body

    executor = ActionExecutor(Api(), Api(), Api(), _Etcd([]))  # type: ignore[arg-type]
    executor.execute(action, gone)
    pods = [body for body in created if body.get("kind", "Pod") == "Pod" and "containers" in body.get("spec", {})]
    assert [parse_pod(pod).tls_mode for pod in pods] == [TLS_MODE_BRIDGE], pods


def test_a_member_already_on_https_peers_restarts_on_a_tls_pod() -> None:
    observed = _moving(TLS_MODE_BRIDGE, TLS_MODE_TLS, TLS_MODE_TLS, pvc=True)
    members = tuple(dataclasses.replace(m, peer_urls=(member_peer_url(observed.cluster, m.member_name),))
                    for m in observed.members or ())
    gone = dataclasses.replace(observed, members=members, pods=observed.pods[1:])
    action = plan_next_action(gone)
    assert isinstance(action, a.CreateMemberPod) and action.tls_bridge is False, action


def test_a_restart_interrupted_after_member_update_is_finished_though_the_member_is_unhealthy() -> None:
    observed = _moving(TLS_MODE_BRIDGE, TLS_MODE_BRIDGE, TLS_MODE_BRIDGE, pvc=True)
    https = member_peer_url(observed.cluster, name(2))
    members = tuple(dataclasses.replace(m, peer_urls=(https,)) if m.member_name == name(2) else m
                    for m in observed.members or ())
    observed = dataclasses.replace(observed, members=members, health={
        **observed.health, name(2): dataclasses.replace(observed.health[name(2)], healthy=False)})
    action = plan_through_drain(observed)
    assert isinstance(action, a.UpgradeMember) and action.member_name == name(2) and not action.peer_url, action
