"""The convergence simulation (test_planning_convergence.World) with faults: voting members that
turn unhealthy for a few passes, learners that lag or do not answer, and etcd refusing
membership changes. Safety invariants hold after every step (never a quorum lost by our own
action, never a second learner), and once the faults stop the cluster converges. Each seed is
one deterministic fault schedule (random.Random(seed)), so a failure is reproducible. The last
test lets hypothesis choose the sizes, the sequence of spec changes and the fault schedule, and
shrink any failure to a minimal one (derandomized under CI=true, so CI is reproducible)."""
from __future__ import annotations

import dataclasses
import os
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from etcd_operator import actions
from etcd_operator.observed import MemberHealth, ObservedCluster
from etcd_operator.planning import PlanningPolicy, plan_next_action
from tests.unit.etcd_operator.simulated_world import World, converged_state, new_world, resize

FAULT_PASSES = 80  # faults happen in the first passes of each run, then stop
MAX_PASSES = 600
MEMBERSHIP_CHANGES = (actions.AddMember, actions.PromoteMember, actions.RemoveMember, actions.MoveLeader)
SEEDS = range(30)


class FaultyWorld:
    """Wraps a World: its observations get faults, and etcd refuses some membership changes."""

    def __init__(self, world: World, rng: random.Random, *, unhealthy_timeout: float | None = None) -> None:
        self.world = world
        self.rng = rng
        self.unhealthy_timeout = unhealthy_timeout
        self.unhealthy: dict[str, int] = {}  # member -> passes left unhealthy
        self.unhealthy_now: set[str] = set()  # unhealthy in the latest observation
        self.lagging: dict[str, int] = {}  # learner -> passes left lagging (or silent)
        self.passes = 0
        self.refused = 0
        self.faults_seen = 0

    @property
    def faulty(self) -> bool:
        return self.passes <= FAULT_PASSES

    def observe(self) -> ObservedCluster:
        self.passes += 1
        observed = self.world.observe()
        self.unhealthy_now = set()
        if not self.faulty or observed.members is None:
            self.unhealthy.clear()
            self.lagging.clear()
            return observed
        voters = [m.member_name for m in observed.voting_members if m.member_name in observed.health]
        # Unhealthy voters, never so many that the rest lose quorum (a minority of them).
        candidates = sorted(set(voters) - set(self.unhealthy))
        room = (len(voters) - 1) // 2 - len(self.unhealthy)
        if candidates and room > 0 and self.rng.random() < 0.4:
            for name in self.rng.sample(candidates, self.rng.randint(1, min(room, len(candidates)))):
                self.unhealthy[name] = self.rng.randint(1, 6)
        for learner in observed.learners:
            if learner.member_name not in self.lagging and learner.member_name in observed.endpoint_status:
                self.lagging[learner.member_name] = self.rng.randint(0, 5)
        health = dict(observed.health)
        statuses = dict(observed.endpoint_status)
        for name, left in list(self.unhealthy.items()):
            if name in health:
                health[name] = MemberHealth(False, "context deadline exceeded")
                self.unhealthy_now.add(name)
                self.faults_seen += 1
            self.unhealthy[name] = left - 1
            if left <= 1:
                del self.unhealthy[name]
        for name, left in list(self.lagging.items()):
            if left > 0 and name in statuses:
                self.faults_seen += 1
                if left % 2:
                    del statuses[name]  # not answering this pass
                else:
                    statuses[name] = dataclasses.replace(statuses[name], raft_index=10)
                self.lagging[name] = left - 1
        pods = tuple(dataclasses.replace(p, ready=health.get(p.member_name, MemberHealth(p.ready)).healthy)
                     for p in observed.pods)
        return dataclasses.replace(observed, health=health, endpoint_status=statuses, pods=pods)

    def execute(self, action: actions.Action) -> None:
        if self.faulty and isinstance(action, MEMBERSHIP_CHANGES) and self.rng.random() < 0.25:
            self.refused += 1  # etcd said "unhealthy cluster" / "learner not ready": nothing changed
            return
        self.world.execute(action)
        if isinstance(action, (actions.RemoveMember, actions.StopMember)):
            # What etcd sees: the voters left that are healthy must still be a majority of them.
            voters = [m.name for m in self.world.members.values() if not m.learner]
            healthy = [name for name in voters if name in self.world.pods and name not in self.unhealthy_now]
            assert len(healthy) >= len(voters) // 2 + 1, f"{action} left {len(healthy)} of {len(voters)} healthy"


def run_with_faults(faulty: FaultyWorld) -> World:
    world = faulty.world
    faulty.passes = 0
    for _ in range(MAX_PASSES):
        world.settle()
        observed = faulty.observe()
        action = plan_next_action(observed, PlanningPolicy(unhealthy_member_timeout_seconds=faulty.unhealthy_timeout))
        assert not isinstance(action, (actions.RejectSpec, actions.ReportMembersLost)), action
        assert not isinstance(action, actions.ReportQuorumLoss), f"quorum reported lost with a minority faulty: {action}"
        if isinstance(action, actions.NoOp) and not faulty.faulty:
            return world
        faulty.execute(action)
    raise AssertionError(f"no convergence after {MAX_PASSES} passes: {world.history[-8:]}")


def _spec(pvc: bool, **spec: Any) -> dict[str, Any]:
    if pvc:
        spec["pod"] = {"persistentVolumeClaimSpec": {"accessModes": ["ReadWriteOnce"],
                                                     "resources": {"requests": {"storage": "1Gi"}}}}
    return spec


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("pvc", [False, True], ids=["emptydir", "pvc"])
def test_resize_and_upgrade_converge_through_faults(seed: int, pvc: bool) -> None:
    rng = random.Random(seed)
    faulty = FaultyWorld(new_world(_spec(pvc, size=3, version="3.5.35")), rng)
    world = run_with_faults(faulty)
    assert converged_state(world)[0] == 3
    for step in ({"size": 5}, {"size": 3}, {"version": "3.6.16"}):
        faulty.world = resize(world, **step)
        world = run_with_faults(faulty)
    assert converged_state(world) == (3, {"quay.io/coreos/etcd:v3.6.16"}, True)
    assert faulty.faults_seen and faulty.refused + faulty.faults_seen > 1, \
        "the schedule injected no fault: the test would prove nothing"


@pytest.mark.parametrize("seed", SEEDS)
def test_replacing_stuck_members_keeps_quorum(seed: int) -> None:
    """With the unhealthy-member bound at one pass (the sim's clock moves a minute a pass), every
    unhealthy voter is a candidate for replacement: quorum must hold throughout all the same."""
    faulty = FaultyWorld(new_world({"size": 5}), random.Random(seed), unhealthy_timeout=60.0)
    world = run_with_faults(faulty)
    assert converged_state(world)[0] == 5
    faulty.world = resize(world, size=3)
    assert converged_state(run_with_faults(faulty))[0] == 3



SPEC_CHANGES = st.one_of(
    st.builds(lambda size: {"size": size}, st.integers(min_value=1, max_value=7)),
    st.just({"version": "3.6.16"}),
)


@settings(max_examples=40, deadline=None, derandomize=bool(os.environ.get("CI")), database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(start=st.integers(min_value=1, max_value=7), changes=st.lists(SPEC_CHANGES, min_size=1, max_size=4),
       pvc=st.booleans(), stuck_bound=st.sampled_from([None, 60.0]), rng=st.randoms(use_true_random=False))
def test_any_sequence_of_spec_changes_converges_through_faults(start: int, changes: list[dict[str, Any]], pvc: bool,
                                                              stuck_bound: float | None,
                                                              rng: random.Random) -> None:
    faulty = FaultyWorld(new_world(_spec(pvc, size=start, version="3.5.35")), rng, unhealthy_timeout=stuck_bound)
    world = run_with_faults(faulty)
    expected_size, expected_version = start, "3.5.35"
    assert converged_state(world)[0] == expected_size
    for change in changes:
        faulty.world = resize(world, **change)
        world = run_with_faults(faulty)
        expected_size = change.get("size", expected_size)
        expected_version = change.get("version", expected_version)
        assert converged_state(world) == (expected_size, {f"quay.io/coreos/etcd:v{expected_version}"}, True), \
            (start, changes, world.history[-8:])
