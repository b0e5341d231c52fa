"""What every rule reads: one pass's observation, the operator's policy (`PlanningPolicy`), and what
the rules derive from them, each computed once per pass and only when a rule asks for it."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from etcd_common.api.etcd_cluster import ClusterSpec
from etcd_operator.observed import ObservedCluster, ObservedPod
from etcd_operator.planning.findings import outdated_reason
from etcd_operator.planning.member_pods import MembersWithoutPods, find_members_without_pods, stuck_terminating_bound
from etcd_operator.tls.ca_rotation import DEFAULT_TRUST_PROPAGATION_SECONDS


@dataclass(frozen=True)
class PlanningPolicy:
    """What the operator's settings ask of the planner (flags, not observations)."""

    # How long a member may stay unhealthy (a learner: not answer) before it is replaced; None: forever.
    unhealthy_member_timeout_seconds: float | None = None
    # spec.TLS.issued CA rotation: how long a changed Secret takes to reach every mounted volume
    # and every operator's client (etcd_operator/tls/ca_rotation.py).
    trust_propagation_seconds: float = DEFAULT_TRUST_PROPAGATION_SECONDS


class Context:
    """One planning pass: the observation, the policy, and the facts the rules share."""

    def __init__(self, observed: ObservedCluster, policy: PlanningPolicy) -> None:
        self.observed = observed
        self.policy = policy

    @property
    def spec(self) -> ClusterSpec:
        """The parsed spec (rules after `spec_checks.spec_invalid` run only when there is one)."""
        return self.observed.cluster.require_spec()

    @property
    def stuck_bound(self) -> float:
        """Seconds past its grace period a deleted member pod may stay before its member is dead."""
        return stuck_terminating_bound(self.policy.unhealthy_member_timeout_seconds)

    @cached_property
    def without_pods(self) -> MembersWithoutPods:
        """Members etcd lists whose pod is missing or being deleted, sorted into what to do."""
        return find_members_without_pods(self.observed, self.spec, self.stuck_bound)

    @cached_property
    def terminal(self) -> tuple[ObservedPod, ...]:
        """Member pods whose phase is Failed or Succeeded, by name."""
        observed = self.observed
        return tuple(pod for pod in sorted(observed.live_pods, key=lambda p: p.name)
                     if pod.terminal and pod.member_name in observed.member_names)

    @cached_property
    def outdated(self) -> dict[str, str]:
        """Voting members whose pod differs from the spec, with why."""
        observed = self.observed
        return {m.member_name: reason for m in observed.voting_members if (reason := outdated_reason(observed, m))}
