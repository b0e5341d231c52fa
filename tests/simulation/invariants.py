"""The safety invariants, checked after every step. Each is a function of the world (and the
status the operator wrote) returning the violations it finds as sentences; an empty list: it
holds. To add one: write `def my_invariant(world: World, check: StepFacts) -> list[str]` and add
it to INVARIANTS."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.simulation.world import World

# How long status may say Available while writes are refused before it is a violation: the
# kubelet's last Ready stays until the node controller marks the node NotReady (40 s), and the
# operator's pass after that (one step).
STALE_STATUS_SECONDS = 90
# A failed defragmentation is not tried again on the same member sooner than this.
DEFRAGMENT_BACKOFF_SECONDS = 60


@dataclass
class StepFacts:
    """What the loop saw this step besides the world."""

    status: dict[str, Any] = field(default_factory=dict)
    writes_refused: str = ""  # why no cluster of this incarnation accepts writes ("" if one does)
    refused_since: int | None = None  # since when status said Available while writes were refused


def _condition(status: dict[str, Any], kind: str) -> str:
    for condition in status.get("conditions") or ():
        if condition.get("type") == kind:
            return str(condition.get("status"))
    return "Unknown"


def one_serving_cluster_per_identity(world: World, facts: StepFacts) -> list[str]:
    """Never two serving clusters with one identity: two sets of members, each accepting writes."""
    serving = {cid: group for cid, group in world.serving().items()
               if world.etcd[cid].uid == world.uid and not world.write_blocked(world.etcd[cid])}
    if len(serving) < 2:
        return []
    sides = "; ".join(f"etcd cluster {cid:x}: {', '.join(group)}" for cid, group in serving.items())
    return [f"two serving clusters for EtcdCluster {world.cluster.name} (uid {world.uid}), each accepting writes: {sides}"]


def no_committed_write_lost(world: World, facts: StepFacts) -> list[str]:
    """Never a committed write lost while a majority holding it exists: a serving cluster lacks
    a write that a majority of the voters of the cluster that committed it still hold."""
    found = []
    holders_by_cluster: dict[int, list[tuple[str, frozenset[int]]]] = {}
    for name, data in world.all_data():
        holders_by_cluster.setdefault(data.cluster_id, []).append((name, data.writes))
    for cid, group in world.serving().items():
        state = world.etcd[cid]
        leader = world.data_of(state.leader or "")
        if leader is None or state.uid != world.uid:
            continue
        missing = sorted(w for w, (origin, _) in world.committed.items()
                         if w not in leader.writes and world.etcd.get(origin) is not None
                         and world.etcd[origin].uid == state.uid)
        for write in missing:
            origin = world.committed[write][0]
            voters = {m.name for m in world.etcd[origin].voters()}
            holding = sorted(n for n, writes in holders_by_cluster.get(origin, ()) if n in voters and write in writes)
            if voters and len(holding) > len(voters) // 2:
                found.append(f"etcd cluster {cid:x} ({', '.join(group)}) serves without committed write {write} "
                             f"(revision {world.committed[write][1]}) while a majority of the cluster that committed it "
                             f"still holds it: {', '.join(holding)} of {len(voters)} voters")
                break
    return found


# Removals that judge no member broken: a scale-down, a member stopped for good, an outdated
# member replaced (a roll: its replacement joined and caught up first, so no data goes with it).
PLANNED_REMOVALS = ("scale", "stop", "upgrade")


def never_removed_healthy_consistent(world: World, facts: StepFacts) -> list[str]:
    """Never a member removed or rebuilt that a majority of its peers sees as healthy and consistent."""
    found = []
    for name, purpose, removal in world.removed:
        if purpose not in PLANNED_REMOVALS and removal.agree > removal.voters // 2:
            found.append(f"member {name} removed ({purpose}) while {removal.agree} of {removal.voters} voters, a "
                         f"majority, are connected to it with the same data ({removal.detail})")
    return found


def never_replaced_by_corrupt_copy(world: World, facts: StepFacts) -> list[str]:
    """Never a healthy member replaced by a copy of a corrupt one (a new member copies the leader)
    where that makes things worse: sound data remains that the copies can outvote (another sound
    voter: the corruption remedy replaces the minority), or the removed member's own data would
    have survived (on its PVC, or in the emptyDir of a pod nobody deletes). Not flagged: the
    leader is the only voter left and the removed member's emptyDir goes with its pod, deleted by
    Kubernetes (a taint eviction): no action keeps that data, and every new member copies the
    leader, which no one can compare with."""
    return [f"member {name}, whose data is sound, removed to be replaced by a copy of the leader's data, which is "
            f"corrupt ({removal.other_sound_voters} other sound voter(s); its own data "
            f"{'goes with its pod' if removal.doomed else 'would have stayed'})"
            for name, purpose, removal in world.removed
            if purpose == "replace" and removal.sound and not removal.leader_sound
            and (removal.other_sound_voters > 0 or not removal.doomed)]


def no_backup_of_another_incarnation(world: World, facts: StepFacts) -> list[str]:
    """Never a backup of another incarnation restored over live data."""
    return [f"recovery seed {seed} restored a backup of EtcdCluster uid {origin.uid} (etcd cluster "
            f"{origin.cluster_id:x}, revision {origin.revision}) over the data of uid {world.uid}"
            for seed, kind, origin, _data in world.seeded if kind == "backup" and origin.uid != world.uid]


def revisions_not_reused(world: World, facts: StepFacts) -> list[str]:
    """A rebuilt cluster's revision is strictly above any revision the lost majority could have used."""
    found = []
    for seed, kind, origin, data in world.seeded:
        used = world.max_revision.get(origin.cluster_id, 0)
        if kind == "survivor" and used > origin.revision and data.revision <= used:
            found.append(f"recovery seed {seed} starts at revision {data.revision} (survivor {origin.revision}, "
                         f"no bump past it) but members of etcd cluster {origin.cluster_id:x} used revisions up to "
                         f"{used}: revisions are reused and watchers miss events")
    return found


def status_not_available_while_writes_refused(world: World, facts: StepFacts) -> list[str]:
    """Status never Available (with no alarm reported) while writes are refused, beyond the
    Kubernetes staleness window STALE_STATUS_SECONDS."""
    if facts.refused_since is None or world.now - facts.refused_since < STALE_STATUS_SECONDS:
        return []
    return [f"status says Available ({facts.status.get('reason')}: {str(facts.status.get('message'))[:160]}) and "
            f"AlarmRaised {_condition(facts.status, 'AlarmRaised')} for {world.now - facts.refused_since}s while "
            f"writes are refused: {facts.writes_refused}"]


def clients_trusted(world: World, facts: StepFacts) -> list[str]:
    """Never an action that leaves running members distrusting the certificates the operator and
    the clients now hold, or each other's peer certificate, nor the operator distrusting the
    members' server certificate (members load their trust only at start)."""
    if not world.secrets:
        return []
    found = []
    for cid, state in world.etcd.items():
        running = [m.name for m in state.members.values() if world.etcd_of(m.name) is state]
        if state.uid != world.uid or not running:
            continue
        clients = [n for n in running if not world.trusts_clients(world.pods[n])]
        peers = [n for n in running if not world.peer_trusted(world.pods[n])]
        if clients:
            found.append(f"etcd cluster {cid:x}: member(s) {', '.join(clients)} do not trust the CA that signed the "
                         f"operator's and clients' certificates: the operator is locked out and clients are refused")
        if peers:
            found.append(f"etcd cluster {cid:x}: member(s) {', '.join(peers)} do not trust the CA that signed the "
                         f"current peer certificate: they refuse their peers and are refused")
        if not world.operator_trusts_servers():
            found.append(f"etcd cluster {cid:x}: the operator's and clients' CA file does not hold the CA that "
                         f"signed the members' server certificate: they refuse every member")
    return found


def nospace_disarmed_only_when_it_fits(world: World, facts: StepFacts) -> list[str]:
    """NOSPACE is never disarmed while the data does not fit the quota the members run with (it
    would be raised again by the next writes: a loop)."""
    return list(world.disarmed_unfit)


def defragment_retries_back_off(world: World, facts: StepFacts) -> list[str]:
    """A member whose defragmentation failed is not tried again at once (issue 41, finding 5: a
    failure under NOSPACE retried on the same member every pass, flapping it in and out of the
    Service): not within DEFRAGMENT_BACKOFF_SECONDS."""
    return [f"member {name}'s defragmentation failed {world.now - failed}s ago and is tried again already "
            f"(less than {DEFRAGMENT_BACKOFF_SECONDS}s: no backoff)" for name, failed, _ok in world.defragmented
            if failed is not None and world.now - failed < DEFRAGMENT_BACKOFF_SECONDS]


INVARIANTS: tuple[Callable[[World, StepFacts], list[str]], ...] = (
    one_serving_cluster_per_identity,
    no_committed_write_lost,
    never_removed_healthy_consistent,
    never_replaced_by_corrupt_copy,
    no_backup_of_another_incarnation,
    revisions_not_reused,
    status_not_available_while_writes_refused,
    clients_trusted,
    nospace_disarmed_only_when_it_fits,
    defragment_retries_back_off,
)


def check(world: World, facts: StepFacts) -> list[str]:
    return [f"{invariant.__name__}: {message}" for invariant in INVARIANTS for message in invariant(world, facts)]
