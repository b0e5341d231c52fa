"""What happens in the world between two operator passes without the operator: the node controller
(NotReady after NODE_NOT_READY_SECONDS without the control plane, the NoExecute taint, pods marked
deleted TAINT_EVICTION_SECONDS later), the scheduler and kubelet (pods placed, started, stopped once
their node confirms), etcd (members start or join by a snapshot of the leader, leaders elected
among a connected majority, writes replicated, the leader's periodic corruption check raising
CORRUPT), and clients writing to whichever cluster has a quorum."""
from __future__ import annotations

import dataclasses

from tests.simulation import tls_model
from tests.simulation.world import (
    GRACE_SECONDS,
    NODE_NOT_READY_SECONDS,
    ORPHAN_POD_GC_SECONDS,
    TAINT_EVICTION_SECONDS,
    Data,
    EtcdState,
    MemberRecord,
    Pod,
    World,
)

CORRUPT = "CORRUPT"
NOSPACE = "NOSPACE"


def settle(world: World, *, zero_id_corrupt: bool = False) -> None:
    """One round of everything but the operator."""
    node_controller(world)
    kubelets(world)
    start_members(world)
    for state in world.etcd.values():
        for record in state.members.values():
            record.started = record.started or world.etcd_of(record.name) is state
        elect(world, state)
        replicate(world, state)
        corruption_check(world, state, zero_id=zero_id_corrupt)
    readiness(world)
    for _, data in world.all_data():
        used = world.max_revision.get(data.cluster_id, 0)
        world.max_revision[data.cluster_id] = max(used, data.revision)


def node_controller(world: World) -> None:
    for node in world.nodes.values():
        if world.reaches_control_plane(node):
            node.not_ready_since = None
            if node.tainted_at is not None and not node.admin_taint:
                node.tainted_at = None
            continue
        if node.not_ready_since is None:
            node.not_ready_since = world.now
        if world.now - node.not_ready_since >= NODE_NOT_READY_SECONDS and node.tainted_at is None:
            node.tainted_at = node.not_ready_since + NODE_NOT_READY_SECONDS
    for pod in world.pods.values():
        node = world.nodes.get(pod.node or "")
        if node is None or node.tainted_at is None or pod.deleting_at is not None:
            continue
        if world.now - node.tainted_at >= TAINT_EVICTION_SECONDS:
            pod.deleting_at = world.now + GRACE_SECONDS
            world.events.append(f"taint eviction marked pod {pod.name} on {node.name} deleted")


def kubelets(world: World) -> None:
    for name in [n for n, pvc in world.pvcs.items() if pvc.deleting and n not in world.pods]:
        del world.pvcs[name]  # the pvc-protection finalizer let it go: no pod uses it
    for name in list(world.pods):
        pod = world.pods[name]
        node = world.nodes.get(pod.node or "")
        if node is not None and node.deleted_at is not None and world.now >= node.deleted_at + ORPHAN_POD_GC_SECONDS:
            del world.pods[name]  # the pod garbage collector: its Node is gone (after its quarantine)
            continue
        if pod.deleting_at is not None:
            if node is None or (world.reaches_control_plane(node) and world.now >= pod.deleting_at - GRACE_SECONDS):
                del world.pods[name]  # stopped, and its kubelet confirmed: gone with its emptyDir
                continue
            pod.running = pod.running and node.up
            continue
        if node is None:
            schedule(world, pod)
            continue
        pod.running = node.up and (pod.running or _starts(world, pod))


def schedule(world: World, pod: Pod) -> None:
    usable = [n for n in world.nodes.values() if world.reaches_control_plane(n) and n.tainted_at is None
              and n.deleted_at is None]
    if not usable:
        return
    load = {n.name: sum(p.node == n.name for p in world.pods.values()) for n in usable}
    zone_load = {n.zone: sum(load[m.name] for m in usable if m.zone == n.zone) for n in usable}
    pod.node = min(usable, key=lambda n: (zone_load[n.zone], load[n.name], n.name)).name


def _starts(world: World, pod: Pod) -> bool:
    """Can its etcd start? A recovery seed first takes its data (init containers)."""
    pvc = world.pvcs.get(pod.name)
    if world.spec.uses_persistent_volumes and (pvc is None or pvc.deleting):
        return False
    if not tls_model.load_trust(world, pod):
        return False
    if pod.seed_source is not None and not _seed_takes_data(world, pod):
        return False
    pod.started = True
    return True


def _seed_takes_data(world: World, pod: Pod) -> bool:
    kind, source = pod.seed_source or ("", None)
    cluster_id = 0xC000 + world.next_serial()
    member_id = 0x1000 + world.next_serial()
    if kind == "backup":
        origin: Data = source.data
        bump = pod.seed_bump
    else:
        survivor = world.pods.get(str(source))
        survivor_data = world.data_of(str(source))
        if survivor is None or not survivor.running or survivor_data is None or not world.pods_linked(pod, survivor):
            return False  # the snapshot step cannot reach the survivor: the init container retries
        origin = survivor_data
        bump = pod.seed_bump
    data = origin.copy_for(cluster_id, member_id)
    data = dataclasses.replace(data, revision=data.revision + bump, raft_index=1, uid=world.uid)
    world.lineage_parent[cluster_id] = origin.cluster_id
    world.etcd[cluster_id] = EtcdState(cluster_id, uid=world.uid)
    world.etcd[cluster_id].members[pod.name] = _record(world, pod.name, member_id)
    world.set_data(pod.name, data)
    world.events.append(f"recovery seed {pod.name} restored {kind or 'survivor'} {source if kind != 'backup' else source.name}"
                        f" at revision {origin.revision} (+{bump}) as etcd cluster {cluster_id:x}")
    world.seeded.append((pod.name, kind, origin, data))
    pod.seed_source = None
    return True


def _record(world: World, name: str, member_id: int) -> MemberRecord:
    return MemberRecord(member_id, name, world.peer_url(name))


def start_members(world: World) -> None:
    """Running pods without data: a seed forms a new cluster, another joins the cluster that
    lists it by a snapshot of its leader (if it reaches it)."""
    for name, pod in world.pods.items():
        if not pod.running or world.data_of(name) is not None:
            continue
        if pod.state == "new" and not pod.rejoins_on_data:
            cluster_id = 0xC000 + world.next_serial()
            member_id = 0x1000 + world.next_serial()
            state = EtcdState(cluster_id, uid=world.uid)
            state.members[name] = _record(world, name, member_id)
            state.leader = name
            world.etcd[cluster_id] = state
            world.set_data(name, Data(cluster_id, member_id, uid=world.uid))
            continue
        for state in world.etcd.values():
            record = state.members.get(name)
            group = world.quorum_group(state)
            if record is None or not group or state.leader is None:
                continue
            leader_pod = world.pods[state.leader]
            if not world.pods_linked(pod, leader_pod):
                continue
            leader_data = world.data_of(state.leader)
            assert leader_data is not None
            world.set_data(name, leader_data.copy_for(state.cluster_id, record.id))
            world.events.append(f"{name} joined etcd cluster {state.cluster_id:x} with a snapshot of {state.leader}")
            break


def elect(world: World, state: EtcdState) -> None:
    if world.quorum_group(state):
        return
    best: tuple[tuple[int, int, str], str] | None = None
    for voter in state.voters():
        if world.etcd_of(voter.name) is not state:
            continue
        pod = world.pods[voter.name]
        connected = [m for m in state.voters() if world.etcd_of(m.name) is state
                     and world.pods_linked(pod, world.pods[m.name])]
        if len(connected) < state.quorum():
            continue
        data = world.data_of(voter.name)
        assert data is not None
        if max((world.data_of(m.name).raft_index for m in connected), default=0) > data.raft_index:  # type: ignore[union-attr]
            continue  # raft: a majority votes only for a log at least as long as its own
        key = (data.raft_index, data.revision, voter.name)
        if best is None or key > best[0]:
            best = (key, voter.name)
    state.leader = best[1] if best is not None else None


def replicate(world: World, state: EtcdState) -> None:
    group = world.quorum_group(state)
    if not group or state.leader is None:
        return
    leader = world.data_of(state.leader)
    assert leader is not None
    leader_pod = world.pods[state.leader]
    for record in state.members.values():
        data = world.data_of(record.name)
        if data is None or world.etcd_of(record.name) is not state or data is leader:
            continue
        if record.learner and not world.pods_linked(world.pods[record.name], leader_pod):
            continue
        if record.name in group or record.learner:
            catch_up(data, leader)


def catch_up(data: Data, leader: Data) -> None:
    """Log entries from the leader: the same writes, its own bytes on disk (lineage kept)."""
    data.revision, data.raft_index, data.writes = leader.revision, leader.raft_index, leader.writes
    data.live_bytes, data.history_bytes, data.compacted = leader.live_bytes, leader.history_bytes, leader.compacted
    data.db_size = max(data.db_size, data.in_use)


def corruption_check(world: World, state: EtcdState, *, zero_id: bool) -> None:
    """etcd's periodic check on the leader: the first follower whose hash differs from the
    leader's is alarmed (etcd 3.5; with `zero_id`, member ID 0 as 3.6's compaction check does)."""
    group = world.quorum_group(state)
    if not group or state.leader is None or any(kind == CORRUPT for kind, _ in state.alarms):
        return
    leader = world.data_of(state.leader)
    assert leader is not None
    for name in sorted(group, key=lambda n: state.members[n].id):
        data = world.data_of(name)
        if data is not None and data.lineage != leader.lineage:
            member_id = 0 if zero_id else state.members[name].id
            state.alarms.append((CORRUPT, member_id))
            world.events.append(f"corruption check on leader {state.leader}: CORRUPT raised for member {member_id:x}")
            return


def readiness(world: World) -> None:
    """Ready as the API shows it: the node controller marks pods of a NotReady node unready;
    a pod whose kubelet cannot reach the control plane keeps its last status; otherwise etcd's
    /health?exclude=NOSPACE (a leader, and no CORRUPT alarm)."""
    for name, pod in world.pods.items():
        node = world.nodes.get(pod.node or "")
        if node is not None and not world.reaches_control_plane(node):
            if node.not_ready_since is not None and world.now - node.not_ready_since >= NODE_NOT_READY_SECONDS:
                pod.ready = False  # the node controller marks the pods of a NotReady node unready
            continue
        state = world.etcd_of(name) if node is not None and pod.running else None
        healthy = state is not None and name in world.quorum_group(state)
        pod.ready = healthy and not any(kind == CORRUPT for kind, _ in (state.alarms if state else ()))


def client_writes(world: World, count: int) -> list[str]:
    """Clients write to every cluster with a quorum that accepts writes (either side of a split)."""
    notes = []
    for cluster_id, group in world.serving().items():
        state = world.etcd[cluster_id]
        if world.write_blocked(state) or state.leader is None:
            continue
        leader = world.data_of(state.leader)
        assert leader is not None
        for _ in range(count):
            if leader.db_size + world.write_size > world.quota:
                state.alarms.append((NOSPACE, state.members[state.leader].id))
                notes.append(f"NOSPACE raised on {state.leader} ({leader.db_size} bytes, quota {world.quota})")
                break
            write = world.next_serial()
            leader.revision += 1
            leader.raft_index += 1
            leader.writes = leader.writes | {write}
            leader.live_bytes += world.write_size // 2
            leader.history_bytes += world.write_size // 2
            leader.db_size = max(leader.db_size, leader.in_use)
            world.committed[write] = (cluster_id, leader.revision)
        for name in group:
            data = world.data_of(name)
            if data is not None and data is not leader:
                catch_up(data, leader)
    return notes
