"""One EtcdBackup's pass with the API faked at our adapter boundary: what it writes to status,
which events it records, and how long it sleeps."""
from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from backup_operator import acting, reasons
from backup_operator.metrics import BackupMetrics
from backup_operator.observed import BackupResult
from backup_operator.reasons import BackupFailed
from backup_operator.schedule import IDLE_SECONDS
from backup_operator.slots import BackupSlots
from backup_operator.status import CONDITION_INTERVAL_RAISED, CONDITION_QUEUED
from backup_operator.supervisor import (
    NOT_LEADING_DELAY_SECONDS,
    QUEUED_RECHECK_SECONDS,
    START_LEASE_SECONDS,
    BackupSupervisor,
    SupervisorContext,
)
from kube_adapter.errors import Transient
from operator_runtime.cache import ObjectCache
from tests.unit.backup_operator.etcd_backup_builders import KEY, NOW, PERIODIC, backup_result, stored_backup
from tests.unit.backup_operator.supervisor_fakes import FakeBackupApi, FakeEvents


def make_supervisor(spec: Any,
                    generation: int = 1) -> tuple[BackupSupervisor, FakeBackupApi, FakeEvents, BackupMetrics]:
    cache = ObjectCache()
    cache.upsert(stored_backup(spec, generation=generation))
    api, events, metrics = FakeBackupApi(cache), FakeEvents(), BackupMetrics()
    context = SupervisorContext(backups=cache, backup_api=api, environment=None,  # type: ignore[arg-type]
                                events=events, metrics=metrics, stop=threading.Event(), clock=lambda: NOW)
    return BackupSupervisor(KEY, context), api, events, metrics


def test_a_spec_problem_is_reported_once_per_generation() -> None:
    supervisor, api, events, metrics = make_supervisor({"storageType": "OSS", "oss": {"path": "b/k"}})
    assert supervisor.reconcile_once() == IDLE_SECONDS
    assert supervisor.reconcile_once() == IDLE_SECONDS
    assert len(api.patches) == 1 and api.patches[0]["lastResult"] == reasons.INVALID_SPEC
    assert events.recorded == [("Warning", reasons.INVALID_SPEC, api.patches[0]["conditions"][0]["message"])]
    assert metrics.failures_total.labels(reason=reasons.INVALID_SPEC)._value.get() == 1


def test_success_writes_status_event_metrics_and_sleeps_one_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acting, "take_backup", lambda request, env, log, now: backup_result())
    supervisor, api, events, metrics = make_supervisor(PERIODIC)
    assert supervisor.reconcile_once() == 600
    assert api.patches[-1]["succeeded"] is True and api.patches[-1]["lastBackup"]["key"] == "etcd.backup_v5_x"
    assert events.recorded[0][:2] == ("Normal", reasons.SUCCEEDED)
    labels = {"namespace": "ns", "backup": "b"}
    assert metrics.last_size_bytes.labels(**labels)._value.get() == 10
    assert metrics.backups_total.labels(**labels, result="succeeded")._value.get() == 1


def test_failure_writes_reason_and_warning_and_retries_with_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(request: Any, env: Any, log: Any, now: Any) -> BackupResult:
        raise BackupFailed("S3Unreachable", "cannot reach the S3 server")
    monkeypatch.setattr(acting, "take_backup", fail)
    supervisor, api, events, metrics = make_supervisor(PERIODIC)
    assert supervisor.reconcile_once() == 5.0
    status = api.patches[-1]
    assert (status["succeeded"], status["lastResult"], status["consecutiveFailures"]) == (False, "S3Unreachable", 1)
    assert events.recorded == [("Warning", "S3Unreachable", "cannot reach the S3 server")]
    assert metrics.failures_total.labels(reason="S3Unreachable")._value.get() == 1


def test_crash_in_a_backup_is_a_failure_in_status(monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(request: Any, env: Any, log: Any, now: Any) -> BackupResult:
        raise RuntimeError("bug")
    monkeypatch.setattr(acting, "take_backup", crash)
    supervisor, api, events, _ = make_supervisor(PERIODIC)
    supervisor.reconcile_once()
    assert api.patches[-1]["lastResult"] == reasons.INTERNAL_ERROR and "bug" in api.patches[-1]["Reason"]


def test_not_due_yet_sleeps_until_due(monkeypatch: pytest.MonkeyPatch) -> None:
    supervisor, api, _, _ = make_supervisor(PERIODIC)
    raw = supervisor.context.backups.get(KEY)
    assert raw is not None
    raw["status"] = {"observedGeneration": 1, "succeeded": True, "consecutiveFailures": 0,
                     "lastAttemptTime": (NOW - timedelta(seconds=100)).strftime("%Y-%m-%dT%H:%M:%SZ")}
    supervisor.context.backups.upsert(raw)
    monkeypatch.setattr(acting, "take_backup", lambda *a, **k: pytest.fail("no backup is due"))
    assert supervisor.reconcile_once() == 500
    assert api.patches == []


def test_not_leading_takes_no_backup(monkeypatch: pytest.MonkeyPatch) -> None:
    supervisor, api, _, _ = make_supervisor(PERIODIC)
    object.__setattr__(supervisor.context, "may_act", lambda for_seconds=0.0: False)
    monkeypatch.setattr(acting, "take_backup", lambda *a, **k: pytest.fail("not the leader"))
    assert supervisor.reconcile_once() == NOT_LEADING_DELAY_SECONDS
    assert api.patches == []


def test_a_lease_ending_before_the_snapshot_starts_takes_no_backup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Broken by asking the lease only for now: a leader whose lease ends within the backup's start
    (a renewal late, a successor about to take over) would snapshot and upload beside its successor."""
    supervisor, api, _, _ = make_supervisor(PERIODIC)
    asked: list[float] = []

    def lease_for_moments(for_seconds: float = 0.0) -> bool:
        asked.append(for_seconds)
        return for_seconds < 1.0
    object.__setattr__(supervisor.context, "may_act", lease_for_moments)
    monkeypatch.setattr(acting, "take_backup", lambda *a, **k: pytest.fail("the lease may end before it starts"))
    assert supervisor.reconcile_once() == NOT_LEADING_DELAY_SECONDS
    assert api.patches == [] and max(asked) >= START_LEASE_SECONDS


class FlakyBackupApi(FakeBackupApi):
    """Refuses the first `failures` writes of an attempt's outcome as the API server would when
    overloaded (the writes of attempts' starts go through, kept in `starts`, not in `patches`)."""

    def __init__(self, cache: ObjectCache, failures: int) -> None:
        super().__init__(cache)
        self.failures = failures
        self.starts: list[dict[str, Any]] = []

    def patch_status(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        if set(patch) == {"attemptStarted"}:
            self.starts.append(patch)
            updated = super().patch_status(namespace, name, patch)
            self.patches.pop()
            return updated
        if self.failures > 0:
            self.failures -= 1
            raise Transient("503 Service Unavailable")
        return super().patch_status(namespace, name, patch)


def flaky_supervisor(failures: int) -> tuple[BackupSupervisor, FlakyBackupApi]:
    supervisor, _, _, _ = make_supervisor(PERIODIC)
    api = FlakyBackupApi(supervisor.context.backups, failures)
    object.__setattr__(supervisor.context, "backup_api", api)
    return supervisor, api


def test_a_backup_whose_status_write_failed_is_recorded_not_taken_again(monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[int] = []
    monkeypatch.setattr(acting, "take_backup", lambda *a, **k: taken.append(1) or backup_result())
    supervisor, api = flaky_supervisor(2)
    for _ in range(2):  # the upload, then a retry of the write: both writes refused
        with pytest.raises(Transient):
            supervisor.reconcile_once()
    assert supervisor.reconcile_once() == 600  # the write goes through; the next backup is one interval away
    assert taken == [1]
    raw = supervisor.context.backups.get(KEY)
    assert raw is not None and raw["status"]["lastBackup"]["key"] == "etcd.backup_v5_x"
    assert supervisor.reconcile_once() == 600 and taken == [1] and len(api.patches) == 1


def test_a_failed_attempt_whose_status_write_failed_keeps_its_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[int] = []

    def fail(*args: Any, **kwargs: Any) -> BackupResult:
        attempts.append(1)
        raise BackupFailed("S3Unreachable", "cannot reach the S3 server")
    monkeypatch.setattr(acting, "take_backup", fail)
    supervisor, api = flaky_supervisor(1)
    with pytest.raises(Transient):
        supervisor.reconcile_once()
    assert supervisor.reconcile_once() == 5.0 and attempts == [1]
    assert api.patches[-1]["consecutiveFailures"] == 1


def test_a_kept_status_is_dropped_when_the_api_records_a_later_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another operator instance (or a write whose answer was lost) recorded something newer."""
    monkeypatch.setattr(acting, "take_backup", lambda *a, **k: backup_result())
    supervisor, api = flaky_supervisor(1)
    with pytest.raises(Transient):
        supervisor.reconcile_once()
    raw = supervisor.context.backups.get(KEY)
    assert raw is not None
    later = (NOW + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    raw["status"] = {"observedGeneration": 1, "succeeded": True, "consecutiveFailures": 0,
                     "lastResult": "Succeeded", "lastAttemptTime": later}
    supervisor.context.backups.upsert(raw)
    assert supervisor.reconcile_once() == 601
    assert api.patches == [] and supervisor.unwritten is None


def test_a_kept_status_is_not_written_to_an_object_recreated_under_the_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[int] = []
    monkeypatch.setattr(acting, "take_backup", lambda *a, **k: taken.append(1) or backup_result())
    supervisor, api = flaky_supervisor(1)
    with pytest.raises(Transient):
        supervisor.reconcile_once()
    raw = supervisor.context.backups.get(KEY)
    assert raw is not None
    # The new object has the old one's status, but not the start of the attempt the old one was under.
    status = {k: v for k, v in raw["status"].items() if k != "attemptStarted"}
    supervisor.context.backups.upsert({**raw, "metadata": {**raw["metadata"], "uid": "another"}, "status": status})
    assert supervisor.reconcile_once() == 600
    assert taken == [1, 1]  # a new object: its own first backup
    assert len(api.patches) == 1


def test_a_due_backup_without_a_free_slot_waits_says_so_once_and_keeps_its_schedule(
        monkeypatch: pytest.MonkeyPatch) -> None:
    supervisor, api, _, _ = make_supervisor(PERIODIC)
    slots = BackupSlots(1)
    object.__setattr__(supervisor.context, "slots", slots)
    assert slots.request(("ns", "other"), 0.0, lambda: None) == 0  # another backup holds the only slot
    monkeypatch.setattr(acting, "take_backup", lambda *a, **k: pytest.fail("no slot"))
    assert supervisor.reconcile_once() == QUEUED_RECHECK_SECONDS
    assert supervisor.reconcile_once() == QUEUED_RECHECK_SECONDS
    assert len(api.patches) == 1  # written once, not on every pass
    condition = api.patches[0]["conditions"][-1]
    assert (condition["type"], condition["reason"]) == (CONDITION_QUEUED, reasons.WAITING_FOR_SLOT)
    assert "1 of 1 running" in condition["message"] and "position 1 of 1" in condition["message"]
    # Waiting is no attempt: nothing the schedule reads (so nothing the missed-backup alert reads) changed.
    assert set(api.patches[0]) == {"conditions"}
    monkeypatch.setattr(acting, "take_backup", lambda *a, **k: backup_result())
    slots.release(("ns", "other"))
    assert supervisor.reconcile_once() == 600
    assert [c["type"] for c in api.patches[-1]["conditions"]] == ["Succeeded"]
    assert (slots.running(), slots.queued()) == (0, 0)


def test_an_interval_below_the_minimum_is_raised_with_a_warning_once(monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[int] = []
    monkeypatch.setattr(acting, "take_backup", lambda *a, **k: taken.append(1) or backup_result())
    fast = {**PERIODIC, "backupPolicy": {"backupIntervalInSecond": 5}}
    supervisor, api, events, metrics = make_supervisor(fast)
    object.__setattr__(supervisor.context, "min_interval_seconds", 60.0)
    assert supervisor.reconcile_once() == 60  # the next one after the minimum, not 5 s
    assert supervisor.reconcile_once() == 60 and taken == [1]
    raised = [c for c in api.patches[-1]["conditions"] if c["type"] == CONDITION_INTERVAL_RAISED]
    assert raised and "backupIntervalInSecond 5 is below this operator's minimum 60" in raised[0]["message"]
    assert [e[:2] for e in events.recorded].count(("Warning", reasons.INTERVAL_BELOW_MINIMUM)) == 1
    assert metrics.interval_seconds.labels(namespace="ns", backup="b")._value.get() == 60
    # Raised to the minimum or above: the condition goes.
    raw = supervisor.context.backups.get(KEY)
    assert raw is not None
    supervisor.context.backups.upsert({**raw, "spec": PERIODIC})
    supervisor.reconcile_once()
    assert [c["type"] for c in api.patches[-1]["conditions"]] == ["Succeeded"]


class CrashingTake(BaseException):
    """The operator's process ends mid-backup (evicted, OOM-killed): nothing after this runs."""


def test_an_attempt_is_recorded_before_it_starts_and_its_outcome_removes_the_mark(
        monkeypatch: pytest.MonkeyPatch) -> None:
    supervisor, api, _, _ = make_supervisor(PERIODIC)
    seen: list[Any] = []

    def take(*args: Any, **kwargs: Any) -> BackupResult:
        seen.append((supervisor.context.backups.get(KEY) or {})["status"].get("attemptStarted"))
        return backup_result()
    monkeypatch.setattr(acting, "take_backup", take)
    assert supervisor.reconcile_once() == 600
    assert seen == [{"time": "2024-01-01T12:00:00Z", "observedGeneration": 1}]  # written before the snapshot
    assert api.patches[0] == {"attemptStarted": seen[0]}
    assert api.patches[-1]["attemptStarted"] is None  # the outcome removes it
    assert "attemptStarted" not in (supervisor.context.backups.get(KEY) or {})["status"]


@pytest.mark.parametrize("earlier_failures, backoff", [(0, 5.0), (1, 10.0), (5, 160.0), (9, 300.0)])
def test_a_backup_whose_operator_died_mid_way_counts_as_a_failed_attempt_and_backs_off(
        monkeypatch: pytest.MonkeyPatch, earlier_failures: int, backoff: float) -> None:
    """The kubelet evicts the operator mid-backup: after the restart the same backup is not due
    at once (first in line again, evicted again, forever) but after the backoff."""
    def evicted(*args: Any, **kwargs: Any) -> BackupResult:
        raise CrashingTake()
    monkeypatch.setattr(acting, "take_backup", evicted)
    last = (NOW - timedelta(seconds=3600)).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {"observedGeneration": 1, "succeeded": earlier_failures == 0, "lastAttemptTime": last,
              "consecutiveFailures": earlier_failures, "lastResult": "Succeeded" if earlier_failures == 0
              else "S3Unreachable", "firstAttemptTime": last}
    supervisor, api, _, _ = make_supervisor(PERIODIC)
    supervisor.context.backups.upsert(stored_backup(PERIODIC, status=status))
    with pytest.raises(CrashingTake):
        supervisor.reconcile_once()
    # A new operator process: the same cache contents (as the API has them), a new supervisor.
    restarted = BackupSupervisor(KEY, supervisor.context)
    taken: list[int] = []
    monkeypatch.setattr(acting, "take_backup", lambda *a, **k: taken.append(1) or backup_result())
    assert restarted.reconcile_once() == backoff
    assert taken == []
    # Once due, the next attempt's outcome counts the interrupted one.
    monkeypatch.setattr(acting, "take_backup", lambda *a, **k: (_ for _ in ()).throw(
        BackupFailed("S3Unreachable", "cannot reach the S3 server")))
    later = NOW + timedelta(seconds=backoff)
    object.__setattr__(restarted.context, "clock", lambda: later)
    restarted.reconcile_once()
    assert api.patches[-1]["consecutiveFailures"] == earlier_failures + 2
    assert api.patches[-1]["attemptStarted"] is None


def test_a_backup_is_not_started_when_its_start_cannot_be_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acting, "take_backup", lambda *a, **k: pytest.fail("started without its start recorded"))
    supervisor, _, _, _ = make_supervisor(PERIODIC)

    class Refusing(FakeBackupApi):
        def patch_status(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
            raise Transient("503 Service Unavailable")
    object.__setattr__(supervisor.context, "backup_api", Refusing(supervisor.context.backups))
    with pytest.raises(Transient):
        supervisor.reconcile_once()
