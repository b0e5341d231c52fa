"""The maintenance rules (etcd_operator/maintenance.py): NOSPACE recovered step by step (compact,
defragment each member with the leader last, disarm), reported as itself and never as quorum loss;
CORRUPT members replaced only from a sound majority; routine defragmentation by threshold, window
and quota pressure, one drained member at a time."""
from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from etcd_common.etcd.alarms import CORRUPT, NOSPACE, Alarm
from etcd_common.etcd.types import EndpointStatus
from etcd_operator import actions
from etcd_operator.observed import ObservedCluster
from etcd_operator.planning import plan_next_action
from etcd_operator.planning.maintenance import DEFRAGMENT_RETRY_SECONDS
from etcd_operator.status import alarm_event, compute_status
from tests.unit.etcd_operator.etcd_cluster_builders import (
    healthy_cluster,
    make_cluster,
    member_id,
    name,
    plan_through_drain,
    replace_pod,
    with_hash_kvs,
)

MIB = 1024 * 1024
SMALL_QUOTA = {"backendQuota": "16Mi", "defragmentation": {"minimumFreeSize": "1Mi"}}


def _storage(observed: ObservedCluster, sizes: dict[int, tuple[float, float]], *, revision: int = 5000,
             alarms: tuple[Alarm, ...] = (), compacted: bool | None = None) -> ObservedCluster:
    """Members' (database MiB, in use MiB), the store revision, raised alarms, compaction state."""
    statuses = {}
    for member, status in observed.endpoint_status.items():
        index = int(member[-2:])
        size, in_use = sizes.get(index, (1.0, 1.0))
        errors = tuple(f"memberID:{a.member_id} alarm:{a.kind} " for a in alarms)
        statuses[member] = dataclasses.replace(status, db_size=int(size * MIB), db_size_in_use=int(in_use * MIB),
                                               revision=revision, errors=errors)
    return dataclasses.replace(observed, endpoint_status=statuses, alarms=alarms, history_compacted=compacted)


def _no_space(spec: dict[str, Any] | None = None, **storage: Any) -> ObservedCluster:
    observed = healthy_cluster(3, spec={**SMALL_QUOTA, **(spec or {})})
    everyone_full = {1: (16.0, 15.5), 2: (16.0, 15.5), 3: (16.0, 15.5)}
    storage.setdefault("alarms", (Alarm(NOSPACE, member_id(2)),))
    return _storage(observed, storage.pop("sizes", everyone_full), **storage)


# --- NOSPACE


def test_no_space_is_reported_as_itself_not_as_quorum_loss() -> None:
    observed = _no_space(compacted=False)
    status = compute_status(observed, plan_next_action(observed), now=observed.observed_at)
    conditions = {c["type"]: c for c in status["conditions"]}
    assert (status["phase"], status["reason"]) == ("Running", "NoSpaceAlarm"), status
    assert conditions["Available"]["status"] == "True", conditions["Available"]
    assert (conditions["AlarmRaised"]["status"], conditions["AlarmRaised"]["reason"]) == ("True", "NoSpaceAlarm")
    assert conditions["Degraded"]["reason"] == "NoSpaceAlarm"
    assert status["readyCount"] == 3
    assert alarm_event(observed, status) == ("NoSpaceAlarm", conditions["AlarmRaised"]["message"])


def test_no_space_recovery_compacts_first_at_the_current_revision() -> None:
    action = plan_next_action(_no_space(compacted=False, revision=4321))
    assert isinstance(action, actions.CompactHistory) and action.revision == 4321, action


def test_no_space_recovery_waits_when_compaction_state_is_unknown() -> None:
    assert isinstance(plan_next_action(_no_space(compacted=None)), actions.Wait)


def test_no_space_recovery_defragments_followers_first_most_reclaimable_first_drained() -> None:
    sizes = {1: (16.0, 3.0), 2: (16.0, 2.0), 3: (16.0, 4.0)}  # member 1 leads
    observed = _no_space(compacted=True, sizes=sizes)
    drain = plan_next_action(observed)
    assert isinstance(drain, actions.SetServing) and not drain.serving and drain.pod_name == name(2), drain
    action = plan_through_drain(observed)
    assert isinstance(action, actions.Defragment) and action.member_name == name(2) and action.purpose == "no-space"


def test_no_space_recovery_moves_leadership_before_defragmenting_the_leader() -> None:
    sizes = {1: (16.0, 3.0), 2: (3.0, 3.0), 3: (3.0, 3.0)}
    action = plan_through_drain(_no_space(compacted=True, sizes=sizes))
    assert isinstance(action, actions.MoveLeader) and action.from_member_name == name(1), action


def test_no_space_is_disarmed_once_every_member_is_defragmented_and_the_data_fits() -> None:
    sizes = {i: (3.0, 3.0) for i in (1, 2, 3)}
    action = plan_next_action(_no_space(compacted=True, sizes=sizes))
    assert isinstance(action, actions.DisarmAlarm) and action.alarm == Alarm(NOSPACE, member_id(2)), action


def test_no_space_with_live_data_over_the_quota_is_reported_with_what_to_do() -> None:
    sizes = {i: (15.5, 15.2) for i in (1, 2, 3)}
    action = plan_next_action(_no_space(compacted=True, sizes=sizes))
    assert isinstance(action, actions.ReportAlarm) and "spec.backendQuota" in action.describe(), action
    assert action.event_type == "Warning" and not action.has_effect


def test_a_raised_quota_rolls_the_members_before_the_alarm_is_disarmed() -> None:
    sizes = {i: (15.5, 15.2) for i in (1, 2, 3)}
    observed = _no_space(compacted=True, sizes=sizes)
    raised = dataclasses.replace(observed, cluster=healthy_cluster(3, spec={**SMALL_QUOTA, "backendQuota": "64Mi"}).cluster)
    action = plan_through_drain(raised)
    assert isinstance(action, (actions.RemoveMember, actions.UpgradeMember, actions.AddMember)), action


def test_no_space_recovery_can_be_turned_off() -> None:
    observed = _no_space({"alarms": {"recoverNoSpace": False}}, compacted=False)
    action = plan_next_action(observed)
    assert isinstance(action, actions.NoOp), action


# --- CORRUPT


def test_a_corrupt_member_is_replaced_from_the_sound_majority() -> None:
    observed = with_hash_kvs(_storage(healthy_cluster(3), {}, alarms=(Alarm(CORRUPT, member_id(3)),)),
                             {1: 0xAA, 2: 0xAA, 3: 0xBB})
    action = plan_next_action(observed)
    assert isinstance(action, actions.RemoveMember) and action.member_name == name(3) and action.purpose == "replace"


def test_a_corrupt_leader_hands_leadership_over_before_it_is_removed() -> None:
    observed = with_hash_kvs(_storage(healthy_cluster(3), {}, alarms=(Alarm(CORRUPT, member_id(1)),)),
                             {1: 0xBB, 2: 0xAA, 3: 0xAA})
    action = plan_through_drain(observed)
    assert isinstance(action, actions.MoveLeader) and action.from_member_name == name(1), action
    assert action.to_member_name != name(1)


def test_corruption_on_a_majority_is_reported_and_nothing_is_removed() -> None:
    observed = with_hash_kvs(
        _storage(healthy_cluster(3), {}, alarms=(Alarm(CORRUPT, member_id(1)), Alarm(CORRUPT, member_id(2)))),
        {1: 0xAA, 2: 0xBB, 3: 0xCC})
    action = plan_next_action(observed)
    assert isinstance(action, actions.ReportAlarm) and action.alarm_kind == CORRUPT and not action.has_effect, action
    status = compute_status(observed, action, now=observed.observed_at)
    assert status["reason"] == "CorruptAlarm", status


def test_no_space_of_a_member_no_longer_in_the_cluster_is_disarmed_only_once_the_data_fits() -> None:
    """NOSPACE refuses every write whichever member raised it: the member's removal is no reason
    to disarm it while the data still does not fit (the next write would raise it again)."""
    action = plan_next_action(_no_space(compacted=False, alarms=(Alarm(NOSPACE, 0xDEAD),)))
    assert isinstance(action, actions.CompactHistory), action


def test_the_alarm_of_a_member_no_longer_in_the_cluster_is_disarmed() -> None:
    gone = Alarm(CORRUPT, 0xDEAD)
    action = plan_next_action(_storage(healthy_cluster(3), {}, alarms=(gone,)))
    assert isinstance(action, actions.DisarmAlarm) and action.alarm == gone, action


# --- routine defragmentation


@pytest.mark.parametrize(("sizes", "expected"), [
    ({2: (100.0, 40.0)}, name(2)),  # 60 % reclaimable, 60 MiB >= 1 MiB
    ({2: (100.0, 60.0), 3: (100.0, 20.0)}, name(3)),  # most to reclaim first
    ({2: (100.0, 80.0)}, None),  # 20 % < 50 %
    ({2: (1.5, 0.6)}, None),  # 0.9 MiB < minimumFreeSize 1 MiB
])
def test_routine_defragmentation_by_threshold(sizes: dict[int, tuple[float, float]], expected: str | None) -> None:
    observed = _storage(healthy_cluster(3, spec={"defragmentation": {"minimumFreeSize": "1Mi"}}), sizes)
    action = plan_through_drain(observed)
    if expected is None:
        assert isinstance(action, actions.NoOp), action
    else:
        assert isinstance(action, actions.Defragment) and action.member_name == expected, action


def test_a_database_near_the_quota_is_defragmented_early() -> None:
    observed = _storage(healthy_cluster(3, spec=SMALL_QUOTA), {2: (14.0, 11.0)})  # 87 % of quota, 21 % reclaimable
    action = plan_through_drain(observed)
    assert isinstance(action, actions.Defragment) and action.member_name == name(2), action


def test_the_leader_is_defragmented_last_after_leadership_moved() -> None:
    observed = _storage(healthy_cluster(3, spec={"defragmentation": {"minimumFreeSize": "1Mi"}}), {1: (100.0, 10.0)})
    action = plan_through_drain(observed)
    assert isinstance(action, actions.MoveLeader) and action.from_member_name == name(1), action


def test_no_routine_defragmentation_outside_the_window_or_when_disabled() -> None:
    fragmented = {2: (100.0, 10.0)}
    # observed_at is 13:00 UTC in the builders
    closed = {"defragmentation": {"minimumFreeSize": "1Mi", "window": {"start": "02:00", "duration": "2h"}}}
    assert isinstance(plan_next_action(_storage(healthy_cluster(3, spec=closed), fragmented)), actions.NoOp)
    opened = {"defragmentation": {"minimumFreeSize": "1Mi", "window": {"start": "12:30", "duration": "1h"}}}
    assert isinstance(plan_through_drain(_storage(healthy_cluster(3, spec=opened), fragmented)), actions.Defragment)
    off = {"defragmentation": {"enabled": False}}
    assert isinstance(plan_next_action(_storage(healthy_cluster(3, spec=off), fragmented)), actions.NoOp)


def test_no_routine_defragmentation_while_the_cluster_is_not_whole() -> None:
    fragmented = {2: (100.0, 10.0)}
    observed = _storage(healthy_cluster(3, size=4, spec={"defragmentation": {"minimumFreeSize": "1Mi"}}), fragmented)
    assert not isinstance(plan_through_drain(observed), actions.Defragment)


def test_a_failed_defragmentation_is_retried_only_later() -> None:
    observed = _storage(healthy_cluster(3, spec={"defragmentation": {"minimumFreeSize": "1Mi"}}), {2: (100.0, 10.0)})
    assert observed.observed_at is not None
    recent = replace_pod(observed, name(2), defragment_failed_at=observed.observed_at - timedelta(seconds=60))
    assert isinstance(plan_next_action(recent), actions.NoOp)
    old = replace_pod(observed, name(2),
                      defragment_failed_at=observed.observed_at - timedelta(seconds=DEFRAGMENT_RETRY_SECONDS + 1))
    assert isinstance(plan_through_drain(old), actions.Defragment)


def test_a_member_drained_for_an_earlier_defragmentation_serves_again_before_the_next() -> None:
    observed = _storage(healthy_cluster(3, spec={"defragmentation": {"minimumFreeSize": "1Mi"}}), {3: (100.0, 10.0)})
    observed = replace_pod(observed, name(2), serving=False)
    action = plan_next_action(observed)
    assert isinstance(action, actions.SetServing) and action.serving and action.pod_name == name(2), action


def test_a_single_member_is_defragmented_without_a_drain() -> None:
    observed = _storage(healthy_cluster(1, size=1, spec={"defragmentation": {"minimumFreeSize": "1Mi"}}),
                        {1: (100.0, 10.0)})
    action = plan_next_action(observed)
    assert isinstance(action, actions.Defragment) and action.member_name == name(1), action


def test_status_shows_each_members_storage() -> None:
    observed = _storage(healthy_cluster(3, spec=SMALL_QUOTA), {2: (10.0, 4.0)})
    assert observed.observed_at is not None
    observed = replace_pod(observed, name(2), defragmented_at=observed.observed_at)
    status = compute_status(observed, plan_next_action(observed), now=observed.observed_at)
    storage = status["maintenance"]
    assert storage["backendQuota"] == 16 * MIB and storage["alarms"] == []
    member = next(m for m in storage["members"] if m["name"] == name(2))
    assert member == {"name": name(2), "dbSize": 10 * MIB, "dbSizeInUse": 4 * MIB,
                      "lastDefragmented": "2024-05-01T13:00:00Z"}, member


def test_endpoint_status_alarms_are_parsed() -> None:
    status = EndpointStatus(1, 1, errors=("memberID:12 alarm:NOSPACE ", "etcdserver: no leader"))
    assert status.alarms == (Alarm(NOSPACE, 12),)


def test_no_space_recovery_defragments_every_member_once_whatever_it_reports() -> None:
    """A follower may report the space compaction freed as in use until its next write (which
    NOSPACE holds back): once the alarm is in status, each member not defragmented since is."""
    observed = _no_space(compacted=True, sizes={i: (3.0, 3.0) for i in (1, 2, 3)})
    assert observed.observed_at is not None
    raised = observed.observed_at - timedelta(seconds=20)
    status = {"bootstrapped": True, "conditions": [{"type": "AlarmRaised", "status": "True", "reason": "NoSpaceAlarm",
                                                    "lastTransitionTime": raised.strftime("%Y-%m-%dT%H:%M:%SZ")}]}
    observed = dataclasses.replace(observed, cluster=make_cluster({**SMALL_QUOTA}, status=status))
    before = replace_pod(observed, name(3), defragmented_at=raised - timedelta(seconds=5))
    action = plan_through_drain(before)
    assert isinstance(action, actions.Defragment) and action.member_name == name(3), action
    done = before
    for member in (1, 2, 3):
        done = replace_pod(done, name(member), defragmented_at=raised + timedelta(seconds=member))
    disarm = plan_next_action(done)
    assert isinstance(disarm, actions.DisarmAlarm) and disarm.raised_for_seconds == 20.0, disarm


def test_the_follower_drained_for_a_defragmentation_stays_the_choice_while_its_drain_settles() -> None:
    """What is reclaimable moves with every write: the choice must not flip to another member
    (re-serving the first) while the drain settles."""
    observed = _storage(healthy_cluster(3, spec={"defragmentation": {"minimumFreeSize": "1Mi"}}),
                        {2: (100.0, 10.0), 3: (100.0, 20.0)})
    assert isinstance(plan_through_drain(observed), actions.Defragment)
    drained = replace_pod(observed, name(3), serving=False)  # member 2 has more to reclaim now
    action = plan_next_action(drained)
    assert isinstance(action, actions.Defragment) and action.member_name == name(3), action
