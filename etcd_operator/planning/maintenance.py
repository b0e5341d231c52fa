"""The planner's maintenance rules: etcd's alarms and online defragmentation. Like membership
changes, one step per pass, only with quorum, never two members at once.

Alarms (`alarms`, after the quorum checks, before membership changes):
- An alarm raised for a member that is no longer in the cluster -> DisarmAlarm (a CORRUPT member
  replaced below; etcd would otherwise refuse every write for a member that does not exist).
- CORRUPT for member ID 0 (etcd could not single out a member) -> ReportAlarm, always: never
  disarmed, nothing removed.
- CORRUPT for a member: who etcd named is not trusted (its periodic check runs on the leader and
  names the first follower that differs from the *leader*). The voters' keyspace hashes at one
  revision (`ObservedCluster.hash_kvs`, asked only under CORRUPT) decide: a member whose hash
  differs from one a majority of all voters agree on is removed (leadership moved off it first)
  and `membership.scale_to_size` adds a new member that copies the majority's data, while the
  healthy agreeing members stay a majority; every voter agreeing -> the alarm is disarmed. No
  majority, hashes not comparable (different compactions) or not known -> ReportAlarm: nothing is
  changed. `spec.alarms.replaceCorruptMembers: false`: report only.
- NOSPACE (etcd refuses writes; reads go on, so members stay healthy and in the client service)
  -> with `spec.alarms.recoverNoSpace` (the default): CompactHistory up to the current revision
  (no write can move it meanwhile), then Defragment every member not defragmented since the alarm
  (or with space to reclaim), one at a time, the leader last (MoveLeader first; a member whose
  defragmentation failed waits NO_SPACE_DEFRAGMENT_RETRY_SECONDS, the others go meanwhile), then
  DisarmAlarm once the data in use fits the quota (`ClusterSpec.effective_quota_bytes`: the etcdEnv
  quota too) with room to write and every database file is below it. If it does not fit (nothing left to
  compact), ReportAlarm says so; a larger spec.backendQuota rolls the members (`membership.upgrade_outdated`) and the
  alarm is disarmed after.

Defragmentation (`defragmentation`, only when nothing else is to do: every member healthy and up to date,
no learner, no alarm, inside `spec.defragmentation.window`): a member whose reclaimable space
(database size minus size in use) passes `thresholdPercent` of its database and
`minimumFreeSize`, or whose database passes QUOTA_PRESSURE_RATIO of the quota with
PRESSURE_RECLAIM_RATIO of it reclaimable, is defragmented: followers first (most to reclaim
first), the leader last after leadership moved away. The member is drained from the client
service first (`draining.drain_first`); a failed defragmentation is retried after
DEFRAGMENT_RETRY_SECONDS.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from etcd_common.api.etcd_cluster import ClusterSpec
from etcd_common.etcd.alarms import CORRUPT, NOSPACE, Alarm
from etcd_common.etcd.types import EndpointStatus, Member
from etcd_operator.actions import (
    Action,
    CompactHistory,
    Defragment,
    DisarmAlarm,
    MaintenanceReason,
    MoveLeader,
    RemoveMember,
    ReportAlarm,
    Wait,
)
from etcd_operator.observed import ObservedCluster, ObservedPod, as_utc, parse_timestamp, seconds_since
from etcd_operator.planning.findings import CONDITION_ALARM_RAISED

if TYPE_CHECKING:
    from etcd_operator.planning.context import Context

MIB = 1024 * 1024
# Routine defragmentation of a member that failed one waits this long.
DEFRAGMENT_RETRY_SECONDS = 600.0
# A database past this fraction of the quota is watched closely (re-checked every few seconds: it
# may fill with no Kubernetes event to announce it) ...
NEAR_QUOTA_RATIO = 0.5
# ... and past this one defragmented early ...
QUOTA_PRESSURE_RATIO = 0.8
# ... when at least this fraction of it would be reclaimed.
PRESSURE_RECLAIM_RATIO = 0.1
# Under NOSPACE a member with this much to reclaim (and NO_SPACE_RECLAIM_RATIO of its database)
# is defragmented; after a defragmentation almost nothing is left to reclaim.
NO_SPACE_RECLAIM_BYTES = 1 * MIB
NO_SPACE_RECLAIM_RATIO = 0.05
# NOSPACE is disarmed only when every member's data in use is below this fraction of the quota:
# disarmed any fuller, the next writes would raise it again at once.
FITS_QUOTA_RATIO = 0.9
# Under NOSPACE a member whose defragmentation failed is tried again only after this long (the
# next member is defragmented meanwhile): no tight loop of drain, failure and re-serve on one member.
NO_SPACE_DEFRAGMENT_RETRY_SECONDS = 60.0
# A CORRUPT alarm raised for member ID 0 (etcd 3.5's periodic check, 3.6's compaction hash check
# without a majority): etcd could not say which member is wrong, so neither can the operator.
CLUSTER_WIDE_CORRUPT = (
    "raised for member ID 0 (the whole cluster: etcd's corruption check found the members' data "
    "disagreeing and could not single out a member): etcd refuses every write until it is disarmed; "
    "nothing is changed and the alarm is never disarmed by the operator: compare the members' data "
    "(etcdctl endpoint hashkv --rev=<revision> on each member), replace the odd one or restore from a "
    "backup, then disarm it (etcdctl alarm disarm)")


def alarms(context: Context) -> Action | None:
    """etcd's alarms (see the module): a stale one disarmed, CORRUPT members replaced or reported,
    NOSPACE recovered step by step."""
    return plan_alarms(context.observed, context.spec, context.outdated)


def defragmentation(context: Context) -> Action | None:
    """Routine online defragmentation, one member at a time (see the module)."""
    return plan_defragmentation(context.observed, context.spec, context.outdated)


def plan_alarms(observed: ObservedCluster, spec: ClusterSpec, outdated: dict[str, str]) -> Action | None:
    """The next alarm step (see the module docstring); None: no alarm needs a step now."""
    members = observed.members or ()
    known = {member.id for member in members}
    for alarm in observed.alarms:
        # NOSPACE is the cluster's: disarmed only once the data fits (`_plan_no_space`), whichever
        # member raised it.
        if alarm.member_id not in known and not alarm.cluster_wide and alarm.kind != NOSPACE:
            return DisarmAlarm(alarm, f"member {alarm.member_id:x} is no longer in the cluster",
                               raised_for_seconds=alarm_raised_seconds(observed))
    corrupt = _plan_corrupt(observed, spec)
    if corrupt is not None:
        return corrupt
    if observed.alarmed(NOSPACE) and spec.alarms.recover_no_space:
        return _plan_no_space(observed, spec, outdated)
    return None


def plan_defragmentation(observed: ObservedCluster, spec: ClusterSpec, outdated: dict[str, str]) -> Action | None:
    """The next member to defragment (see the module docstring); None: no member needs it now."""
    policy = spec.defragmentation
    voters = observed.voting_members
    if (not policy.enabled or observed.alarms or outdated or observed.learners or len(voters) != spec.size
            or observed.unhealthy_voters):
        return None
    if observed.observed_at is not None and not policy.window_open(observed.observed_at):
        return None
    candidates = [m for m in voters if _fragmented(observed, spec, m) and not _failed_recently(observed, m)]
    return _defragment_next(observed, candidates, "fragmented")


def near_quota(observed: ObservedCluster, spec: ClusterSpec) -> bool:
    """Is a member's database past NEAR_QUOTA_RATIO of the quota?"""
    limit = NEAR_QUOTA_RATIO * spec.effective_quota_bytes
    return any(status.db_size >= limit for status in observed.endpoint_status.values())


def alarm_raised_seconds(observed: ObservedCluster) -> float | None:
    """Since status first reported the alarm (its condition's transition), if known."""
    seconds = seconds_since(observed, _alarm_raised_at(observed))
    return None if seconds is None else max(seconds, 0.0)


def _alarm_raised_at(observed: ObservedCluster) -> datetime | None:
    """When status first reported the raised alarm (None: not reported yet)."""
    condition = observed.cluster.recorded.condition(CONDITION_ALARM_RAISED)
    if condition is None or condition.status != "True":
        return None
    since = parse_timestamp(condition.last_transition_time)
    return as_utc(since) if since is not None else None


def _defragmented_since(observed: ObservedCluster, member: Member, since: datetime | None) -> bool:
    """Was the member defragmented after the alarm was raised? A follower may go on reporting the
    space compaction freed as in use until its next write, which NOSPACE holds back: every member
    is defragmented once in the recovery, whatever it reports. (Alarm time unknown: trust the report.)"""
    if since is None:
        return True
    pod = observed.pod(member.member_name)
    done = pod.defragmented_at if pod is not None else None
    if done is None:
        return False
    return as_utc(done) >= since


def reclaimable_bytes(status: EndpointStatus) -> int:
    return max(status.db_size - status.db_size_in_use, 0)


# ---------------------------------------------------------------------------------------------
# CORRUPT


def _plan_corrupt(observed: ObservedCluster, spec: ClusterSpec) -> Action | None:
    raised = observed.alarmed(CORRUPT)
    if not raised:
        return None
    if any(alarm.cluster_wide for alarm in raised):
        return ReportAlarm(CORRUPT, CLUSTER_WIDE_CORRUPT)
    named = ", ".join(_member_name(observed, alarm.member_id) for alarm in raised)
    if not spec.alarms.replace_corrupt_members:
        return ReportAlarm(CORRUPT, f"raised for {named}; spec.alarms.replaceCorruptMembers is false, so nothing "
                                    f"is changed: replace the member or restore from a backup")
    verdict = compare_hashes(observed)
    if isinstance(verdict, str):
        return ReportAlarm(CORRUPT, f"raised for {named}: {verdict}; nothing is changed: compare the members' data "
                                    f"(etcdctl endpoint hashkv --rev) and replace the odd one or restore from a backup")
    majority, minority = verdict
    revision = observed.hash_kv_revision
    if not minority:
        return _disarm_agreed(observed, raised[0], majority)
    alarmed = {alarm.member_id for alarm in raised}
    victim = min(minority, key=lambda m: (m.id not in alarmed, m.member_name))
    sound = [m for m in majority if observed.is_healthy(m)]
    voters_after = len(observed.voting_members) - 1
    if voters_after < 1 or len(sound) < voters_after // 2 + 1:
        return ReportAlarm(CORRUPT, (
            f"raised for {named}: {victim.member_name}'s keyspace hash at revision {revision} disagrees with a "
            f"majority's, but too few of that majority are healthy to remove it; nothing is removed yet"))
    if victim.id == observed.leader_id:
        target = min(sound, key=lambda m: m.member_name)
        return MoveLeader(victim.member_name, victim.id, target.member_name, target.id,
                          f"{victim.member_name}'s data disagrees with a majority's and it is removed next")
    agree = ", ".join(m.member_name for m in majority)
    return RemoveMember(victim.member_name, victim.id, "replace", (
        f"etcd raised CORRUPT ({named}) and its keyspace hash at revision {revision} disagrees with the one "
        f"{agree} agree on; a new member replaces it with a copy of the majority's data"))


def compare_hashes(observed: ObservedCluster) -> tuple[list[Member], list[Member]] | str:
    """The voting members whose keyspace hash at `hash_kv_revision` a majority of all voting
    members agree on, and the members that answered another; or why no such majority can be told
    (a member not asked or not answering counts against every majority, and hashes taken after
    different compactions cannot be compared)."""
    voters = observed.voting_members
    answered = {m.member_name: observed.hash_kvs[m.member_name] for m in voters if m.member_name in observed.hash_kvs}
    if observed.hash_kv_revision <= 0 or not answered:
        return "the members' keyspace hashes are not known yet"
    compactions = {h.compact_revision for h in answered.values()}
    revisions = {h.hash_revision for h in answered.values()}
    if len(compactions) > 1 or len(revisions) > 1:
        return (f"the members' keyspace hashes cannot be compared (compacted at revisions "
                f"{', '.join(map(str, sorted(compactions)))}, hashed at {', '.join(map(str, sorted(revisions)))})")
    votes = Counter(h.hash for h in answered.values())
    agreed, count = votes.most_common(1)[0]
    if count < len(voters) // 2 + 1:
        missing = [m.member_name for m in voters if m.member_name not in answered]
        unknown = f"; no hash from {', '.join(missing)}" if missing else ""
        return (f"no majority of the {len(voters)} voting members agrees on the keyspace hash at revision "
                f"{observed.hash_kv_revision} (at most {count} do{unknown})")
    majority = [m for m in voters if m.member_name in answered and answered[m.member_name].hash == agreed]
    minority = [m for m in voters if m.member_name in answered and answered[m.member_name].hash != agreed]
    return majority, minority


def _disarm_agreed(observed: ObservedCluster, alarm: Alarm, majority: Sequence[Member]) -> Action:
    """Every answering voter agrees with the majority: the alarm's member is no longer odd (the one
    that disagreed was replaced). Disarmed only when every voting member answered at the revision
    they all stand at; a member still catching up is waited for."""
    revision = observed.hash_kv_revision
    voters = observed.voting_members
    behind = [m.member_name for m in voters if (s := observed.endpoint_status.get(m.member_name)) is None
              or s.revision != revision]
    if len(majority) != len(voters) or behind:
        return Wait(f"CORRUPT: no member's keyspace hash disagrees at revision {revision}, but not every voting "
                    f"member answered at that revision yet ({', '.join(behind) or 'some did not answer'}); asking again")
    return DisarmAlarm(alarm, f"every voting member's keyspace hash agrees at revision {revision}",
                       raised_for_seconds=alarm_raised_seconds(observed))


def _member_name(observed: ObservedCluster, member_id: int) -> str:
    return next((m.member_name for m in observed.members or () if m.id == member_id), f"member {member_id:x}")


# ---------------------------------------------------------------------------------------------
# NOSPACE


def _plan_no_space(observed: ObservedCluster, spec: ClusterSpec, outdated: dict[str, str]) -> Action | None:
    revision = observed.revision
    if observed.history_compacted is None:
        return Wait("NOSPACE: cannot tell yet whether history is compacted; asking again")
    if not observed.history_compacted:
        return CompactHistory(revision, "NOSPACE: etcd refuses writes; old revisions go first")
    since = _alarm_raised_at(observed)
    due = [m for m in observed.voting_members
           if (status := observed.endpoint_status.get(m.member_name)) is not None
           and (reclaimable_bytes(status) >= max(NO_SPACE_RECLAIM_BYTES, NO_SPACE_RECLAIM_RATIO * status.db_size)
                or not _defragmented_since(observed, m, since))]
    # A member whose defragmentation just failed waits its turn again; the others go meanwhile.
    backing_off = [m for m in due if _failed_within(observed, m, NO_SPACE_DEFRAGMENT_RETRY_SECONDS)]
    step = _defragment_next(observed, [m for m in due if m not in backing_off], "no-space")
    if step is not None:
        return step
    if backing_off:
        names = ", ".join(m.member_name for m in backing_off)
        return Wait(f"NOSPACE: the defragmentation of {names} failed; tried again "
                    f"{NO_SPACE_DEFRAGMENT_RETRY_SECONDS:.0f}s after the failure")
    if outdated:
        return None  # a changed quota (or anything else) rolls the members first (`membership.upgrade_outdated`)
    quota = spec.effective_quota_bytes
    in_use = max((s.db_size_in_use for s in observed.endpoint_status.values()), default=0)
    # etcd checks its database file's size against the quota: every file must be below it too.
    size = max((s.db_size for s in observed.endpoint_status.values()), default=0)
    if in_use < FITS_QUOTA_RATIO * quota and size < quota:
        alarm = observed.alarmed(NOSPACE)[0]
        return DisarmAlarm(alarm, f"history compacted and members defragmented: {_mib(in_use)} in use of the "
                                  f"{_mib(quota)} quota", raised_for_seconds=alarm_raised_seconds(observed))
    raise_it = ("raise ETCD_QUOTA_BACKEND_BYTES in spec.pod.etcdEnv (or move it to spec.backendQuota)"
                if spec.quota_from_env else "raise spec.backendQuota")
    return ReportAlarm(NOSPACE, (
        f"the data itself ({_mib(in_use)} in use after compaction and defragmentation, database files up to "
        f"{_mib(size)}) does not fit the {_mib(quota)} quota with room to write: {raise_it} (members restart one "
        f"at a time with it) or delete keys"))


# ---------------------------------------------------------------------------------------------
# Defragmentation: which member, and the leader last


def _defragment_next(observed: ObservedCluster, candidates: Sequence[Member], purpose: MaintenanceReason) -> Action | None:
    """Defragment the follower with the most to reclaim (one already drained for it first: the
    amounts move with every write, and the choice must not flip between two members while the
    drain settles); the leader only when no follower is left, after leadership moved to a healthy
    follower (a single member is defragmented as is)."""
    if not candidates:
        return None
    leader_id = observed.leader_id
    followers = [m for m in candidates if m.id != leader_id]
    if followers:
        chosen = max(followers, key=lambda m: (_drained(observed, m), _reclaimable(observed, m), m.member_name))
        return _defragment(observed, chosen, purpose)
    leader = candidates[0]
    others = [m for m in observed.healthy_voters if m.id != leader.id]
    if not others:
        return _defragment(observed, leader, purpose)
    target = min(others, key=lambda m: m.member_name)
    return MoveLeader(leader.member_name, leader.id, target.member_name, target.id,
                      f"{leader.member_name} is defragmented next and must not lead meanwhile")


def _drained(observed: ObservedCluster, member: Member) -> bool:
    pod = observed.pod(member.member_name)
    return pod is not None and not pod.serving


def _defragment(observed: ObservedCluster, member: Member, purpose: MaintenanceReason) -> Action:
    status = observed.endpoint_status[member.member_name]
    pod = observed.pod(member.member_name)
    if pod is None:
        return Wait(f"{member.member_name} has no pod to defragment")
    why = ("NOSPACE recovery" if purpose == "no-space"
           else f"{_mib(reclaimable_bytes(status))} of its {_mib(status.db_size)} database is reclaimable")
    return Defragment(member.member_name, member.id, pod.name, status.db_size, status.db_size_in_use,
                      purpose, why, pod.uid)


def _fragmented(observed: ObservedCluster, spec: ClusterSpec, member: Member) -> bool:
    status = observed.endpoint_status.get(member.member_name)
    if status is None or status.db_size <= 0:
        return False
    policy = spec.defragmentation
    free = reclaimable_bytes(status)
    if free >= policy.minimum_free_bytes and free * 100 >= policy.threshold_percent * status.db_size:
        return True
    pressed = status.db_size >= QUOTA_PRESSURE_RATIO * spec.effective_quota_bytes
    return pressed and free >= PRESSURE_RECLAIM_RATIO * status.db_size


def _failed_recently(observed: ObservedCluster, member: Member) -> bool:
    return _failed_within(observed, member, DEFRAGMENT_RETRY_SECONDS)


def _failed_within(observed: ObservedCluster, member: Member, seconds: float) -> bool:
    """Did the member's last defragmentation fail (or time out) less than `seconds` ago?"""
    pod = observed.pod(member.member_name)
    if pod is None or not _last_defragment_failed(pod) or observed.observed_at is None:
        return False
    failed_for = seconds_since(observed, pod.defragment_failed_at)
    return failed_for is not None and failed_for < seconds


def _last_defragment_failed(pod: ObservedPod) -> bool:
    return pod.defragment_failed_at is not None and (
        pod.defragmented_at is None or pod.defragmented_at <= pod.defragment_failed_at)


def _reclaimable(observed: ObservedCluster, member: Member) -> int:
    status = observed.endpoint_status.get(member.member_name)
    return reclaimable_bytes(status) if status is not None else 0


def _mib(size: int | float) -> str:
    return f"{size / MIB:.1f} MiB"
