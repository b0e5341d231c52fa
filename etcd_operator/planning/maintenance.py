"""The planner's maintenance rules: etcd's alarms and online defragmentation. Like membership
changes, one step per pass, only with quorum, never two members at once.

Alarms (`alarms`, after the quorum checks, before membership changes):
- An alarm raised for a member that is no longer in the cluster -> DisarmAlarm (a CORRUPT member
  replaced below; etcd would otherwise refuse every write for a member that does not exist).
- CORRUPT on some members while the others (healthy, not corrupt) are a majority of the voters ->
  the corrupt one is removed (leadership moved off it first) and `membership.scale_to_size` adds a new member that
  copies the majority's data. Otherwise ReportAlarm: nothing is removed (which data is right is a
  person's call; the way back is a restore). `spec.alarms.replaceCorruptMembers: false`: report only.
- NOSPACE (etcd refuses writes; reads go on, so members stay healthy and in the client service)
  -> with `spec.alarms.recoverNoSpace` (the default): CompactHistory up to the current revision
  (no write can move it meanwhile), then Defragment every member not defragmented since the alarm
  (or with space to reclaim), one at a time, the leader last (MoveLeader first), then DisarmAlarm
  once the data in use fits the quota with room to write. If it does not fit (nothing left to
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

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from etcd_common.api.etcd_cluster import ClusterSpec
from etcd_common.etcd.alarms import CORRUPT, NOSPACE
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
from etcd_operator.observed import ObservedCluster, as_utc, parse_timestamp, seconds_since
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
        if alarm.member_id not in known:
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
    corrupt_ids = {alarm.member_id for alarm in observed.alarmed(CORRUPT)}
    if not corrupt_ids:
        return None
    corrupt = sorted((m for m in observed.members or () if m.id in corrupt_ids), key=lambda m: m.member_name)
    names = ", ".join(m.member_name for m in corrupt)
    if not spec.alarms.replace_corrupt_members:
        return ReportAlarm(CORRUPT, f"raised for {names}; spec.alarms.replaceCorruptMembers is false, so nothing "
                                    f"is changed: replace the member or restore from a backup")
    voters = observed.voting_members
    sound = [m for m in observed.healthy_voters if m.id not in corrupt_ids]
    victim = corrupt[0]
    voters_after = len(voters) - (0 if victim.is_learner else 1)
    if voters_after < 1 or len(sound) < voters_after // 2 + 1:
        return ReportAlarm(CORRUPT, (
            f"raised for {names} ({len(corrupt)} of {len(voters)} voting members): the sound members are no "
            f"majority to rebuild from, so nothing is removed; compare the members' data "
            f"(etcdctl endpoint hashkv) and restore from a backup"))
    reason = ("etcd raised CORRUPT for it (its data disagrees with the other members'); a new member "
              "replaces it with a copy of the majority's data")
    if victim.id == observed.leader_id and sound:
        target = min(sound, key=lambda m: m.member_name)
        return MoveLeader(victim.member_name, victim.id, target.member_name, target.id,
                          f"{victim.member_name} is corrupt and is removed next")
    return RemoveMember(victim.member_name, victim.id, "replace", reason)


# ---------------------------------------------------------------------------------------------
# NOSPACE


def _plan_no_space(observed: ObservedCluster, spec: ClusterSpec, outdated: dict[str, str]) -> Action | None:
    revision = observed.revision
    if observed.history_compacted is None:
        return Wait("NOSPACE: cannot tell yet whether history is compacted; asking again")
    if not observed.history_compacted:
        return CompactHistory(revision, "NOSPACE: etcd refuses writes; old revisions go first")
    since = _alarm_raised_at(observed)
    candidates = [m for m in observed.voting_members
                  if (status := observed.endpoint_status.get(m.member_name)) is not None
                  and (reclaimable_bytes(status) >= max(NO_SPACE_RECLAIM_BYTES, NO_SPACE_RECLAIM_RATIO * status.db_size)
                       or not _defragmented_since(observed, m, since))]
    step = _defragment_next(observed, candidates, "no-space")
    if step is not None:
        return step
    if outdated:
        return None  # a changed quota (or anything else) rolls the members first (`membership.upgrade_outdated`)
    quota = spec.effective_quota_bytes
    in_use = max((s.db_size_in_use for s in observed.endpoint_status.values()), default=0)
    if in_use < FITS_QUOTA_RATIO * quota:
        alarm = observed.alarmed(NOSPACE)[0]
        return DisarmAlarm(alarm, f"history compacted and members defragmented: {_mib(in_use)} in use of the "
                                  f"{_mib(quota)} quota", raised_for_seconds=alarm_raised_seconds(observed))
    return ReportAlarm(NOSPACE, (
        f"the data itself ({_mib(in_use)} in use after compaction and defragmentation) does not fit the "
        f"{_mib(quota)} quota with room to write: raise spec.backendQuota (members restart one at a time "
        f"with it) or delete keys"))


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
    pod = observed.pod(member.member_name)
    if pod is None or pod.defragment_failed_at is None or observed.observed_at is None:
        return False
    if pod.defragmented_at is not None and pod.defragmented_at > pod.defragment_failed_at:
        return False
    failed_for = seconds_since(observed, pod.defragment_failed_at)
    return failed_for is not None and failed_for < DEFRAGMENT_RETRY_SECONDS


def _reclaimable(observed: ObservedCluster, member: Member) -> int:
    status = observed.endpoint_status.get(member.member_name)
    return reclaimable_bytes(status) if status is not None else 0


def _mib(size: int | float) -> str:
    return f"{size / MIB:.1f} MiB"
