"""The planner driven in a loop against a small simulated world (pods start instantly, etcd
membership follows the actions), checking safety invariants after every step and that each
scenario converges to NoOp in a bounded number of passes."""
from __future__ import annotations

from typing import Any

import pytest

from etcd_operator import actions
from etcd_operator.planning import plan_next_action
from tests.unit.etcd_operator.etcd_cluster_builders import PVC_SPEC
from tests.unit.etcd_operator.simulated_world import World, converged_state, new_world, resize

MAX_PASSES = 200


def run(world: World, *, crash_on_add: int | None = None) -> World:
    adds = 0
    for _ in range(MAX_PASSES):
        world.settle()
        action = plan_next_action(world.observe())
        if isinstance(action, actions.NoOp):
            return world
        assert not isinstance(action, (actions.RejectSpec, actions.ReportQuorumLoss, actions.ReportMembersLost)), action
        crash = isinstance(action, actions.AddMember) and adds == crash_on_add
        adds += isinstance(action, actions.AddMember)
        world.execute(action, crash_after_member_add=crash)
    raise AssertionError(f"no convergence after {MAX_PASSES} passes: {world.history[-5:]}")


@pytest.mark.parametrize("pvc", [False, True], ids=["emptydir", "pvc"])
@pytest.mark.parametrize("size", [1, 3, 5])
def test_bootstrap_converges(size: int, pvc: bool) -> None:
    spec: dict[str, Any] = {"size": size}
    if pvc:
        spec["pod"] = {"persistentVolumeClaimSpec": PVC_SPEC}
    world = run(new_world(spec))
    assert converged_state(world) == (size, {"quay.io/coreos/etcd:v3.6.16"}, True)
    assert sum(isinstance(a, actions.CreateSeedMember) for a in world.history) == 1


@pytest.mark.parametrize("pvc", [False, True], ids=["emptydir", "pvc"])
def test_scale_up_down_and_upgrade(pvc: bool) -> None:
    spec: dict[str, Any] = {"size": 3, "version": "3.5.35"}
    if pvc:
        spec["pod"] = {"persistentVolumeClaimSpec": PVC_SPEC}
    world = run(new_world(spec))
    world = run(resize(world, size=5))
    assert converged_state(world)[0] == 5
    world = run(resize(world, size=3))
    assert converged_state(world)[0] == 3
    world = run(resize(world, version="3.6.16"))
    assert converged_state(world) == (3, {"quay.io/coreos/etcd:v3.6.16"}, True)
    upgrades = [a for a in world.history if a.kind == "upgrade"]
    assert upgrades, "the upgrade went through upgrade actions"


def test_crash_between_member_add_and_pod_creation_converges() -> None:
    world = run(new_world({"size": 3}), crash_on_add=1)
    assert converged_state(world)[0] == 3
    assert any(isinstance(a, actions.CreateMemberPod) for a in world.history)


def test_dead_member_replaced() -> None:
    world = run(new_world({"size": 3}))
    victim = next(name for name in world.pods if name != world.leader)
    del world.pods[victim]
    world = run(world)
    assert converged_state(world)[0] == 3
    assert victim not in world.members
    assert any(isinstance(a, actions.RemoveMember) and a.purpose == "replace" for a in world.history)


def test_dead_leader_on_volume_restarts_same_member() -> None:
    world = run(new_world({"size": 3, "pod": {"persistentVolumeClaimSpec": PVC_SPEC}}))
    leader = world.leader
    assert leader is not None
    del world.pods[leader]
    world = run(world)
    assert leader in world.members and converged_state(world)[0] == 3
