"""Pacing: when a cluster's next pass comes, from what each pass did (an action: at once; a wait:
briefly, then backing off while the same wait repeats; an imminent wait: faster, for a bounded
number of passes; a refused change: again soon; converged: the resync period, stretched while it
stays converged) and the one refusal it remembers for the supervisor's log."""
from __future__ import annotations

import dataclasses
import logging

import pytest

from etcd_common.etcd import etcdctl as ctl
from etcd_operator import actions as a
from etcd_operator import supervisor as supervisor_module
from etcd_operator.observed import ObservedCluster
from etcd_operator.rechecking import (
    IMMINENT_MAX_PASSES,
    IMMINENT_POLL_SECONDS,
    NEAR_QUOTA_RECHECK_SECONDS,
    POSTPONED_RETRY_SECONDS,
    WAIT_FAST_PASSES,
    WAIT_MAX_SECONDS,
    WAIT_POLL_SECONDS,
    Outcome,
    Pacing,
    stable_recheck_seconds,
)
from tests.unit.etcd_operator.etcd_cluster_builders import raw_cluster
from tests.unit.etcd_operator.supervisor_fakes import supervisor_with_fakes

RESYNC = 10.0
PROMOTE = a.PromoteMember("example-mem04", 0x1004)
WAIT = a.Wait("pod(s) example-mem02 still terminating")
CONVERGED = a.NoOp("3 healthy member(s) running etcd 3.6.16")


def _delays(pacing: Pacing, action: a.Action | None, outcome: Outcome, passes: int) -> list[float]:
    return [pacing.delay_after(action, outcome) for _ in range(passes)]


def test_an_action_is_followed_by_a_pass_at_once() -> None:
    assert Pacing(RESYNC).delay_after(PROMOTE, Outcome.DONE) == 0.0


def test_the_same_wait_polls_then_backs_off_to_the_bound() -> None:
    delays = _delays(Pacing(RESYNC), WAIT, Outcome.DONE, WAIT_FAST_PASSES + 10)
    assert delays[:WAIT_FAST_PASSES] == [WAIT_POLL_SECONDS] * WAIT_FAST_PASSES
    assert delays == sorted(delays) and delays[WAIT_FAST_PASSES] == 2 * WAIT_POLL_SECONDS
    assert delays[-1] == WAIT_MAX_SECONDS


def test_a_changing_wait_keeps_polling() -> None:
    pacing = Pacing(RESYNC)
    delays = [pacing.delay_after(a.Wait(f"learner catching up (raft index {i})"), Outcome.DONE)
              for i in range(WAIT_FAST_PASSES + 10)]
    assert set(delays) == {WAIT_POLL_SECONDS}


def test_an_action_between_waits_starts_the_back_off_over() -> None:
    pacing = Pacing(RESYNC)
    _delays(pacing, WAIT, Outcome.DONE, WAIT_FAST_PASSES + 10)
    pacing.delay_after(PROMOTE, Outcome.DONE)
    assert pacing.delay_after(WAIT, Outcome.DONE) == WAIT_POLL_SECONDS


def test_a_lost_quorum_is_re_checked_like_a_wait() -> None:
    report = a.ReportQuorumLoss(healthy_voters=1, voters=3, unhealthy=("b", "c"))
    delays = _delays(Pacing(RESYNC), report, Outcome.DONE, WAIT_FAST_PASSES + 10)
    assert delays[0] == WAIT_POLL_SECONDS and delays[-1] == WAIT_MAX_SECONDS


def test_an_imminent_wait_is_polled_fast_for_a_bounded_number_of_passes() -> None:
    imminent = a.Wait("learner example-mem04 is starting", imminent=True)
    pacing = Pacing(RESYNC)
    delays = _delays(pacing, imminent, Outcome.DONE, IMMINENT_MAX_PASSES + 2)
    assert delays == [IMMINENT_POLL_SECONDS] * IMMINENT_MAX_PASSES + [WAIT_POLL_SECONDS] * 2
    pacing.delay_after(WAIT, Outcome.DONE)  # something else came between: a new episode
    assert pacing.delay_after(imminent, Outcome.DONE) == IMMINENT_POLL_SECONDS


def test_a_refused_change_is_asked_again_soon_then_backs_off() -> None:
    delays = _delays(Pacing(RESYNC), PROMOTE, Outcome.POSTPONED, WAIT_FAST_PASSES + 10)
    assert delays[:WAIT_FAST_PASSES] == [POSTPONED_RETRY_SECONDS] * WAIT_FAST_PASSES
    assert delays == sorted(delays) and delays[-1] == WAIT_MAX_SECONDS


def test_begin_says_whether_the_change_was_refused_last_pass() -> None:
    pacing = Pacing(RESYNC)
    assert not pacing.begin(PROMOTE)
    pacing.delay_after(PROMOTE, Outcome.POSTPONED)
    assert not pacing.begin(a.MoveLeader("a", 1, "b", 2, "leader first")), "another kind of change"
    pacing.delay_after(PROMOTE, Outcome.POSTPONED)
    assert pacing.begin(PROMOTE)
    assert not pacing.begin(PROMOTE), "a retry is told once; a new refusal is recorded again"


def test_a_refusal_is_remembered_across_passes_that_did_not_act() -> None:
    pacing = Pacing(RESYNC)
    pacing.delay_after(PROMOTE, Outcome.POSTPONED)
    pacing.delay_after(PROMOTE, Outcome.HELD_BACK)  # the lease was not sure
    pacing.delay_after(None, Outcome.IDLE)
    assert pacing.begin(PROMOTE)


def test_a_converged_cluster_is_re_checked_less_and_less_often_up_to_the_cap() -> None:
    delays = _delays(Pacing(RESYNC), CONVERGED, Outcome.DONE, 5)
    assert delays == [stable_recheck_seconds(RESYNC, n) for n in range(1, 6)]
    assert delays[0] == RESYNC and delays[-1] > RESYNC


def test_a_pass_that_is_not_quiet_starts_the_stretch_over() -> None:
    for interruption, outcome in ((PROMOTE, Outcome.DONE), (WAIT, Outcome.DONE), (None, Outcome.HELD_BACK)):
        pacing = Pacing(RESYNC)
        _delays(pacing, CONVERGED, Outcome.DONE, 4)
        pacing.delay_after(interruption, outcome)
        assert pacing.delay_after(CONVERGED, Outcome.DONE) == RESYNC


def test_held_back_polls_and_idle_counts_as_quiet() -> None:
    pacing = Pacing(RESYNC)
    assert pacing.delay_after(None, Outcome.HELD_BACK) == WAIT_POLL_SECONDS
    assert _delays(pacing, None, Outcome.IDLE, 3) == [stable_recheck_seconds(RESYNC, n) for n in range(1, 4)]


# --- the supervisor with its pacing


def test_a_refused_change_is_retried_soon_and_logged_once(monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    supervisor, executor, _ = supervisor_with_fakes(raw_cluster(status={"bootstrapped": True}))
    monkeypatch.setattr(supervisor_module, "plan_next_action", lambda observed, policy: PROMOTE)
    refusals = iter([True, True, True, False])

    def execute(action: a.Action, observed: ObservedCluster) -> None:
        if isinstance(action, a.PromoteMember) and next(refusals):
            raise ctl.LearnerNotReady("etcdserver: can only promote a learner member which is in sync with leader")
        executor.executed.append(action)

    monkeypatch.setattr(executor, "execute", execute)
    with caplog.at_level(logging.DEBUG, logger="etcd_operator.cluster"):
        delays = [supervisor.reconcile_once() for _ in range(4)]
    assert delays == [POSTPONED_RETRY_SECONDS] * 3 + [0.0]
    assert PROMOTE in executor.executed
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and "promote" in r.getMessage()]
    assert len([m for m in info if "postponed" in m]) == 1, info
    assert info.count(PROMOTE.describe()) == 2, "the first attempt and the one that went through"


def test_a_cluster_near_its_quota_is_re_checked_sooner() -> None:
    """NOSPACE comes with no Kubernetes event: a converged cluster whose database is near the quota
    is not left for stretched resync periods."""
    pacing = Pacing(RESYNC)
    near = a.NoOp("3 healthy member(s) running etcd 3.6.16", near_quota=True)
    assert _delays(pacing, near, Outcome.DONE, 5) == [NEAR_QUOTA_RECHECK_SECONDS] * 5
    assert pacing.delay_after(CONVERGED, Outcome.DONE) == RESYNC


def test_near_quota_is_seen_by_the_planner() -> None:
    from etcd_operator.planning import plan_next_action
    from tests.unit.etcd_operator.etcd_cluster_builders import healthy_cluster

    observed = healthy_cluster(3, spec={"backendQuota": "16Mi"})
    statuses = dict(observed.endpoint_status)
    full = dataclasses.replace(statuses["example-mem02"], db_size=14 * 2**20, db_size_in_use=14 * 2**20)
    action = plan_next_action(dataclasses.replace(observed, endpoint_status={**statuses, "example-mem02": full}))
    assert isinstance(action, a.NoOp) and action.near_quota, action
    quiet = plan_next_action(observed)
    assert isinstance(quiet, a.NoOp) and not quiet.near_quota
