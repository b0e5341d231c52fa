"""Spec checks: a paused cluster, a spec the schema could not refuse, names that are someone else's,
and changes etcd cannot take on a running cluster. Each stops the pass with nothing changed;
fixing the spec recovers."""
from __future__ import annotations

from typing import TYPE_CHECKING

from etcd_operator.actions import Action, Pause, RefuseNames, RejectSpec
from etcd_operator.planning.findings import tls_change_problem, version_change_problem

if TYPE_CHECKING:
    from etcd_operator.planning.context import Context


def paused(context: Context) -> Action | None:
    """spec.paused -> Pause."""
    return Pause() if context.observed.cluster.paused else None


def spec_invalid(context: Context) -> Action | None:
    """Spec problems the schema cannot catch (unsupported version, reserved labels, ...: spec.py)
    -> RejectSpec."""
    cluster = context.observed.cluster
    return RejectSpec(cluster.spec_error or "spec is invalid") if cluster.spec is None else None


def names_taken(context: Context) -> Action | None:
    """A Service name it needs is someone else's (a Service it does not own, or an older
    EtcdCluster `x` next to this `x-client`) -> RefuseNames (ownership.py): nothing created."""
    problem = context.observed.name_problem
    return RefuseNames(problem.reason, problem.message) if problem is not None else None


def change_refused(context: Context) -> Action | None:
    """A version change etcd cannot take (versions.py: a minor downgrade, a skipped minor, 3.5 ->
    3.6 from a patch older than etcd's guide allows; members running an etcd we neither run nor
    upgrade: adoption.py), or a TLS change other than a move to peer and client TLS -> RejectSpec."""
    problem = version_change_problem(context.observed) or tls_change_problem(context.observed)
    return RejectSpec(problem) if problem else None
