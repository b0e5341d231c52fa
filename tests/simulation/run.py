"""The loop: for one seed, draw the cluster's spec and the world, then step: settle the world,
observe it as the operator would, ask the planner, compute the status the operator writes,
apply the action's writes (a crash may cut them), write the status, check every invariant,
inject faults, let clients write, take backups, advance the clock. `python -m tests.simulation`."""
from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from etcd_common.api import constants as c
from etcd_operator import actions as a
from etcd_operator.observed import ObservedCluster
from etcd_operator.planning import PlanningPolicy, plan_next_action
from etcd_operator.status import compute_status
from tests.simulation import faults, invariants, tls_model
from tests.simulation.effects import Refused, writes_of
from tests.simulation.observe import observe
from tests.simulation.physics import client_writes, settle
from tests.simulation.world import MIB, Backup, Data, World, new_world

STEP_SECONDS = 20
STEPS = 120
FAULT_STEPS = 80  # faults in the first steps; then the network heals and the world settles
CRASH_RATE = 0.03
BACKUP_EVERY = 30  # steps
Planner = Callable[[ObservedCluster, PlanningPolicy], a.Action]


@dataclass
class Result:
    seed: int
    violations: list[str] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)
    schedule: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    step: int = -1

    @property
    def ok(self) -> bool:
        return not self.violations


def draw_config(rng: random.Random) -> dict[str, Any]:
    size = rng.choice((3, 3, 3, 5, 1))
    spec: dict[str, Any] = {"size": size, "version": rng.choice(("3.6.16", "3.5.35"))}
    pod: dict[str, Any] = {}
    if rng.random() < 0.35:
        pod["persistentVolumeClaimSpec"] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if rng.random() < 0.25:
        pod["etcdEnv"] = [{"name": "ETCD_QUOTA_BACKEND_BYTES", "value": str(rng.choice((8, 16, 32)) * MIB)}]
    if pod:
        spec["pod"] = pod
    if rng.random() < 0.5:
        spec["recovery"] = {"quorumLoss": c.QUORUM_LOSS_FROM_SURVIVOR}
    alarms = {}
    if rng.random() < 0.2:
        alarms["replaceCorruptMembers"] = False
    if rng.random() < 0.15:
        alarms["recoverNoSpace"] = False
    if alarms:
        spec["alarms"] = alarms
    if rng.random() < 0.12:
        spec["TLS"] = {"issued": {}}
    return {"spec": spec, "zero_id_corrupt": rng.random() < 0.3, "old_backup": rng.random() < 0.5,
            "write_kib": rng.choice((16, 64, 256, 1024)), "fault_scale": rng.choice((0.5, 1.0, 2.0)),
            "nodes_per_zone": rng.choice((1, 1, 2))}


def build_world(rng: random.Random, config: dict[str, Any]) -> World:
    world = new_world(config["spec"], nodes_per_zone=config["nodes_per_zone"])
    world.zero_id_corrupt = config["zero_id_corrupt"]
    world.write_size = config["write_kib"] * 1024
    world.fault_scale = config["fault_scale"]
    if config["old_backup"]:
        revision = rng.randrange(100, 3000)
        old = Data(0xB000, 0xB001, revision=revision, raft_index=revision, uid="uid-before", lineage=0)
        # A backup of an earlier incarnation; taken before backups recorded their incarnation, or not.
        take_backup(world, "before-recreate", old, "uid-before", recorded=config.get("old_backup_recorded", True))
    if world.spec.issued_tls is not None:
        tls_model.issue(world, ("ca",))
    return world


def take_backup(world: World, name: str, data: Data, uid: str, *, recorded: bool = True) -> None:
    """An EtcdBackup's status as the backup operator writes it (backup_operator/status.py): the
    incarnation (lastBackup.etcdClusterID in hex, etcdClusterUID) unless `recorded` is False."""
    raw = {"metadata": {"name": name, "namespace": world.cluster.namespace, "uid": f"backup-{name}", "generation": 1},
           "spec": {"storageType": "S3", "s3": {"path": f"bucket/etcd/{name}", "awsSecret": "aws"},
                    "etcdCluster": {"name": world.cluster.name}},
           "status": {"succeeded": True, "etcdRevision": data.revision,
                      "lastBackup": {"key": f"etcd/{name}_v{data.revision}", "size": 4096, "sha256": "b" * 64,
                                     "etcdRevision": data.revision}}}
    if recorded:
        raw["status"]["lastBackup"].update({"etcdClusterID": f"{data.cluster_id:x}", "etcdClusterUID": uid})
    world.backups[name] = Backup(name, data.revision, data.cluster_id, uid, Data(**vars(data)), raw)


def periodic_backup(world: World) -> None:
    for cid in world.serving():
        state = world.etcd[cid]
        data = world.data_of(state.leader or "")
        if data is not None and state.uid == world.uid and not any(k == "CORRUPT" for k, _ in state.alarms):
            take_backup(world, "periodic", data, world.uid)
            return


def suffix(rng: random.Random) -> str:
    return "".join(rng.choice(c.NAME_SUFFIX_ALPHABET) for _ in range(c.NAME_SUFFIX_LENGTH))


def writes_refused(world: World) -> str:
    serving = {cid: g for cid, g in world.serving().items() if world.etcd[cid].uid == world.uid}
    if not serving:
        return "no etcd cluster of this incarnation has a quorum"
    reasons = [world.write_blocked(world.etcd[cid]) for cid in serving]
    return "" if any(not r for r in reasons) else "; ".join(reasons)


def apply(world: World, action: a.Action, observed: ObservedCluster, rng: random.Random) -> tuple[str, bool]:
    """The action's writes, maybe cut by a crash; returns (what happened, status written)."""
    writes = writes_of(world, action, observed)
    crash_at = rng.randrange(len(writes) + 1) if rng.random() < CRASH_RATE else None
    for index, (what, write) in enumerate(writes):
        if crash_at == index:
            return f"operator crashed before '{what}'", False
        try:
            write()
        except Refused as refused:
            return f"'{what}' failed: {refused}", True
    if crash_at == len(writes):
        return "operator crashed before writing status", False
    return "", True


def step(world: World, rng: random.Random, planner: Planner, facts: invariants.StepFacts, result: Result,
         number: int) -> None:
    world.events, world.removed, world.seeded, world.disarmed_unfit, world.defragmented = [], [], [], [], []
    settle(world, zero_id_corrupt=world.zero_id_corrupt)
    observed = observe(world, suffix(rng))
    action = planner(observed, PlanningPolicy())
    status = compute_status(observed, action, now=world.observed_at)
    facts.status, facts.writes_refused = status, writes_refused(world)
    claims = invariants._condition(status, "Available") == "True" and \
        invariants._condition(status, "AlarmRaised") != "True"
    if claims and facts.writes_refused:
        facts.refused_since = world.now if facts.refused_since is None else facts.refused_since
    else:
        facts.refused_since = None
    outcome, status_written = apply(world, action, observed, rng)
    if status_written and status != world.raw_cluster.get("status"):
        world.raw_cluster["status"] = status
        world.reparse()
    result.trace.append(f"[{number:3d}] t={world.now:5d}s {type(action).__name__}: {action.describe()[:200]}"
                        + (f" -- {outcome}" if outcome else "") + "".join(f"\n        . {e}" for e in world.events))
    if outcome.startswith("operator crashed"):
        result.schedule.append(f"step {number}: {outcome}")


def run_seed(seed: int, *, planner: Planner = plan_next_action, steps: int = STEPS) -> Result:
    rng = random.Random(seed)
    extra = random.Random(f"extra-{seed}")  # draws added later: the first generator's schedules stay as they were
    config = draw_config(rng)
    config["old_backup_recorded"] = extra.random() < 0.7
    if "TLS" not in config["spec"] and extra.random() < 0.12:
        config["spec"]["TLS"] = {"issued": {}}
    world = build_world(rng, config)
    result = Result(seed, config=config)
    facts = invariants.StepFacts()
    for number in range(steps):
        step(world, rng, planner, facts, result, number)
        violations = invariants.check(world, facts)
        if violations:
            result.violations, result.step = violations, number
            return result
        happened = faults.inject(world, rng) + faults.inject(world, extra, faults.EXTRA_FAULTS) \
            if number < FAULT_STEPS else []
        if number == FAULT_STEPS:
            happened = [h for h in [faults.heal(world, rng)] if h]
        for what in happened:
            result.schedule.append(f"step {number} (t={world.now}s): {what}")
            result.trace.append(f"        ! {what}")
        notes = client_writes(world, rng.randint(0, 3))
        result.trace.extend(f"        . {note}" for note in notes)
        if number % BACKUP_EVERY == BACKUP_EVERY - 1:
            periodic_backup(world)
        world.now += STEP_SECONDS
    return result


def report(result: Result, *, verbose: bool) -> str:
    lines = [f"seed {result.seed}: {'ok' if result.ok else 'VIOLATION at step ' + str(result.step)}"]
    if verbose or not result.ok:
        lines.append(f"  spec: {result.config['spec']}  (other draws: "
                     f"{ {k: v for k, v in result.config.items() if k != 'spec'} })")
    if not result.ok:
        lines += [f"  {v}" for v in result.violations]
        lines.append(f"  schedule (replay: python -m tests.simulation --seed {result.seed} --verbose):")
        lines += [f"    {s}" for s in result.schedule] or ["    (no fault)"]
    if verbose:
        lines += result.trace
    return "\n".join(lines)


PROGRESS_EVERY = 250  # seeds between progress lines of a long run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation", description=__doc__)
    parser.add_argument("--seeds", type=int, default=200, help="how many seeds to run")
    parser.add_argument("--first", type=int, default=0, help="the first seed")
    parser.add_argument("--seed", type=int, help="run this one seed (with --verbose: every step)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else list(range(args.first, args.first + args.seeds))
    started = time.monotonic()
    failed = done = 0
    try:
        for seed in seeds:
            result = run_seed(seed)
            if not result.ok or args.verbose:
                print(report(result, verbose=args.verbose), flush=True)
            failed += not result.ok
            done += 1
            if done % PROGRESS_EVERY == 0 and done < len(seeds):
                print(f"... {done} seed(s) ({seeds[0]}-{seed}), {failed} with a violation, "
                      f"{time.monotonic() - started:.0f}s", flush=True)
    except KeyboardInterrupt:  # a long run stopped by hand: what ran is still reported
        print(f"interrupted: seeds {seeds[0]}-{seeds[0] + done - 1} ran", flush=True)
    print(f"{done} seed(s), {failed} with a violation, {time.monotonic() - started:.1f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
