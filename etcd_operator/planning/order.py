"""The decision: `plan_next_action(observed, policy) -> Action`, a pure function of one pass's
observation and the operator's settings. The supervisor executes the action and observes again;
nothing is remembered between passes, so the operator may die at any instant and the next pass
finishes the job.

etcd has no "desired membership"; the goal is spec.size voting members, all healthy, all running
the spec's image and pod policy. The rules below run in order and the first that answers wins: the
order is the safety argument. The spec and names are checked before anything is created; services
and certificates exist before the seed; a recovery in progress is stepped before the member list is
trusted; without a member list only pods are created or dead ones deleted; with one, nothing is
changed while health is unknown or quorum is lost, dead members go before anything is added, and
every action that takes a member away first drains it from the client service (`drained`).
Each rule's own docstring says what it does and why.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Final

from etcd_operator.actions import Action
from etcd_operator.observed import ObservedCluster
from etcd_operator.planning import (
    bootstrap,
    maintenance,
    member_pods,
    membership,
    recovery,
    removal,
    spec_checks,
    tls,
)
from etcd_operator.planning.context import Context, PlanningPolicy
from etcd_operator.planning.draining import client_selector_outdated, drained, serve_drained_again

Rule = Callable[[Context], Action | None]

RULES: Final[tuple[Rule, ...]] = (
    # The spec, names and certificates: nothing is created before they are fine.
    spec_checks.paused,
    spec_checks.spec_invalid,
    spec_checks.names_taken,
    spec_checks.change_refused,
    tls.certificates_due,
    # What members need before they start.
    bootstrap.services_missing,
    bootstrap.peer_service_hides_unready,
    client_selector_outdated,
    member_pods.pod_never_ran_under_old_spec,
    recovery.recovery_in_progress,
    # No member answered `member list`: bootstrap, restart on volumes, or report.
    bootstrap.without_member_list,
    # With the member list. First the members whose pods are gone, and nothing without quorum.
    drained(member_pods.restart_members_without_pods),
    drained(member_pods.terminal_pod_on_volume),
    drained(removal.health_unknown),
    drained(removal.no_quorum),
    drained(removal.dead_members),
    drained(member_pods.leftovers),
    member_pods.stale_leaving_marks,
    drained(member_pods.pods_terminating),
    drained(member_pods.restarting_in_place),
    # Then alarms, stuck members, membership toward spec.size, upgrades, maintenance.
    drained(maintenance.alarms),
    drained(removal.stuck_members),
    drained(member_pods.retry_pod_creates),
    drained(membership.learners),
    drained(removal.unhealthy_voters),
    drained(membership.scale_to_size),
    drained(membership.upgrade_outdated),
    drained(maintenance.defragmentation),
    # Converged: members left drained serve again, then the next step of a CA rotation.
    serve_drained_again,
    tls.next_rotation_step,
    membership.converged,
)


DEFAULT_POLICY: Final = PlanningPolicy()


def plan_next_action(observed: ObservedCluster, policy: PlanningPolicy = DEFAULT_POLICY) -> Action:
    """The one action this pass takes (`policy` defaults to waiting for unhealthy members forever)."""
    context = Context(observed, policy)
    for rule in RULES:
        action = rule(context)
        if action is not None:
            return action
    raise AssertionError("membership.converged always answers")  # pragma: no cover
