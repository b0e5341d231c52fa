"""The alarm remedies that must never make things worse (issue 41, findings 3-5 and the timed-out
defragmentation of item 10): CORRUPT resolved by the members' keyspace hashes at one revision,
never by whom etcd's leader-centred check named; a CORRUPT for member ID 0 reported cluster-wide
and never disarmed; the quota from ETCD_QUOTA_BACKEND_BYTES in etcdEnv used for every decision;
a failed NOSPACE defragmentation backed off while the next member goes; a timed-out one left
drained until its member answers again."""
from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from etcd_common.etcd import etcdctl as ctl
from etcd_common.etcd.alarms import CORRUPT, NOSPACE, Alarm
from etcd_common.etcd.types import EndpointStatus
from etcd_operator import actions
from etcd_operator.manifests import member_client_url
from etcd_operator.observed import ObservedCluster
from etcd_operator.planning import plan_next_action
from etcd_operator.planning.maintenance import NO_SPACE_DEFRAGMENT_RETRY_SECONDS
from etcd_operator.spec import parse_etcd_cluster
from etcd_operator.status import alarm_event, compute_status
from tests.unit.etcd_operator.etcd_cluster_builders import (
    healthy_cluster,
    make_cluster,
    member_id,
    name,
    plan_through_drain,
    raw_cluster,
    replace_pod,
    unhealthy,
    with_hash_kvs,
    without_pods,
)
from tests.unit.etcd_operator.observing_fakes import MEMBERS, FakeEtcd, observe
from tests.unit.etcd_operator.recording_api import DeletingApi, recording_executor
from tests.unit.etcd_operator.recording_etcd import RecordingEtcd

MIB = 1024 * 1024
QUOTA_ENV = "ETCD_QUOTA_BACKEND_BYTES"


def _alarmed(observed: ObservedCluster, *alarms: Alarm, revision: int = 5000) -> ObservedCluster:
    """Every member reports `alarms` in its status, as etcd prints them (member ID 0 left out)."""
    errors = tuple(f"alarm:{a.kind} " if a.member_id == 0 else f"memberID:{a.member_id} alarm:{a.kind} "
                   for a in alarms)
    statuses = {m: dataclasses.replace(s, errors=errors, revision=revision) for m, s in observed.endpoint_status.items()}
    parsed = tuple(sorted({a for s in statuses.values() for a in s.alarms}))
    return dataclasses.replace(observed, endpoint_status=statuses, alarms=parsed)


def _conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


# --- parsing: a CORRUPT alarm for member ID 0 prints without its member


@pytest.mark.parametrize(("errors", "expected"), [
    (("alarm:CORRUPT ",), (Alarm(CORRUPT, 0),)),
    (("memberID:12 alarm:NOSPACE ", "alarm:CORRUPT "), (Alarm(CORRUPT, 0), Alarm(NOSPACE, 12))),
    (("memberID:12  alarm:CORRUPT",), (Alarm(CORRUPT, 12),)),
    (("etcdserver: no leader",), ()),
])
def test_alarms_are_parsed_with_or_without_a_member_id(errors: tuple[str, ...], expected: tuple[Alarm, ...]) -> None:
    assert EndpointStatus(1, 1, errors=errors).alarms == expected


# --- CORRUPT for member ID 0: reported cluster-wide, never disarmed, nothing removed


def test_a_cluster_wide_corrupt_alarm_is_reported_as_an_outage_and_never_disarmed() -> None:
    observed = with_hash_kvs(_alarmed(healthy_cluster(3), Alarm(CORRUPT, 0)), {1: 0xAA, 2: 0xAA, 3: 0xAA})
    action = plan_next_action(observed)
    assert isinstance(action, actions.ReportAlarm) and action.alarm_kind == CORRUPT, action
    assert action.event_type == "Warning" and "never disarmed" in action.reason
    status = compute_status(observed, action, now=observed.observed_at)
    conditions = _conditions(status)
    assert conditions["Available"]["status"] == "False", conditions["Available"]
    assert (status["phase"], status["reason"]) == ("Failed", "CorruptAlarm"), status
    assert "every write is refused" in conditions["AlarmRaised"]["message"]
    assert "member ID 0" in status["message"], status["message"]
    assert alarm_event(observed, status) == ("CorruptAlarm", conditions["AlarmRaised"]["message"])


def test_a_cluster_wide_alarm_is_not_taken_for_one_of_a_member_no_longer_in_the_cluster() -> None:
    """Member ID 0 is never a member: the stale-alarm rule must not disarm it."""
    observed = _alarmed(healthy_cluster(3), Alarm(CORRUPT, 0))
    assert not isinstance(plan_next_action(observed), actions.DisarmAlarm)


def test_every_member_corrupt_alarm_makes_the_cluster_unavailable() -> None:
    """etcd refuses every write while any CORRUPT alarm is raised: status never says Available."""
    observed = with_hash_kvs(_alarmed(healthy_cluster(3), Alarm(CORRUPT, member_id(3))), {1: 0xAA, 2: 0xAA, 3: 0xBB})
    status = compute_status(observed, plan_next_action(observed), now=observed.observed_at)
    assert _conditions(status)["Available"]["status"] == "False"


# --- CORRUPT for a member: the keyspace hashes decide, not whom etcd named


def test_a_corrupt_leader_is_replaced_not_the_follower_it_named() -> None:
    """etcd's periodic check runs on the leader and names the first follower that differs from
    the leader: with the leader corrupt, the named follower agrees with the majority."""
    observed = with_hash_kvs(_alarmed(healthy_cluster(3, leader=1), Alarm(CORRUPT, member_id(2))),
                             {1: 0xBAD, 2: 0xAA, 3: 0xAA})
    first = plan_through_drain(observed)
    assert isinstance(first, actions.MoveLeader) and first.from_member_name == name(1), first
    moved = healthy_cluster(3, leader=2)
    moved = with_hash_kvs(_alarmed(moved, Alarm(CORRUPT, member_id(2))), {1: 0xBAD, 2: 0xAA, 3: 0xAA})
    removal = plan_through_drain(moved)
    assert isinstance(removal, actions.RemoveMember) and removal.member_name == name(1), removal
    assert removal.purpose == "replace"


@pytest.mark.parametrize(("hashes", "compacted", "why"), [
    ({1: 0xAA, 2: 0xBB, 3: 0xCC}, None, "no majority"),
    ({1: 0xAA, 2: 0xAA, 3: 0xBB}, {3: 200}, "cannot be compared"),
    ({1: 0xAA, 3: 0xBB}, None, "no majority"),  # member 2 did not answer: no majority agrees
    ({}, None, "not known"),
])
def test_corrupt_without_a_majority_agreeing_changes_nothing(hashes: dict[int, int], compacted: dict[int, int] | None,
                                                             why: str) -> None:
    observed = _alarmed(healthy_cluster(3), Alarm(CORRUPT, member_id(3)))
    if hashes:
        observed = with_hash_kvs(observed, hashes, compacted=compacted)
    action = plan_next_action(observed)
    assert isinstance(action, actions.ReportAlarm) and not action.has_effect and why in action.reason, action


def test_the_alarm_left_on_a_sound_member_is_disarmed_once_every_member_agrees() -> None:
    """After the corrupt leader was replaced, the alarm it raised for a follower remains: etcd
    refuses writes until it is disarmed. Every voter agreeing at one revision disarms it."""
    alarm = Alarm(CORRUPT, member_id(2))
    observed = with_hash_kvs(_alarmed(healthy_cluster(3, leader=2), alarm), {1: 0xAA, 2: 0xAA, 3: 0xAA})
    action = plan_next_action(observed)
    assert isinstance(action, actions.DisarmAlarm) and action.alarm == alarm, action
    partial = with_hash_kvs(_alarmed(healthy_cluster(3, leader=2), alarm), {1: 0xAA, 2: 0xAA})
    assert isinstance(plan_next_action(partial), actions.Wait), "disarmed only when every voter answered"


def test_keyspace_hashes_are_asked_only_while_a_corrupt_alarm_is_raised() -> None:
    cluster = make_cluster()
    urls = [member_client_url(cluster, m) for m in MEMBERS]
    quiet = FakeEtcd()
    quiet.revision = 42
    observed = observe(cluster, quiet, set(urls))
    assert not any(what.startswith("hashkv") for what, _ in quiet.asked) and observed.hash_kvs == {}
    alarmed = FakeEtcd()
    alarmed.revision, alarmed.status_errors = 42, ("memberID:1 alarm:CORRUPT ",)
    alarmed.hashes = {urls[0]: 0xBAD, urls[1]: 0xAA}
    observed = observe(cluster, alarmed, set(urls))
    assert ("hashkv 42", urls) in alarmed.asked
    assert observed.hash_kv_revision == 42 and {m: h.hash for m, h in observed.hash_kvs.items()} == {
        MEMBERS[0]: 0xBAD, MEMBERS[1]: 0xAA}


# --- the quota from ETCD_QUOTA_BACKEND_BYTES in etcdEnv


def _env_quota(value: str, **spec: Any) -> dict[str, Any]:
    return {"pod": {"etcdEnv": [{"name": QUOTA_ENV, "value": value}]}, **spec}


@pytest.mark.parametrize(("value", "expected"), [
    ("16777216", 16 * MIB), ("0x1000000", 16 * MIB), ("0", 2048 * MIB), ("16Mi", 2048 * MIB)])
def test_the_env_quota_is_the_effective_quota(value: str, expected: int) -> None:
    spec = parse_etcd_cluster(raw_cluster(_env_quota(value))).require_spec()
    assert spec.effective_quota_bytes == expected


def _no_space(spec: dict[str, Any], sizes: tuple[float, float]) -> ObservedCluster:
    observed = healthy_cluster(3, spec=spec)
    size, in_use = sizes
    statuses = {m: dataclasses.replace(s, db_size=int(size * MIB), db_size_in_use=int(in_use * MIB), revision=5000,
                                       errors=(f"memberID:{member_id(2)} alarm:NOSPACE ",))
                for m, s in observed.endpoint_status.items()}
    return dataclasses.replace(observed, endpoint_status=statuses, alarms=(Alarm(NOSPACE, member_id(2)),),
                               history_compacted=True)


def test_a_small_env_quota_still_full_after_recovery_is_reported_not_disarmed_in_a_loop() -> None:
    observed = _no_space(_env_quota(str(16 * MIB)), (15.5, 15.2))
    action = plan_next_action(observed)
    assert isinstance(action, actions.ReportAlarm), action
    assert "16.0 MiB quota" in action.reason and QUOTA_ENV in action.reason, action.reason
    status = compute_status(observed, action, now=observed.observed_at)
    assert status["maintenance"]["backendQuota"] == 16 * MIB
    assert f"of {16 * MIB} bytes" in _conditions(status)["AlarmRaised"]["message"]


def test_a_large_env_quota_that_the_data_fits_is_disarmed() -> None:
    observed = _no_space(_env_quota(str(8 * 1024 * MIB)), (3000.0, 3000.0))
    action = plan_next_action(observed)
    assert isinstance(action, actions.DisarmAlarm) and "8192.0 MiB quota" in action.reason, action


# --- a failed NOSPACE defragmentation: backed off, the next member meanwhile


def test_a_failed_no_space_defragmentation_is_backed_off_while_the_next_member_goes() -> None:
    observed = _no_space({"backendQuota": "16Mi"}, (16.0, 3.0))
    assert observed.observed_at is not None
    first = plan_through_drain(observed)
    assert isinstance(first, actions.Defragment) and first.member_name == name(3), first
    failed = replace_pod(observed, name(3), defragment_failed_at=observed.observed_at - timedelta(seconds=5))
    second = plan_through_drain(failed)
    assert isinstance(second, actions.Defragment) and second.member_name == name(2), second
    both = replace_pod(failed, name(2), defragment_failed_at=observed.observed_at - timedelta(seconds=5))
    assert isinstance(plan_through_drain(both), actions.MoveLeader), "then the leader, last"
    everyone = replace_pod(both, name(1), defragment_failed_at=observed.observed_at - timedelta(seconds=5))
    assert isinstance(plan_next_action(everyone), actions.Wait), "no tight loop while every one backs off"
    later = replace_pod(failed, name(3), defragment_failed_at=observed.observed_at - timedelta(
        seconds=NO_SPACE_DEFRAGMENT_RETRY_SECONDS + 1))
    assert plan_through_drain(later).member_name == name(3)


# --- a defragmentation that timed out: the member stays drained until it answers


class _DefragmentingEtcd(RecordingEtcd):
    def __init__(self, error: ctl.EtcdctlError) -> None:
        super().__init__()
        self.error = error

    def maintenance(self, cluster: Any) -> Any:
        error = self.error

        class _Maintenance:
            def defragment(self, endpoint: str, *, timeout_seconds: float) -> None:
                raise error
        return _Maintenance()


class _PatchingApi(DeletingApi):
    def __init__(self) -> None:
        super().__init__()
        self.patches: list[tuple[str, dict[str, Any]]] = []

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patches.append((name, patch))
        return {"metadata": {"name": name, "namespace": namespace}}


@pytest.mark.parametrize(("error", "serves_again"), [
    (ctl.Unreachable("Error: http://m:2379: context deadline exceeded (timed out)"), False),
    (ctl.Unreachable("Error: http://m:2379: connection refused"), True),
    (ctl.EtcdctlError("Error: etcdserver: some failure"), True),
])
def test_a_timed_out_defragmentation_leaves_the_member_drained(error: ctl.EtcdctlError, serves_again: bool) -> None:
    observed = replace_pod(healthy_cluster(3), name(2), serving=False)
    api = _PatchingApi()
    action = actions.Defragment(name(2), member_id(2), name(2), 100 * MIB, 10 * MIB, "no-space", "NOSPACE recovery")
    with pytest.raises(ctl.EtcdctlError):
        recording_executor(api, _DefragmentingEtcd(error)).execute(action, observed)
    [(pod, patch)] = api.patches
    assert pod == name(2) and "etcd.database.coreos.com/defragment-failed-at" in patch["metadata"]["annotations"]
    assert ("labels" in patch["metadata"]) == serves_again, patch


def test_a_member_still_defragmenting_is_not_served_again_until_it_answers() -> None:
    """What the executor's leaving it drained relies on: while etcd rewrites the file the member
    fails the health check, and nothing serves it again until it answers."""
    observed = healthy_cluster(3, spec={"defragmentation": {"enabled": False}})
    assert observed.observed_at is not None
    timed_out = replace_pod(observed, name(2), serving=False, drained_at=observed.observed_at - timedelta(seconds=90),
                            defragment_failed_at=observed.observed_at - timedelta(seconds=10))
    busy = plan_next_action(unhealthy(timed_out, name(2)))
    assert not (isinstance(busy, actions.SetServing) and busy.serving), busy
    done = plan_next_action(timed_out)
    assert isinstance(done, actions.SetServing) and done.serving and done.pod_name == name(2), done


def test_no_dead_member_is_replaced_while_corrupt_stands() -> None:
    """A member whose pod is gone is replaced as usual, but not while CORRUPT is raised: its
    replacement would copy the leader's data, which may be the corrupt copy (simulator seeds
    418, 512, 5012)."""
    dead = unhealthy(without_pods(healthy_cluster(3), name(2)), name(2))
    replaced = plan_through_drain(dead)
    assert isinstance(replaced, actions.RemoveMember) and replaced.member_name == name(2), replaced
    corrupt = _alarmed(dead, Alarm(CORRUPT, member_id(0)))
    held = plan_next_action(corrupt)
    assert not isinstance(held, actions.RemoveMember), held
    assert isinstance(held, actions.Wait) and "CORRUPT" in held.reason, held
