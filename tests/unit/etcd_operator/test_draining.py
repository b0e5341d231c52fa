"""Upgrades and scale-down lose no client write: a member leaves the client service (its pod's
serving label removed, then its endpoint gone from the service's EndpointSlices) before it is
removed or restarted; clusters whose client service predates the label (CoreOS-made, older ones)
are migrated first, pods before the selector."""
from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from etcd_common.api import constants as c
from etcd_operator import actions
from etcd_operator.acting import ActionExecutor
from etcd_operator.manifests import client_service_selector
from etcd_operator.observed import ObservedCluster, parse_pod, parse_timestamp, ready_endpoint_pods
from etcd_operator.planning import PlanningPolicy, plan_next_action
from etcd_operator.planning.draining import DRAIN_SETTLE_SECONDS, DRAIN_TIMEOUT_SECONDS
from operator_runtime.cached_client import CachedClient
from tests.unit.etcd_operator.etcd_cluster_builders import (
    CLUSTER,
    healthy_cluster,
    name,
    replace_pod,
    unhealthy,
    with_spec,
    without_pods,
)

EVERY_POD = frozenset(name(i) for i in range(1, 6))


def _drained(observed: ObservedCluster, member: str, *, still_listed: bool) -> ObservedCluster:
    observed = replace_pod(observed, member, serving=False)
    listed = EVERY_POD if still_listed else EVERY_POD - {member}
    return dataclasses.replace(observed, client_endpoints=listed)


def test_scale_down_drains_the_member_then_waits_for_its_endpoint_then_removes_it() -> None:
    observed = healthy_cluster(4, size=3)
    drain = plan_next_action(observed)
    assert isinstance(drain, actions.SetServing) and not drain.serving and drain.pod_name == name(4), drain
    waiting = plan_next_action(_drained(observed, name(4), still_listed=True))
    assert isinstance(waiting, actions.Wait) and f"{name(4)} drained" in waiting.reason, waiting
    removal = plan_next_action(_drained(observed, name(4), still_listed=False))
    assert isinstance(removal, actions.StopMember) and removal.member_name == name(4), removal
    # Endpoints not looked up (the lookup failed): the label is off, the removal goes ahead.
    unknown = plan_next_action(replace_pod(observed, name(4), serving=False))
    assert isinstance(unknown, actions.StopMember), unknown


def test_the_wait_for_a_drained_endpoint_is_bounded() -> None:
    """The drain time goes on the pod with the label; an endpoint that does not leave the client
    service within DRAIN_TIMEOUT_SECONDS (the EndpointSlice controller down) no longer holds the
    removal back."""
    observed = healthy_cluster(4, size=3)
    drain = plan_next_action(observed)
    assert isinstance(drain, actions.SetServing) and drain.at == "2024-05-01T13:00:00Z", drain
    assert parse_timestamp(drain.at) == observed.observed_at
    listed = _drained(observed, name(4), still_listed=True)
    recent = replace_pod(listed, name(4), drained_at=observed.observed_at - timedelta(seconds=DRAIN_TIMEOUT_SECONDS - 1))
    assert isinstance(plan_next_action(recent), actions.Wait)
    stale = replace_pod(listed, name(4), drained_at=observed.observed_at - timedelta(seconds=DRAIN_TIMEOUT_SECONDS))
    removal = plan_next_action(stale)
    assert isinstance(removal, actions.StopMember) and removal.member_name == name(4), removal


def test_an_outdated_member_leaving_an_emptydir_upgrade_is_drained_first() -> None:
    observed = with_spec(healthy_cluster(4, size=3, version="3.5.35"), version="3.6.16")
    observed = replace_pod(observed, name(4), image="quay.io/coreos/etcd:v3.6.16")  # the surge member, up to date
    action = plan_next_action(observed)
    assert isinstance(action, actions.SetServing) and not action.serving and action.pod_name == name(3), action
    after = plan_next_action(_drained(observed, name(3), still_listed=False))
    assert isinstance(after, actions.StopMember) and after.member_name == name(3), after
    assert "replaced by an up-to-date member" in after.reason


def test_a_member_restarted_on_its_volume_is_drained_first() -> None:
    observed = with_spec(healthy_cluster(3, version="3.5.35", pvc=True), version="3.6.16")
    action = plan_next_action(observed)
    assert isinstance(action, actions.SetServing) and not action.serving and action.pod_name == name(2), action
    after = plan_next_action(_drained(observed, name(2), still_listed=False))
    assert isinstance(after, actions.UpgradeMember) and after.member_name == name(2), after


def test_dead_and_stuck_members_are_replaced_without_draining() -> None:
    """They serve no client already; a wait on their endpoint must never block their replacement."""
    dead = without_pods(healthy_cluster(3), name(2))
    assert isinstance(plan_next_action(dead), actions.RemoveMember)
    stuck = unhealthy(healthy_cluster(3), name(2))
    stuck = replace_pod(stuck, name(2), ready=False, unready_since=stuck.observed_at - _minutes(10))
    stuck = dataclasses.replace(stuck, client_endpoints=EVERY_POD)
    action = plan_next_action(stuck, PlanningPolicy(unhealthy_member_timeout_seconds=60.0))
    assert isinstance(action, actions.RemoveMember) and action.purpose == "replace", action


def test_a_member_left_drained_serves_again_once_the_cluster_converged() -> None:
    observed = replace_pod(healthy_cluster(3), name(3), serving=False)  # say, spec.size went back to 3
    action = plan_next_action(observed)
    assert action == actions.SetServing(name(3), True, action.reason, ""), action


def test_an_old_client_service_is_migrated_pods_first_before_any_drain() -> None:
    observed = healthy_cluster(4, size=3)  # a scale-down is due, too
    observed = dataclasses.replace(observed, client_selector_outdated=True,
                                   pods=tuple(dataclasses.replace(p, serving=False) for p in observed.pods))
    for index in range(1, 5):
        action = plan_next_action(observed)
        assert action == actions.SetServing(name(index), True, action.reason, ""), action
        observed = replace_pod(observed, name(index), serving=True)
    assert plan_next_action(observed) == actions.UpdateClientSelector(f"{CLUSTER}-client")
    migrated = dataclasses.replace(observed, client_selector_outdated=False)
    assert isinstance(plan_next_action(migrated), actions.SetServing)  # now the drain before the scale-down


def test_a_pod_reads_as_serving_from_its_label_and_drained_at_from_its_annotation() -> None:
    serving = parse_pod({"metadata": {"name": "p", "labels": {c.LABEL_SERVING: "true"}}})
    assert serving.serving and serving.drained_at is None
    drained = parse_pod({"metadata": {"name": "p", "annotations": {c.ANNOTATION_DRAINED_AT: "2024-05-01T13:00:00Z"}}})
    assert not drained.serving and drained.drained_at == parse_timestamp("2024-05-01T13:00:00Z")


def test_ready_endpoint_pods_reads_endpoint_slices() -> None:
    slices = [{"endpoints": [
        {"targetRef": {"kind": "Pod", "name": "a"}, "conditions": {"ready": True}},
        {"targetRef": {"kind": "Pod", "name": "b"}, "conditions": {"ready": False, "serving": True}},
        {"targetRef": {"kind": "Pod", "name": "c"}},  # no conditions: read as ready
    ]}, {"endpoints": None}, {}]
    assert ready_endpoint_pods(slices) == {"a", "c"}


class PatchingApi:
    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any]]] = []

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patches.append((name, patch))
        return {"metadata": {"name": name, "namespace": namespace, "labels": {}}}


def test_the_executor_removes_the_label_with_a_uid_precondition_and_patches_the_selector() -> None:
    observed = healthy_cluster(3)
    api = PatchingApi()
    executor = ActionExecutor(CachedClient(api), CachedClient(api), CachedClient(api), None)  # type: ignore[arg-type]
    executor.execute(actions.SetServing(name(2), False, "removed next", "uid-2", "2024-05-01T13:00:00Z"), observed)
    executor.execute(actions.SetServing(name(2), True, "back", ""), observed)
    executor.execute(actions.UpdateClientSelector(f"{CLUSTER}-client"), observed)
    assert api.patches == [
        (name(2), {"metadata": {"labels": {c.LABEL_SERVING: None},
                                "annotations": {c.ANNOTATION_DRAINED_AT: "2024-05-01T13:00:00Z"}, "uid": "uid-2"}}),
        (name(2), {"metadata": {"labels": {c.LABEL_SERVING: "true"}, "annotations": {c.ANNOTATION_DRAINED_AT: None}}}),
        (f"{CLUSTER}-client", {"spec": {"selector": client_service_selector(CLUSTER)}}),
    ]


def _minutes(n: int) -> Any:
    from datetime import timedelta
    return timedelta(minutes=n)


def test_a_healthy_leader_is_drained_before_leadership_moves_off_it() -> None:
    """A leader drops the proposals it receives while it hands leadership over ("raft proposal
    dropped"): one that must go and cannot be stopped first (one of two voters) leaves the service
    before MoveLeader."""
    observed = replace_pod(healthy_cluster(2, size=1, leader=1), name(1), image="quay.io/coreos/etcd:v3.6.0")
    drain = plan_next_action(observed)
    assert isinstance(drain, actions.SetServing) and not drain.serving and drain.pod_name == name(1), drain
    assert "raft proposal dropped" in drain.reason
    move = plan_next_action(_drained(observed, name(1), still_listed=False))
    assert isinstance(move, actions.MoveLeader) and move.from_member_name == name(1), move


def test_a_leader_restarted_for_an_upgrade_needs_no_move_leader() -> None:
    """etcd hands leadership over itself when it stops gracefully, after its clients are gone; a
    MoveLeader before would drop the writes its clients still have in flight."""
    observed = with_spec(healthy_cluster(3, version="3.5.35", leader=1, pvc=True), version="3.6.16")
    for member in (2, 3):  # the followers are up to date: the leader is upgraded last
        observed = replace_pod(observed, name(member), image="quay.io/coreos/etcd:v3.6.16")
    drain = plan_next_action(observed)
    assert isinstance(drain, actions.SetServing) and not drain.serving and drain.pod_name == name(1), drain
    restart = plan_next_action(_drained(observed, name(1), still_listed=False))
    assert isinstance(restart, actions.UpgradeMember) and restart.member_name == name(1) and restart.in_place, restart


def _rolled(member: int) -> ObservedCluster:
    """An in-place upgrade 3.5 -> 3.6 of three members, `member` restarted on 3.6 and healthy."""
    observed = with_spec(healthy_cluster(3, version="3.5.35", leader=1), version="3.6.16")
    return replace_pod(observed, name(member), image="quay.io/coreos/etcd:v3.6.16", restart_count=1,
                       restarted_from_count=0, restarted_at=observed.observed_at - timedelta(seconds=3))


def test_a_member_drained_for_an_earlier_step_serves_again_before_the_next_is_drained() -> None:
    """Otherwise each step would take one more member out of the client service."""
    observed = replace_pod(_rolled(2), name(2), serving=False)
    action = plan_next_action(observed)
    assert isinstance(action, actions.SetServing) and action.serving and action.pod_name == name(2), action


def test_a_restarted_member_is_ready_in_the_service_before_the_next_is_drained() -> None:
    """Its readiness probe passes a few seconds after etcd serves again; draining the next member
    meanwhile would leave the service one member short (and, for the last, empty)."""
    unready = replace_pod(_rolled(2), name(2), ready=False)
    action = plan_next_action(unready)
    assert isinstance(action, actions.Wait) and f"{name(2)} (re)started" in action.reason, action
    # Where EndpointSlices exist they decide, not the pod's condition.
    listed = dataclasses.replace(replace_pod(_rolled(2), name(3), serving=False), client_endpoints=frozenset({name(1)}))
    assert isinstance(plan_next_action(listed), actions.Wait)
    # Bounded: a member whose readiness never passes does not hold the rollout forever.
    long_ago = replace_pod(unready, name(2), restarted_at=unready.observed_at - timedelta(minutes=5))
    drain = plan_next_action(long_ago)
    assert isinstance(drain, actions.SetServing) and not drain.serving and drain.pod_name == name(3), drain



def test_a_drained_member_goes_only_once_new_connections_stopped_reaching_it() -> None:
    """Out of the endpoints is not yet out of every client's reach: proxies and address caches
    (Go caches /etc/hosts for 5 s) let go of it within DRAIN_SETTLE_SECONDS."""
    observed = healthy_cluster(4, size=3)
    just = replace_pod(_drained(observed, name(4), still_listed=False), name(4),
                       drained_at=observed.observed_at - timedelta(seconds=DRAIN_SETTLE_SECONDS - 1))
    waiting = plan_next_action(just)
    assert isinstance(waiting, actions.Wait) and "let go of it" in waiting.reason, waiting
    settled = replace_pod(just, name(4), drained_at=observed.observed_at - timedelta(seconds=DRAIN_SETTLE_SECONDS))
    assert isinstance(plan_next_action(settled), actions.StopMember)


# --- a learner's pod joins the client service only once its member votes


class CreatingApi(PatchingApi):
    def __init__(self) -> None:
        super().__init__()
        self.created: list[dict[str, Any]] = []

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.created.append(body)
        return {**body, "metadata": {**body["metadata"], "namespace": namespace, "uid": "u"}}


class AddingEtcd:
    def client(self, cluster: Any, endpoints: Any, **options: Any) -> Any:
        class Client:
            def member_add(self, member: str, urls: list[str], learner: bool) -> None:
                pass
        return Client()


def _created_labels(action: actions.Action, observed: ObservedCluster) -> dict[str, str]:
    api = CreatingApi()
    executor = ActionExecutor(CachedClient(api), CachedClient(api), CachedClient(api),  # type: ignore[arg-type]
                              AddingEtcd())  # type: ignore[arg-type]
    executor.execute(action, observed)
    [pod] = api.created
    labels: dict[str, str] = pod["metadata"]["labels"]
    return labels


def test_a_learners_pod_is_created_outside_the_client_service() -> None:
    """etcd refuses a learner's clients ("rpc not supported for learner") while its health check,
    the readiness probe, passes: its pod must not carry the label the client service selects."""
    observed = healthy_cluster(3)
    new = "example-new"
    initial = ((new, "http://new:2380"),)
    learner = _created_labels(actions.AddMember(new, "http://new:2380", True, initial), observed)
    assert c.LABEL_SERVING not in learner and learner[c.LABEL_MEMBER] == new
    voter = _created_labels(actions.AddMember(new, "http://new:2380", False, initial), observed)
    assert voter[c.LABEL_SERVING] == c.LABEL_SERVING_VALUE
    # A learner's pod created again (the pass that added it died before the pod existed).
    unstarted = dataclasses.replace(observed, pods=observed.pods[:2], members=(
        *observed.members[:2], dataclasses.replace(observed.members[2], is_learner=True)))
    recreated = _created_labels(actions.CreateMemberPod(name(3), initial, "unstarted"), unstarted)
    assert c.LABEL_SERVING not in recreated


def _promoted_without_label(observed: ObservedCluster, member: str) -> ObservedCluster:
    return dataclasses.replace(replace_pod(observed, member, serving=False),
                               client_endpoints=EVERY_POD - {member})


def test_a_promoted_learner_serves_before_the_next_member_is_added() -> None:
    observed = _promoted_without_label(healthy_cluster(2, size=3), name(2))  # scale-up 2 -> 3 under way
    action = plan_next_action(observed)
    assert action == actions.SetServing(name(2), True, action.reason, ""), action
    assert "votes now" in action.reason
    served = plan_next_action(replace_pod(observed, name(2), serving=True))
    assert isinstance(served, actions.AddMember), served


def test_a_learner_is_not_served_before_it_votes_nor_a_member_about_to_go() -> None:
    learning = _promoted_without_label(healthy_cluster(3, size=3), name(3))
    learning = dataclasses.replace(learning, members=(
        *learning.members[:2], dataclasses.replace(learning.members[2], is_learner=True)))
    action = plan_next_action(learning)
    assert not isinstance(action, actions.SetServing), action
    # Promoted, but over size: it is the member the scale-down removes, so it never serves.
    going = _promoted_without_label(healthy_cluster(4, size=3), name(4))
    removal = plan_next_action(going)
    assert isinstance(removal, actions.StopMember) and removal.member_name == name(4), removal
