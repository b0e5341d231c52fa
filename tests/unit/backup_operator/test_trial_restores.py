"""Trial restores (spec.trialRestore), the pure parts and one pass with the effect faked: the spec
read with clear errors, when a trial is due (and that a due backup goes first), how what a trial
found is compared with the backup's record, what status, events and metrics a trial writes, and
that conditions written on their own (Queued) leave every other status field alone."""
from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from backup_operator import reasons, trial_restore
from backup_operator.actions import RestoreOnTrial, TakeBackup, Wait
from backup_operator.metrics import BackupMetrics
from backup_operator.observed import BackupResult, ObservedBackup, RecordedBackup, RecordedTrial, TrialFacts
from backup_operator.observing import observe_backup, parse_last_backup, parse_recorded_trial
from backup_operator.planning import plan_next_action
from backup_operator.reasons import BackupFailed
from backup_operator.slots import BackupSlots
from backup_operator.status import CONDITION_QUEUED, CONDITION_VERIFIED, failure_status, success_status
from backup_operator.supervisor import QUEUED_RECHECK_SECONDS, BackupSupervisor, SupervisorContext
from backup_operator.trial_restore import TrialResult
from backup_operator.verification import mismatches, next_trial_restore
from etcd_common.api.etcd_backup import (
    InvalidBackupSpec,
    LastBackup,
    SnapshotFingerprint,
    TrialRestorePolicy,
    parse_backup_spec,
    parse_etcd_backup,
)
from operator_runtime.cache import ObjectCache
from operator_runtime.kube_time import format_timestamp as format_time
from tests.unit.backup_operator.etcd_backup_builders import KEY, raw_backup, stored_backup
from tests.unit.backup_operator.supervisor_fakes import FakeBackupApi, FakeEvents

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
TAKEN = NOW - timedelta(minutes=30)
BASE = {"etcdEndpoints": ["http://e-client.ns.svc:2379"], "storageType": "S3", "s3": {"path": "bucket/etcd.backup"}}
PERIODIC = {**BASE, "backupPolicy": {"backupIntervalInSecond": 3600}}
TRIALS = {**PERIODIC, "trialRestore": {"intervalInSecond": 600, "maxUnverifiedAgeInSecond": 7200}}
FINGERPRINT = SnapshotFingerprint(105, key_count=200, hash_kv=4242, compact_revision=90)
LAST_BACKUP = LastBackup(key="etcd.backup_v100_x", taken=TAKEN, sha256="abc", etcd_revision=100,
                         fingerprint=FINGERPRINT)


# --- the spec

def test_trial_restore_is_optional_and_coreos_manifests_parse_without_it() -> None:
    assert parse_backup_spec(PERIODIC).trial_restore is None


def test_trial_restore_defaults_from_its_interval() -> None:
    spec = parse_backup_spec({**BASE, "trialRestore": {"intervalInSecond": 600}})
    assert spec.trial_restore == TrialRestorePolicy(interval_seconds=600, max_unverified_age_seconds=1800,
                                                    timeout_seconds=600)
    spec = parse_backup_spec({**BASE, "trialRestore": {"intervalInSecond": 60, "maxUnverifiedAgeInSecond": 90,
                                                       "timeoutInSecond": 30}})
    assert spec.trial_restore == TrialRestorePolicy(60, 90, 30)


@pytest.mark.parametrize("trial, message", [
    ({}, "spec.trialRestore.intervalInSecond is required"),
    ({"intervalInSecond": 0}, "spec.trialRestore.intervalInSecond must be at least 1, got 0"),
    ({"intervalInSecond": "1h"}, "spec.trialRestore.intervalInSecond must be an integer, got string '1h'"),
    ({"intervalInSecond": 60, "maxUnverifiedAgeInSecond": -1},
     "spec.trialRestore.maxUnverifiedAgeInSecond must be at least 0, got -1"),
    ({"intervalInSecond": 60, "timeoutInSecond": True}, "spec.trialRestore.timeoutInSecond must be an integer"),
    ("daily", "spec.trialRestore must be an object, got string"),
])
def test_a_bad_trial_restore_names_the_field(trial: Any, message: str) -> None:
    with pytest.raises(InvalidBackupSpec, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_backup_spec({**BASE, "trialRestore": trial})
    backup = parse_etcd_backup({"metadata": {"name": "b", "namespace": "ns"}, "spec": {**BASE, "trialRestore": trial}})
    assert backup.spec is None and backup.spec_error is not None and message in backup.spec_error


# --- when a trial is due

POLICY = TrialRestorePolicy(600, 7200)


def test_no_trial_without_the_spec_or_without_a_backup() -> None:
    assert next_trial_restore(None, LAST_BACKUP, RecordedTrial(), NOW) is None
    assert next_trial_restore(POLICY, None, RecordedTrial(), NOW) is None


def test_the_first_trial_at_once_then_one_interval_after_the_last_attempt_failed_or_not() -> None:
    assert isinstance(next_trial_restore(POLICY, LAST_BACKUP, RecordedTrial(), NOW), RestoreOnTrial)
    recent = RecordedTrial(last_attempt_time=NOW - timedelta(seconds=100), last_result=reasons.BACKUP_OBJECT_CORRUPT)
    action = next_trial_restore(POLICY, LAST_BACKUP, recent, NOW)
    assert isinstance(action, Wait) and action.seconds == 500
    old = RecordedTrial(last_attempt_time=NOW - timedelta(seconds=650), last_result=reasons.VERIFIED)
    action = next_trial_restore(POLICY, LAST_BACKUP, old, NOW)
    assert isinstance(action, RestoreOnTrial) and action.due == NOW - timedelta(seconds=50)


def observed(spec: Any, status: dict[str, Any]) -> ObservedBackup:
    return observe_backup(raw_backup(spec, status=status), NOW)


def backup_taken(ago: float) -> dict[str, Any]:
    return {"observedGeneration": 1, "succeeded": True, "consecutiveFailures": 0,
            "lastAttemptTime": format_time(NOW - timedelta(seconds=ago)),
            "lastBackup": {"key": "etcd.backup_v100_x", "time": format_time(NOW - timedelta(seconds=ago)),
                           "sha256": "abc", "etcdRevision": 100, "snapshotRevision": 105, "keyCount": 200,
                           "hashKV": 4242, "hashKVCompactRevision": 90}}


@pytest.mark.parametrize("case, spec, status, expected", [
    ("a due backup goes first", TRIALS, {**backup_taken(3600)}, TakeBackup),
    ("no trial yet, backup not due: the trial", TRIALS, backup_taken(60), RestoreOnTrial),
    ("without spec.trialRestore: the backup's wait", PERIODIC, backup_taken(60), Wait),
    ("no backup yet: the first backup", TRIALS, {}, TakeBackup),
    ("trial done 100 s ago: wait for it (sooner than the backup)", TRIALS,
     {**backup_taken(60), "trialRestore": {"lastAttemptTime": format_time(NOW - timedelta(seconds=100))}}, Wait),
])
def test_plan_with_trial_restores(case: str, spec: Any, status: dict[str, Any], expected: type) -> None:
    action = plan_next_action(observed(spec, status))
    assert isinstance(action, expected), f"{case}: {action}"


def test_the_earlier_of_the_two_waits_is_kept() -> None:
    trial_soon = {**backup_taken(60), "trialRestore": {"lastAttemptTime": format_time(NOW - timedelta(seconds=100))}}
    action = plan_next_action(observed(TRIALS, trial_soon))
    assert isinstance(action, Wait) and action.seconds == 500  # the trial's, not the backup's 3540
    long_trials = {**PERIODIC, "trialRestore": {"intervalInSecond": 86400}}
    action = plan_next_action(observed(long_trials, trial_soon))
    assert isinstance(action, Wait) and action.seconds == 3540  # the backup's


def test_a_one_shot_backup_done_still_gets_its_trials() -> None:
    one_shot = {**BASE, "trialRestore": {"intervalInSecond": 600}}
    assert isinstance(plan_next_action(observed(one_shot, backup_taken(60))), RestoreOnTrial)


# --- what the status recorded, read leniently

def test_the_backup_record_and_the_trial_record_are_read_back() -> None:
    status = {**backup_taken(1800), "trialRestore": {"lastAttemptTime": format_time(NOW), "lastResult": "X",
                                                     "verifiedBackupTime": format_time(TAKEN)}}
    assert parse_last_backup(status) == LAST_BACKUP
    assert parse_recorded_trial(status) == RecordedTrial(last_attempt_time=NOW, last_result="X",
                                                         verified_backup_time=TAKEN)


@pytest.mark.parametrize("status", [None, {}, {"lastBackup": "x"}, {"lastBackup": {"key": "k"}},
                                    {"lastBackup": {"time": format_time(NOW)}}])
def test_no_usable_backup_record_reads_as_none(status: Any) -> None:
    assert parse_last_backup(status) is None


def test_an_old_record_without_a_fingerprint_and_wrong_types_read_as_unknown() -> None:
    status = {"lastBackup": {"key": "k", "time": format_time(TAKEN), "sha256": 5, "etcdRevision": "7",
                             "snapshotRevision": 9, "keyCount": "many", "hashKV": True}}
    assert parse_last_backup(status) == LastBackup("k", TAKEN, "", 0, SnapshotFingerprint(9))
    assert parse_recorded_trial({"trialRestore": {"lastAttemptTime": 3, "lastResult": 4}}) == RecordedTrial()


# --- comparing what a trial found with the record

def found(**changes: Any) -> TrialFacts:
    facts = {"key": "etcd.backup_v100_x", "sha256": "abc", "snapshot_revision": 105, "served_revision": 105,
             "key_count": 200, "hash_kv": 4242, "compact_revision": 90, "restore_seconds": 1.5}
    return TrialFacts(**{**facts, **changes})


@pytest.mark.parametrize("case, facts, expected, hash_compared", [
    ("all as recorded", found(), [], True),
    ("another sha256", found(sha256="def"), ["snapshot sha256 def, recorded abc"], True),
    ("another snapshot revision", found(snapshot_revision=104, served_revision=104),
     ["snapshot revision 104, recorded 105"], True),
    ("etcd serves another revision", found(served_revision=106),
     ["the restored etcd serves revision 106, the snapshot has 105"], True),
    ("a key lost", found(key_count=199), ["199 keys at revision 105, recorded 200"], True),
    ("another hash", found(hash_kv=1), ["keyspace hash 1 at revision 105, recorded 4242"], True),
    ("compacted between snapshot and hash: the hash is not compared", found(hash_kv=1, compact_revision=100), [],
     False),
])
def test_mismatches(case: str, facts: TrialFacts, expected: list[str], hash_compared: bool) -> None:
    assert mismatches(LAST_BACKUP, facts) == (expected, hash_compared), case


def test_a_record_without_a_fingerprint_compares_the_digest_and_that_the_revision_is_not_older() -> None:
    old = LastBackup(key="k", taken=TAKEN, sha256="abc", etcd_revision=100)
    assert mismatches(old, found(key_count=1, hash_kv=1)) == ([], False)
    problems, _ = mismatches(old, found(snapshot_revision=99, served_revision=99))
    assert problems == ["snapshot revision 99 is older than the revision 100 the member had before the snapshot"]


# --- one pass: status, events, metrics

def make_supervisor(status: dict[str, Any], spec: Any = TRIALS, slots: BackupSlots | None = None,
                    ) -> tuple[BackupSupervisor, FakeBackupApi, FakeEvents, BackupMetrics, list[datetime]]:
    cache = ObjectCache()
    cache.upsert(stored_backup(spec, status=status))
    api, events, metrics, clock = FakeBackupApi(cache), FakeEvents(), BackupMetrics(), [NOW]
    context = SupervisorContext(backups=cache, backup_api=api, environment=None,  # type: ignore[arg-type]
                                events=events, metrics=metrics, stop=threading.Event(), clock=lambda: clock[0],
                                **({"slots": slots} if slots is not None else {}))
    return BackupSupervisor(KEY, context), api, events, metrics, clock


def status_of(supervisor: BackupSupervisor) -> dict[str, Any]:
    raw = supervisor.context.backups.get(KEY)
    assert raw is not None
    return dict(raw["status"])


def verified_condition(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == CONDITION_VERIFIED)


def sample(metrics: BackupMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_a_verified_backup_is_recorded_with_an_event_and_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[LastBackup] = []

    def verify(backup: Any, last_backup: LastBackup, env: Any, log: Any) -> TrialResult:
        asked.append(last_backup)
        return TrialResult(found(), hash_compared=True)
    monkeypatch.setattr(trial_restore, "restore_on_trial", verify)
    supervisor, _, events, metrics, _ = make_supervisor(backup_taken(1800))
    assert supervisor.reconcile_once() == 600  # the next trial, sooner than the next backup
    assert asked == [LAST_BACKUP]
    status = status_of(supervisor)
    assert status["trialRestore"] == {
        "lastAttemptTime": format_time(NOW), "lastResult": reasons.VERIFIED, "message": status["trialRestore"]["message"],
        "lastVerifiedTime": format_time(NOW), "verifiedObject": "etcd.backup_v100_x",
        "verifiedBackupTime": format_time(TAKEN), "verifiedRevision": 105, "keyCount": 200, "hashCompared": True,
        "restoreSeconds": 1.5}
    assert (verified_condition(status)["status"], verified_condition(status)["reason"]) == ("True", reasons.VERIFIED)
    assert status["lastBackup"] == backup_taken(1800)["lastBackup"] and status["succeeded"] is True
    assert [e[:2] for e in events.recorded] == [("Normal", reasons.VERIFIED)]
    labels = {"namespace": "ns", "backup": "b"}
    assert sample(metrics, "etcd_backup_trial_restores_total", **labels, result="succeeded") == 1
    assert sample(metrics, "etcd_backup_trial_restore_duration_seconds_count", result="succeeded") == 1
    supervisor.reconcile_once()  # the gauges are read back from status every pass
    assert sample(metrics, "etcd_backup_last_verified_backup_timestamp_seconds", **labels) == TAKEN.timestamp()
    assert sample(metrics, "etcd_backup_max_unverified_age_seconds", **labels) == 7200


def test_a_failed_trial_keeps_the_last_verification_and_warns_once_per_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    failures = [BackupFailed(reasons.BACKUP_OBJECT_CORRUPT, "s3://bucket/k failed its integrity check"),
                BackupFailed(reasons.BACKUP_OBJECT_CORRUPT, "s3://bucket/k failed its integrity check"),
                BackupFailed(reasons.TRIAL_RESTORE_FAILED, "etcd exited")]

    def fail(*args: Any) -> TrialResult:
        raise failures.pop(0)
    monkeypatch.setattr(trial_restore, "restore_on_trial", fail)
    earlier = {"lastAttemptTime": format_time(NOW - timedelta(seconds=700)), "lastResult": reasons.VERIFIED,
               "lastVerifiedTime": format_time(NOW - timedelta(seconds=700)), "verifiedObject": "older",
               "verifiedBackupTime": format_time(TAKEN - timedelta(hours=1)), "verifiedRevision": 90}
    supervisor, _, events, metrics, clock = make_supervisor({**backup_taken(1800), "trialRestore": earlier})
    for _ in range(3):
        supervisor.reconcile_once()
        clock[0] += timedelta(seconds=601)
    status = status_of(supervisor)
    trial = status["trialRestore"]
    assert trial["lastResult"] == reasons.TRIAL_RESTORE_FAILED
    assert trial["message"] == "trial restore of etcd.backup_v100_x failed: etcd exited"
    assert (trial["verifiedObject"], trial["verifiedRevision"]) == ("older", 90)  # the last verification stays
    condition = verified_condition(status)
    assert (condition["status"], condition["reason"]) == ("False", reasons.TRIAL_RESTORE_FAILED)
    assert [e[:2] for e in events.recorded] == [("Warning", reasons.BACKUP_OBJECT_CORRUPT),
                                                ("Warning", reasons.TRIAL_RESTORE_FAILED)]
    labels = {"namespace": "ns", "backup": "b"}
    assert sample(metrics, "etcd_backup_trial_restores_total", **labels, result="failed") == 3
    supervisor.reconcile_once()
    assert sample(metrics, "etcd_backup_last_verified_backup_timestamp_seconds", **labels) == \
        (TAKEN - timedelta(hours=1)).timestamp()


def test_trials_that_never_verified_report_zero_and_a_crash_is_an_internal_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(*args: Any) -> TrialResult:
        raise RuntimeError("bug")
    monkeypatch.setattr(trial_restore, "restore_on_trial", crash)
    supervisor, _, _, metrics, _ = make_supervisor(backup_taken(1800))
    labels = {"namespace": "ns", "backup": "b"}
    supervisor.reconcile_once()
    assert sample(metrics, "etcd_backup_last_verified_backup_timestamp_seconds", **labels) is None  # not tried yet
    assert status_of(supervisor)["trialRestore"]["lastResult"] == reasons.INTERNAL_ERROR
    supervisor.reconcile_once()
    assert sample(metrics, "etcd_backup_last_verified_backup_timestamp_seconds", **labels) == 0


def test_without_trial_restore_the_series_go(monkeypatch: pytest.MonkeyPatch) -> None:
    supervisor, _, _, metrics, _ = make_supervisor(
        {**backup_taken(60), "trialRestore": {"verifiedBackupTime": format_time(TAKEN)}}, spec=PERIODIC)
    metrics.max_unverified_age_seconds.labels(namespace="ns", backup="b").set(1)
    monkeypatch.setattr(trial_restore, "restore_on_trial", lambda *a: pytest.fail("no trial asked for"))
    supervisor.reconcile_once()
    assert sample(metrics, "etcd_backup_max_unverified_age_seconds", namespace="ns", backup="b") is None
    assert sample(metrics, "etcd_backup_last_verified_backup_timestamp_seconds", namespace="ns", backup="b") is None


def test_a_trial_waits_for_a_slot_and_the_queued_note_keeps_every_other_field(
        monkeypatch: pytest.MonkeyPatch) -> None:
    slots = BackupSlots(1)
    slots.request(("ns", "other"), 0.0, lambda: None)  # the only slot is taken
    monkeypatch.setattr(trial_restore, "restore_on_trial", lambda *a: pytest.fail("no slot"))
    before = backup_taken(1800)
    supervisor, _, _, _, _ = make_supervisor(before, slots=slots)
    assert supervisor.reconcile_once() == QUEUED_RECHECK_SECONDS
    status = status_of(supervisor)
    assert [c["type"] for c in status["conditions"]] == [CONDITION_QUEUED]
    assert {k: v for k, v in status.items() if k != "conditions"} == before  # lastAttemptTime, lastBackup... stay


def test_a_backup_s_own_status_keeps_the_trial_record() -> None:
    """A backup taken or failed after a trial must not drop status.trialRestore (a status write
    removes every field it leaves out): the schedule of trials and the alert read it."""
    trial = {"lastAttemptTime": format_time(NOW), "lastResult": reasons.VERIFIED, "verifiedBackupTime": format_time(TAKEN)}
    current = {**backup_taken(60), "trialRestore": trial}
    result = BackupResult(key="k2", size=1, sha256="s", etcd_revision=200, etcd_version="3.6.16", started=NOW,
                          duration_seconds=1.0, fingerprint=SnapshotFingerprint(201, key_count=3))
    assert success_status(current, 1, result, NOW)["trialRestore"] == trial
    assert success_status(current, 1, result, NOW)["lastBackup"]["snapshotRevision"] == 201
    failed = failure_status(current, 1, RecordedBackup(), "S3Unreachable", "down", NOW, NOW)
    assert failed["trialRestore"] == trial
