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
from etcd_operator.tls.transition import with_tls_step
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


def _moving(*modes: str, pvc: bool = False, version: str = "3.6.16") -> ObservedCluster:
    """A healthy 3-member cluster whose pods run `modes`, its spec now asking for issued TLS."""
    plain = healthy_cluster(3, pvc=pvc, version=version)
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
    assert isinstance(action, a.CreateMemberPod) and action.tls_bridge is None, "the step's own (TLS) pod"


# --- Moving off TLS (spec.TLS removed from a running TLS cluster)

def _on_tls(*modes: str, pvc: bool = False, remembered: bool = True, gone: str = "",
            peer_http: bool = False, version: str = "3.6.16", secrets: dict[str, str] | None = None) -> ObservedCluster:
    """A healthy 3-member issued-TLS cluster whose pods run `modes` (members on https peer and
    client URLs where their pod is a TLS pod; every peer URL http with `peer_http`), its spec.TLS
    now removed; the last status named the Secrets (`remembered`); the pod of member `gone` is
    gone; the cluster as observing.py hands it on (with_tls_step)."""
    on_tls = _moving(TLS_MODE_TLS, TLS_MODE_TLS, TLS_MODE_TLS, pvc=pvc, version=version)
    tls = on_tls.cluster.require_spec().tls
    secrets = secrets or {"peer": tls.member_peer_secret, "server": tls.member_server_secret,
                          "operator": tls.operator_secret}

    def urls(scheme: str, found: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(f"{scheme}://{u.split('://', 1)[1]}" for u in found)

    members = tuple(dataclasses.replace(m, peer_urls=urls("https" if mode == TLS_MODE_TLS and not peer_http else "http",
                                                          m.peer_urls),
                                        client_urls=urls("https" if mode == TLS_MODE_TLS else "http", m.client_urls))
                    for m, mode in zip(on_tls.members or (), modes, strict=True))
    plain = with_spec(dataclasses.replace(on_tls, members=members))
    if remembered:
        recorded = dataclasses.replace(plain.cluster.recorded, tls_secrets=secrets)
        plain = dataclasses.replace(plain, cluster=dataclasses.replace(plain.cluster, recorded=recorded))
    plain_hash = pod_policy_hash(plain.cluster.require_spec())  # plain pods were built from this spec
    pods = tuple(dataclasses.replace(pod, tls_mode=mode, pod_policy_hash=plain_hash if mode == TLS_MODE_PLAIN
                                     else pod.pod_policy_hash)
                 for pod, mode in zip(on_tls.pods, modes, strict=True) if pod.member_name != gone)
    return dataclasses.replace(plain, pods=pods, cluster=with_tls_step(plain.cluster, pods))


def test_the_secrets_a_move_off_tls_needs_are_read_back_from_the_last_status() -> None:
    raw = {"tls": {"peer": {"secret": "p", "notAfter": "x"}, "server": {"secret": "s"}, "operator": {"secret": "o"},
                   "ca": {"secret": "c"}}}
    from etcd_common.api.etcd_cluster import parse_recorded_status
    assert parse_recorded_status(raw).tls_secrets == {"peer": "p", "server": "s", "operator": "o"}


def test_off_tls_step_1_bridges_on_the_remembered_secrets_and_keeps_speaking_https() -> None:
    observed = _on_tls(TLS_MODE_TLS, TLS_MODE_TLS, TLS_MODE_TLS)
    spec = observed.cluster.require_spec()
    assert spec.tls_off and spec.tls_bridge and spec.tls.operator_secret.endswith("-tls-operator"), spec
    assert member_client_url(observed.cluster, name(1)).startswith("https://"), "TLS pods serve https only"
    assert member_peer_url(observed.cluster, name(1)).startswith("http://"), "new members join on http peers"
    assert _mode_of_pod_built_for(observed.cluster) == TLS_MODE_BRIDGE
    assert "--advertise-client-urls=http://" in " ".join(_command(observed.cluster)), \
        "a bridge pod advertises http: it serves both, and http is where the move goes"


def test_without_remembered_secrets_turning_tls_off_stays_refused_with_the_reason() -> None:
    observed = _on_tls(TLS_MODE_TLS, TLS_MODE_TLS, TLS_MODE_TLS, remembered=False)
    assert not observed.cluster.require_spec().tls_off
    action = plan_next_action(observed)
    assert isinstance(action, a.RejectSpec) and "status no longer names" in action.reason, action


def test_off_tls_step_1_on_volumes_moves_the_peer_url_to_http_with_the_restart() -> None:
    observed = _on_tls(TLS_MODE_TLS, TLS_MODE_TLS, TLS_MODE_TLS, pvc=True)
    action = plan_through_drain(observed)
    assert isinstance(action, a.UpgradeMember) and not action.in_place, action
    assert action.member_name != name(1), "the leader goes last"
    assert action.peer_url == member_peer_url(observed.cluster, action.member_name), action
    assert action.peer_url.startswith("http://") and "moving off TLS, step 1 of 2" in action.reason, action


def test_off_tls_step_1_on_emptydir_adds_a_bridge_member_on_http_peers() -> None:
    action = plan_through_drain(_on_tls(TLS_MODE_TLS, TLS_MODE_BRIDGE, TLS_MODE_TLS))
    assert isinstance(action, a.AddMember) and action.purpose == "upgrade", action
    assert action.peer_url.startswith("http://"), action


def test_off_tls_step_2_rolls_bridge_pods_to_plain_ones_speaking_http() -> None:
    observed = _on_tls(TLS_MODE_BRIDGE, TLS_MODE_BRIDGE, TLS_MODE_BRIDGE, pvc=True)
    spec = observed.cluster.require_spec()
    assert not spec.tls_off and not spec.tls.client_tls, "no TLS-only pod left: step 2, the user's spec"
    assert member_client_url(observed.cluster, name(1)).startswith("http://")
    action = plan_through_drain(observed)
    assert isinstance(action, a.UpgradeMember) and action.peer_url == "", action
    assert "moving off TLS, step 2 of 2" in action.reason, action
    assert _mode_of_pod_built_for(observed.cluster) == TLS_MODE_PLAIN


def test_nothing_rolls_once_every_pod_is_plain_again() -> None:
    action = plan_next_action(_on_tls(TLS_MODE_PLAIN, TLS_MODE_PLAIN, TLS_MODE_PLAIN))
    assert not isinstance(action, (a.AddMember, a.UpgradeMember, a.RemoveMember, a.StopMember, a.RejectSpec)), action


def test_a_tls_member_whose_pod_went_off_step_restarts_on_a_tls_pod() -> None:
    """Step 1 off TLS, on volumes: a member still on https peers that lost its pod (not by the
    step) must listen on https again, not as a bridge, or its peers could not reach it."""
    gone = _on_tls(TLS_MODE_BRIDGE, TLS_MODE_TLS, TLS_MODE_TLS, pvc=True, gone=name(2))
    assert gone.cluster.require_spec().tls_off, "member 3's TLS pod still runs: step 1"
    action = plan_next_action(gone)
    assert isinstance(action, a.CreateMemberPod) and action.member_name == name(2), action
    assert action.tls_bridge is False, action


@pytest.mark.parametrize("direction", ["to TLS", "off TLS"])
def test_a_restart_interrupted_after_member_update_is_finished_though_the_member_is_unhealthy(direction: str) -> None:
    """The operator stopped between `member update` (the peer URL changed: to https, or back to
    http) and the restart: the next pass restarts that member, with no second update."""
    if direction == "to TLS":
        observed = _moving(TLS_MODE_BRIDGE, TLS_MODE_BRIDGE, TLS_MODE_BRIDGE, pvc=True)
    else:
        observed = _on_tls(TLS_MODE_TLS, TLS_MODE_TLS, TLS_MODE_TLS, pvc=True)
    updated = member_peer_url(observed.cluster, name(2))
    members = tuple(dataclasses.replace(m, peer_urls=(updated,)) if m.member_name == name(2) else m
                    for m in observed.members or ())
    observed = dataclasses.replace(observed, members=members, health={
        **observed.health, name(2): dataclasses.replace(observed.health[name(2)], healthy=False)})
    action = plan_through_drain(observed)
    assert isinstance(action, a.UpgradeMember) and action.member_name == name(2) and not action.peer_url, action


def test_status_says_the_cluster_moves_off_tls() -> None:
    from etcd_operator.status import REASON_MOVING_OFF_TLS
    observed = _on_tls(TLS_MODE_BRIDGE, TLS_MODE_TLS, TLS_MODE_TLS)
    status = compute_status(observed, plan_next_action(observed), now=datetime(2026, 1, 1, tzinfo=UTC))
    upgrading = next(cond for cond in status["conditions"] if cond["type"] == "Upgrading")
    assert upgrading["reason"] == REASON_MOVING_OFF_TLS, upgrading
    assert "step 1 of 2" in upgrading["message"] and "2 of 3" in upgrading["message"], upgrading


def test_the_last_tls_member_restarting_after_its_peer_url_change_gets_a_plain_pod() -> None:
    """Off TLS on volumes: the last TLS pod is deleted right after `member update` gave its member
    an http peer URL; no TLS pod is left (step 2), and the member list still has the https client
    URL its old pod published. Its new pod is a plain one, not a refusal."""
    gone = _on_tls(TLS_MODE_BRIDGE, TLS_MODE_BRIDGE, TLS_MODE_TLS, pvc=True, gone=name(3), peer_http=True)
    assert not gone.cluster.require_spec().tls_off
    assert any(u.startswith("https://") for u in (gone.members or ())[2].client_urls)
    action = plan_next_action(gone)
    assert isinstance(action, a.CreateMemberPod) and action.member_name == name(3), action
    assert action.tls_bridge is None, action


def test_removing_client_tls_alone_from_running_members_stays_refused() -> None:
    """Client-only static TLS (no peer certificate): its pods read as plain; removing spec.TLS
    would cut every https client at once, so it is refused as before."""
    observed = with_spec(healthy_cluster(), TLS={"static": {"member": {"serverSecret": "server"},
                                                           "operatorSecret": "operator"}})
    members = tuple(dataclasses.replace(m, client_urls=tuple(u.replace("http://", "https://") for u in m.client_urls))
                    for m in observed.members or ())
    plain = with_spec(dataclasses.replace(observed, members=members))
    action = plan_next_action(with_tls_step_observed(plain))
    assert isinstance(action, a.RejectSpec), action


def test_stepping_a_stepped_cluster_again_changes_nothing() -> None:
    for observed in (_on_tls(TLS_MODE_TLS, TLS_MODE_BRIDGE, TLS_MODE_TLS), _moving(TLS_MODE_PLAIN, TLS_MODE_BRIDGE,
                                                                                  TLS_MODE_PLAIN)):
        assert with_tls_step(observed.cluster, observed.pods) == observed.cluster


@pytest.mark.parametrize(("version", "secrets", "reason"), [
    ("3.6.16", {"peer": "example-certmanager-peer", "server": "example-certmanager-server",
                "operator": "example-certmanager-operator"}, "spec.TLS.certManager cannot be moved off TLS yet"),
    ("3.4.23", None, "etcd 3.4.23 cannot be moved off TLS"),
])
def test_moves_off_tls_it_cannot_make_are_refused_with_why(version: str, secrets: dict[str, str] | None,
                                                           reason: str) -> None:
    observed = _on_tls(TLS_MODE_TLS, TLS_MODE_TLS, TLS_MODE_TLS, version=version, secrets=secrets)
    assert not observed.cluster.require_spec().tls_off
    action = plan_next_action(observed)
    assert isinstance(action, a.RejectSpec) and reason in action.reason, action
