"""How often a cluster's supervisor re-checks etcd when nothing wakes it.

Events (the cluster, its pods, services, PVCs) wake a supervisor at once, so the periodic
re-check is a safety net: a member failing without its pod changing (a frozen process) still
turns its pod NotReady through the readiness probe, which is an event. A cluster found converged
pass after pass is therefore re-checked less often, up to STABLE_RECHECK_MAX_MULTIPLE resync
periods; any pass that is not a quiet one (an action, a wait, an error) starts over at one.
"""
from __future__ import annotations

STABLE_RECHECK_MAX_MULTIPLE = 3.0
# The controller's own resync (wake every supervisor, restart one whose thread died) is only a net
# under the supervisors' schedules: were it every resync period, it would wake every cluster at
# the same instant, and stretching a stable cluster's interval would change nothing.
CONTROLLER_RESYNC_MULTIPLE = 6.0


def stable_recheck_seconds(resync_seconds: float, quiet_passes: int) -> float:
    """The delay after the `quiet_passes`-th converged pass in a row (1 = the first): one resync
    period, doubling with each further quiet pass up to STABLE_RECHECK_MAX_MULTIPLE periods."""
    multiple = 2.0 ** max(quiet_passes - 1, 0)
    return resync_seconds * min(multiple, STABLE_RECHECK_MAX_MULTIPLE)
