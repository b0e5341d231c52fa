"""Faults drawn from the run's `random.Random(seed)`: partitions between any two parties (the
operator and the nodes) or around a zone, node loss (with its local data), taint eviction,
corruption of any member (the leader too), a CORRUPT alarm with member ID 0, a burst of client
writes (NOSPACE), a lost CA Secret, the EtcdCluster deleted and recreated under its name.
Crashes of the operator between two writes are drawn by the loop (run.py). Each fault returns
what it did (None: it did not apply), which goes into the schedule printed for a failing seed.

To add a fault: write `def my_fault(world, rng) -> str | None` and add it to FAULTS with a weight."""
from __future__ import annotations

import random
from collections.abc import Callable

from etcd_common.api import constants as c
from etcd_operator import reasons
from tests.simulation import tls_model
from tests.simulation.physics import CORRUPT, client_writes
from tests.simulation.world import CLUSTER, OPERATOR, TAINT_EVICTION_SECONDS, World, raw_cluster

Fault = Callable[[World, random.Random], str | None]


def parties(world: World) -> list[str]:
    return [OPERATOR, *sorted(world.nodes)]


def partition_link(world: World, rng: random.Random) -> str | None:
    a, b = rng.sample(parties(world), 2)
    world.cuts.add(frozenset((a, b)))
    return f"partition {a} <-> {b}"


def partition_zone(world: World, rng: random.Random) -> str | None:
    """A zone cut off from the rest; the operator (and the control plane) lives in zone a."""
    zone = rng.choice(sorted({n.zone for n in world.nodes.values()}))
    inside = [n for n, node in world.nodes.items() if node.zone == zone] + ([OPERATOR] if zone == "a" else [])
    outside = [p for p in parties(world) if p not in inside]
    for a in inside:
        for b in outside:
            world.cuts.add(frozenset((a, b)))
    return f"partition zone {zone} ({', '.join(sorted(inside))}) from the rest"


def heal(world: World, rng: random.Random) -> str | None:
    if not world.cuts:
        return None
    world.cuts.clear()
    return "the network heals"


def lose_node(world: World, rng: random.Random) -> str | None:
    up = [n for n in sorted(world.nodes) if world.nodes[n].up]
    if len(up) <= 1:
        return None
    node = world.nodes[rng.choice(up)]
    node.up = False
    for pod in world.pods.values():
        if pod.node == node.name:
            pod.data, pod.running = None, False  # the machine and its local disks are gone
    if rng.random() < 0.5:
        node.deleted_at = world.now + rng.randrange(300, 1500, 15)
    gone = f" (its Node object goes at t={node.deleted_at}s)" if node.deleted_at else ""
    return f"node {node.name} lost{gone}"


def taint_node(world: World, rng: random.Random) -> str | None:
    """A NoExecute taint the member pods do not tolerate: they are evicted at once."""
    node = world.nodes[rng.choice(sorted(world.nodes))]
    if node.admin_taint:
        node.admin_taint, node.tainted_at = False, None
        return f"taint removed from {node.name}"
    node.admin_taint, node.tainted_at = True, world.now - TAINT_EVICTION_SECONDS
    return f"NoExecute taint on {node.name}: its pods are evicted"


def corrupt_member(world: World, rng: random.Random) -> str | None:
    running = [name for name in sorted(world.pods) if world.etcd_of(name) is not None]
    if not running:
        return None
    leaders = [name for name in running if world.etcd_of(name).leader == name]  # type: ignore[union-attr]
    name = rng.choice(leaders) if leaders and rng.random() < 0.5 else rng.choice(running)
    data = world.data_of(name)
    assert data is not None
    data.lineage = world.next_serial()
    return f"the data of {name}{' (leader)' if name in leaders else ''} is corrupted (its hash differs)"


def corrupt_alarm_zero(world: World, rng: random.Random) -> str | None:
    serving = world.serving()
    if not serving:
        return None
    state = world.etcd[min(serving)]
    if (CORRUPT, 0) in state.alarms:
        return None
    state.alarms.append((CORRUPT, 0))
    return "CORRUPT alarm raised with member ID 0 (etcd 3.6's compaction check without a majority)"


def write_burst(world: World, rng: random.Random) -> str | None:
    notes = client_writes(world, rng.randint(10, 40))
    return "a burst of client writes" + (f" ({'; '.join(notes)})" if notes else "")


def lose_ca(world: World, rng: random.Random) -> str | None:
    if "ca" not in world.secrets:
        return None
    return tls_model.lose_ca(world)


def recreate_cluster(world: World, rng: random.Random) -> str | None:
    """The EtcdCluster deleted and created again under its name: owned objects are collected."""
    for pod in world.pods.values():
        if pod.deleting_at is None:
            pod.deleting_at = world.now
    for name in list(world.pvcs):
        if name in world.pods:
            world.pvcs[name].deleting = True  # held by the pvc-protection finalizer while its pod lives
        else:
            del world.pvcs[name]
    world.services.clear()
    world.secrets.clear()
    world.secret_cas.clear()
    old = world.uid
    world.raw_cluster = raw_cluster(CLUSTER, world.new_uid("uid"), world.raw_cluster["spec"])
    world.reparse()
    return f"EtcdCluster deleted (uid {old}) and created again under its name (uid {world.uid})"


def annotate_recovery(world: World, rng: random.Random) -> str | None:
    """A person asks for a quorum-loss recovery by annotation, naming the members they know are
    gone (their data is: node lost, emptyDir pod gone, claim deleted), or no one ("please");
    mostly when no member serves, now and then on a cluster that has quorum. Once status says
    the request is refused, they take the annotation away."""
    annotations = world.raw_cluster["metadata"].setdefault("annotations", {})
    if c.ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR in annotations and \
            (world.raw_cluster.get("status") or {}).get("reason") == reasons.QUORUM_RECOVERY_REFUSED:
        del annotations[c.ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR]
        world.reparse()
        return f"a person removes the refused {c.ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR} annotation"
    serving = [cid for cid in world.serving() if world.etcd[cid].uid == world.uid]
    if serving and rng.random() < 0.8:
        return None
    gone = sorted({m.name for state in world.etcd.values() if state.uid == world.uid for m in state.voters()
                   if world.data_of(m.name) is None and not world.member_runs(m.name)})
    value = ",".join(gone) or f"please-{world.now}"
    annotations[c.ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR] = value
    world.reparse()
    return f"a person annotates {c.ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR}={value}"


def slow_disk(world: World, rng: random.Random) -> str | None:
    """A member's disk is slow: its defragmentations fail (time out) for a while."""
    running = [name for name in sorted(world.pods) if world.etcd_of(name) is not None]
    if not running:
        return None
    pod = world.pods[rng.choice(running)]
    pod.defragment_fails_until = world.now + rng.randrange(60, 900, 20)
    return f"{pod.name}'s disk is slow: its defragmentations fail until t={pod.defragment_fails_until}s"


FAULTS: tuple[tuple[float, Fault], ...] = (
    (0.020, partition_link),
    (0.015, partition_zone),
    (0.030, heal),
    (0.008, lose_node),
    (0.006, taint_node),
    (0.010, corrupt_member),
    (0.003, corrupt_alarm_zero),
    (0.020, write_burst),
    (0.006, lose_ca),
    (0.002, recreate_cluster),
)


# Drawn from a second generator derived from the seed (run.py), so that adding them left the
# schedules of FAULTS, and so every seed found before, as they were.
EXTRA_FAULTS: tuple[tuple[float, Fault], ...] = (
    (0.030, annotate_recovery),
    (0.010, slow_disk),
)


def inject(world: World, rng: random.Random, faults: tuple[tuple[float, Fault], ...] = FAULTS) -> list[str]:
    """Each fault, with its probability this step."""
    done = []
    for weight, fault in faults:
        if rng.random() < weight * world.fault_scale:
            what = fault(world, rng)
            if what:
                done.append(what)
    return done
