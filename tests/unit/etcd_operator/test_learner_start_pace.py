"""Scaling up without idle time: a learner whose pod just started is observed again within moments
(no Kubernetes event says when its etcd serves), for a bounded number of passes only; and a
member add goes to members etcd will not refuse it from ("unhealthy cluster" from a member
promoted a moment ago)."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from etcd_operator import actions as a
from etcd_operator import supervisor as supervisor_module
from etcd_operator.acting import ADD_VIA_MEMBERS_OLDER_THAN_SECONDS
from etcd_operator.manifests import member_client_url
from etcd_operator.observed import ObservedCluster
from etcd_operator.planning import PlanningPolicy, plan_next_action
from etcd_operator.planning.membership import LEARNER_START_SECONDS
from etcd_operator.rechecking import (
    IMMINENT_MAX_PASSES,
    IMMINENT_POLL_SECONDS,
    WAIT_FAST_PASSES,
    WAIT_MAX_SECONDS,
    WAIT_POLL_SECONDS,
)
from tests.unit.etcd_operator.etcd_cluster_builders import (
    add_member,
    add_pod,
    healthy_cluster,
    make_member,
    make_pod,
    name,
    raw_cluster,
    replace_pod,
    unhealthy,
)
from tests.unit.etcd_operator.recording_api import DeletingApi, recording_executor
from tests.unit.etcd_operator.recording_etcd import RecordingEtcd
from tests.unit.etcd_operator.supervisor_fakes import supervisor_with_fakes

LEARNER = f"{name(4)}"


def _with_learner(age_seconds: float, *, serving: bool = False, raft_index: int = 100,
                  phase: str = "Running") -> ObservedCluster:
    """A healthy 3-member cluster growing to 4: learner example-mem04 whose pod is `age_seconds` old."""
    observed = healthy_cluster(3, size=4)
    assert observed.observed_at is not None
    learner = make_member(observed.cluster, LEARNER, 0x2000, learner=True)
    observed = add_member(observed, learner, healthy=False, raft_index=raft_index if serving else None)
    pod = make_pod(observed.cluster, LEARNER, index=4, ready=False, phase=phase,
                   created_at=observed.observed_at - timedelta(seconds=age_seconds))
    return add_pod(observed, pod)


def test_a_learner_whose_pod_just_started_is_an_imminent_wait() -> None:
    action = plan_next_action(_with_learner(1.0))
    assert isinstance(action, a.Wait) and action.imminent, action
    assert "is starting" in action.reason


def test_a_young_learner_catching_up_is_an_imminent_wait() -> None:
    action = plan_next_action(_with_learner(1.0, serving=True, raft_index=10))
    assert isinstance(action, a.Wait) and action.imminent and "catching up" in action.reason, action


def test_a_learner_that_caught_up_is_promoted_at_once() -> None:
    assert isinstance(plan_next_action(_with_learner(0.5, serving=True)), a.PromoteMember)


@pytest.mark.parametrize("observed, why", [
    (_with_learner(LEARNER_START_SECONDS + 1), "older than the start window: the ordinary pace"),
    (_with_learner(0.5, phase="Pending"), "not started yet: its start is a pod event"),
    (unhealthy(_with_learner(0.5), name(2)), "waits on an unhealthy voter, which no poll speeds up"),
])
def test_other_learner_waits_are_not_imminent(observed: ObservedCluster, why: str) -> None:
    action = plan_next_action(observed)
    assert isinstance(action, a.Wait) and not action.imminent, (why, action)


def _supervisor_planning(monkeypatch: pytest.MonkeyPatch, actions: list[a.Action]) -> Any:
    """A supervisor whose planner answers `actions` in turn (then the last one for ever)."""
    supervisor, _, _ = supervisor_with_fakes(raw_cluster(status={"bootstrapped": True}))
    answers = iter(actions)
    last: list[a.Action] = []

    def plan(observed: ObservedCluster, policy: PlanningPolicy) -> a.Action:
        last[:] = [next(answers, last[0] if last else actions[-1])]
        return last[0]

    monkeypatch.setattr(supervisor_module, "plan_next_action", plan)
    return supervisor


def test_an_imminent_wait_is_polled_fast_for_a_bounded_number_of_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    # The learner's raft index moves every pass, so each wait reads differently: the bound must
    # hold anyway.
    waits: list[a.Action] = [a.Wait(f"learner {LEARNER} is catching up (raft index {i} of 100000)", imminent=True)
                             for i in range(IMMINENT_MAX_PASSES + WAIT_FAST_PASSES + 10)]
    supervisor = _supervisor_planning(monkeypatch, waits)
    delays = [supervisor.reconcile_once() for _ in waits]
    assert delays[:IMMINENT_MAX_PASSES] == [IMMINENT_POLL_SECONDS] * IMMINENT_MAX_PASSES
    assert IMMINENT_POLL_SECONDS * IMMINENT_MAX_PASSES <= 5.0, "fast polling lasts seconds, not minutes"
    assert set(delays[IMMINENT_MAX_PASSES:]) == {WAIT_POLL_SECONDS}, delays[IMMINENT_MAX_PASSES:]


def test_after_the_fast_passes_the_same_imminent_wait_backs_off_to_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    wait = a.Wait(f"learner {LEARNER} is starting (it serves no client yet)", imminent=True)
    supervisor = _supervisor_planning(monkeypatch, [wait])
    delays = [supervisor.reconcile_once() for _ in range(IMMINENT_MAX_PASSES + WAIT_FAST_PASSES + 8)]
    assert delays[:IMMINENT_MAX_PASSES] == [IMMINENT_POLL_SECONDS] * IMMINENT_MAX_PASSES
    rest = delays[IMMINENT_MAX_PASSES:]
    assert rest == sorted(rest) and rest[0] == WAIT_POLL_SECONDS and rest[-1] == WAIT_MAX_SECONDS, rest


def test_fast_passes_start_again_only_after_something_else_happened(monkeypatch: pytest.MonkeyPatch) -> None:
    imminent = a.Wait(f"learner {LEARNER} is starting (it serves no client yet)", imminent=True)
    other = a.Wait("pod(s) example-mem02 still terminating")
    supervisor = _supervisor_planning(monkeypatch, [imminent] * (IMMINENT_MAX_PASSES + 1) + [other, imminent])
    delays = [supervisor.reconcile_once() for _ in range(IMMINENT_MAX_PASSES + 3)]
    assert delays[IMMINENT_MAX_PASSES] == WAIT_POLL_SECONDS  # the budget was spent
    assert delays[-1] == IMMINENT_POLL_SECONDS  # a new episode (another wait came between)


def _add(observed: ObservedCluster) -> list[str]:
    etcd = RecordingEtcd()
    action = plan_next_action(observed)
    assert isinstance(action, a.AddMember), action
    recording_executor(DeletingApi(), etcd).execute(action, observed)  # type: ignore[arg-type]
    [call] = etcd.calls
    endpoints = call.endpoints
    return endpoints


def test_a_member_add_goes_to_members_settled_long_enough_for_etcd_to_accept_it() -> None:
    observed = healthy_cluster(3, size=4)
    assert observed.observed_at is not None
    just_promoted = observed.observed_at - timedelta(seconds=ADD_VIA_MEMBERS_OLDER_THAN_SECONDS - 5)
    observed = replace_pod(observed, name(3), created_at=just_promoted)
    assert _add(observed) == [member_client_url(observed.cluster, name(i)) for i in (1, 2)]


def test_a_member_add_goes_to_every_healthy_voter_when_none_has_settled() -> None:
    observed = healthy_cluster(3, size=4)
    assert observed.observed_at is not None
    for i in (1, 2, 3):
        observed = replace_pod(observed, name(i), created_at=observed.observed_at - timedelta(seconds=1))
    assert sorted(_add(observed)) == sorted(member_client_url(observed.cluster, name(i)) for i in (1, 2, 3))
