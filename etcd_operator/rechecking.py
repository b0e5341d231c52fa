"""How soon a cluster's supervisor passes again unless something wakes it: `Pacing`, one per
supervisor, told what each pass did (`delay_after(action, outcome)`).

- After an action, at once: the next pass observes what it did.
- While waiting on etcd (a learner catching up, a member starting), briefly: WAIT_POLL_SECONDS
  while the wait is new, then, when the same wait repeats, backing off to WAIT_MAX_SECONDS.
  A wait the planner calls imminent is polled faster still, for a bounded number of passes.
- A change etcd refused for now, again soon (POSTPONED_RETRY_SECONDS), then backing off the same way.
- Converged: the resync period. Events (the cluster, its pods, services, PVCs) wake a supervisor
  at once, so this re-check is a safety net: a member failing without its pod changing (a frozen
  process) still turns its pod NotReady through the readiness probe, which is an event. A
  cluster found converged pass after pass is therefore re-checked less often, up to
  STABLE_RECHECK_MAX_MULTIPLE resync periods; any pass that is not a quiet one (an action, a
  wait) starts over at one. One whose database is near the quota is re-checked every
  NEAR_QUOTA_RECHECK_SECONDS instead (NOSPACE comes without an event).
"""
from __future__ import annotations

import enum

from etcd_operator.actions import (
    Action,
    FailQuorumRecovery,
    FinishQuorumRecovery,
    NoOp,
    ReportQuorumLoss,
    StartQuorumRecovery,
    Wait,
)

WAIT_POLL_SECONDS = 0.5  # while something is in progress on the etcd side
# A change etcd refused for now ("unhealthy cluster" for its 5 s after a change, "learner not in
# sync") is asked again this soon: each poll's wait is time added to the change.
POSTPONED_RETRY_SECONDS = 0.2
WAIT_MAX_SECONDS = 5.0  # the bound of the back-off while the same wait (or report) repeats
# Passes at WAIT_POLL_SECONDS before the same wait starts backing off: 10 s, longer than a new
# learner may take to answer (etcd 3.6: up to ~7 s), which no Kubernetes event announces.
WAIT_FAST_PASSES = 20
# A wait the planner calls imminent (a learner whose pod just started: it serves clients and
# catches up within a fraction of a second, and no Kubernetes event says when) is observed again
# this soon, as the raw-etcdctl floor polls; at most IMMINENT_MAX_PASSES passes in a row (3 s),
# then the ordinary WAIT_POLL_SECONDS schedule takes over. Each such pass is one member list and
# HTTP status/health requests to the members, no process.
IMMINENT_POLL_SECONDS = 0.05
IMMINENT_MAX_PASSES = 60
STABLE_RECHECK_MAX_MULTIPLE = 3.0
# A converged cluster whose database is near the quota (NoOp.near_quota) is re-checked this often:
# etcd raises NOSPACE without any Kubernetes event, and the recovery starts at the next pass.
NEAR_QUOTA_RECHECK_SECONDS = 2.0
# The controller's own resync (wake every supervisor, restart one whose thread died) is only a net
# under the supervisors' schedules: were it every resync period, it would wake every cluster at
# the same instant, and stretching a stable cluster's interval would change nothing.
CONTROLLER_RESYNC_MULTIPLE = 6.0


class Outcome(enum.Enum):
    """What became of a pass."""

    HELD_BACK = "held back"  # it did not get to act (watches not listed yet, the lease not surely ours)
    IDLE = "idle"  # nothing to supervise (the cluster is gone, or being deleted)
    DONE = "done"  # its action was carried out (one without effect: reported)
    POSTPONED = "postponed"  # etcd refused its change for now


class Pacing:
    """The delay before a cluster's next pass, from what the passes did; the state it keeps is
    only about pace (what was waited on and how often, quiet passes in a row, a refusal)."""

    def __init__(self, resync_seconds: float) -> None:
        self.resync_seconds = resync_seconds
        self._refused: str | None = None  # kind of the action etcd refused last pass, if any
        self._waiting_on: tuple[str, str] | None = None  # what the last passes waited on ...
        self._waits = 0  # ... and how many passes in a row
        self._imminent_passes = 0  # passes in a row that polled an imminent wait fast
        self._quiet_passes = 0  # converged passes in a row (they stretch the re-check interval)

    def begin(self, action: Action) -> bool:
        """The pass carries out (or reports) `action`: is it a change etcd refused last pass, so
        this is its retry? (`delay_after(action, Outcome.POSTPONED)` records a refusal.)"""
        retrying = self._refused == action.kind
        self._refused = None
        return retrying

    def delay_after(self, action: Action | None, outcome: Outcome) -> float:
        """Seconds until the next pass unless woken earlier (`action`: None when the pass planned
        none, as it may when HELD_BACK or IDLE)."""
        delay = self._delay(action, outcome)
        if delay != self.resync_seconds:
            self._quiet_passes = 0
            return delay
        self._quiet_passes += 1
        return stable_recheck_seconds(delay, self._quiet_passes)

    def _delay(self, action: Action | None, outcome: Outcome) -> float:
        if outcome is Outcome.HELD_BACK:
            return WAIT_POLL_SECONDS
        if outcome is Outcome.IDLE or action is None:
            return self.resync_seconds
        if outcome is Outcome.POSTPONED:
            self._refused = action.kind
            # Asked again soon while the refusal is new (etcd's "unhealthy cluster" lasts 5 s
            # after a change), then backing off like any repeated wait.
            delay = self._same_wait((action.kind, "postponed"))
            return POSTPONED_RETRY_SECONDS if delay <= WAIT_POLL_SECONDS else delay
        if action.has_effect:
            self._waiting_on, self._waits = None, 0
            self._imminent_passes = 0
            return 0.0
        imminent = isinstance(action, Wait) and action.imminent
        if imminent and self._imminent_passes < IMMINENT_MAX_PASSES:
            self._imminent_passes += 1
            self._waiting_on, self._waits = None, 0
            return IMMINENT_POLL_SECONDS
        if isinstance(action, (StartQuorumRecovery, FinishQuorumRecovery, FailQuorumRecovery)):
            # Recorded in status only; the recovery's next step follows at once.
            self._waiting_on, self._waits = None, 0
            return WAIT_POLL_SECONDS
        if isinstance(action, (Wait, ReportQuorumLoss)):
            if not imminent:
                self._imminent_passes = 0
            return self._same_wait((action.kind, action.describe()))
        self._waiting_on, self._waits = None, 0
        self._imminent_passes = 0
        if isinstance(action, NoOp) and action.near_quota:
            return NEAR_QUOTA_RECHECK_SECONDS
        return self.resync_seconds

    def _same_wait(self, waiting_on: tuple[str, str]) -> float:
        """WAIT_POLL_SECONDS while the wait is new or changing (a learner's raft index moves on);
        the same wait again and again backs off, doubling up to WAIT_MAX_SECONDS. Watches still
        wake the pass at once when anything in Kubernetes changes."""
        self._waits = self._waits + 1 if waiting_on == self._waiting_on else 1
        self._waiting_on = waiting_on
        return wait_delay_seconds(self._waits)


def wait_delay_seconds(same_waits: int) -> float:
    """After `same_waits` passes in a row waiting on the same thing: WAIT_FAST_PASSES at
    WAIT_POLL_SECONDS, then doubling, at most WAIT_MAX_SECONDS."""
    doublings = max(0, same_waits - WAIT_FAST_PASSES)
    return min(WAIT_MAX_SECONDS, WAIT_POLL_SECONDS * 2.0 ** min(doublings, 16))


def stable_recheck_seconds(resync_seconds: float, quiet_passes: int) -> float:
    """The delay after the `quiet_passes`-th converged pass in a row (1 = the first): one resync
    period, doubling with each further quiet pass up to STABLE_RECHECK_MAX_MULTIPLE periods."""
    multiple = 2.0 ** max(quiet_passes - 1, 0)
    return resync_seconds * min(multiple, STABLE_RECHECK_MAX_MULTIPLE)
