"""The cluster's PodDisruptionBudget: how many member pods must stay ready through voluntary
disruptions (drains, evictions), as a pure decision next to the membership planner's. It is
an object of its own, not a membership step, so the supervisor keeps it current on every pass
alongside the one membership action."""
from __future__ import annotations

from etcd_operator.actions import SetDisruptionBudget
from etcd_operator.manifests import disruption_budget_name
from etcd_operator.observed import ObservedCluster, ObservedDisruptionBudget


def min_available(observed: ObservedCluster) -> tuple[int, int]:
    """(quorum, of how many voting members): of spec.size, or of the members etcd lists now when
    there are more (mid-resize, mid-upgrade), so a disruption never costs quorum either way."""
    spec = observed.cluster.require_spec()
    voters = max(spec.size, len(observed.voting_members))
    return voters // 2 + 1, voters


def plan_disruption_budget(observed: ObservedCluster, current: ObservedDisruptionBudget | None) -> SetDisruptionBudget | None:
    """Create the budget if missing; update it when the quorum changed (only with a member list:
    without one, the size etcd runs at is unknown, and the budget stays as it is)."""
    cluster = observed.cluster
    if cluster.spec is None or cluster.paused or observed.name_problem is not None:
        return None
    wanted, voters = min_available(observed)
    name = disruption_budget_name(cluster.name)
    if current is None:
        return SetDisruptionBudget(name, wanted, True, f"a quorum of {voters} voting members stays available")
    if observed.members is not None and current.min_available != wanted:
        return SetDisruptionBudget(
            name, wanted, False, f"{voters} voting members now need {wanted} for quorum (was {current.min_available})")
    return None
