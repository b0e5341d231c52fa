"""One EtcdBackup's pass with the API faked at our adapter boundary: what it writes to status,
which events it records, and how long it sleeps."""
from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from backup_operator import reasons, runner
from backup_operator.backup_status import BackupResult
from backup_operator.metrics import BackupMetrics
from backup_operator.reasons import BackupFailed
from backup_operator.runner import BackupRunner, RunnerContext
from operator_runtime.cache import ObjectCache

NOW = datetime(2024, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
KEY = ("ns", "b")


class FakeBackupApi:
    def __init__(self, cache: ObjectCache) -> None:
        self.cache = cache
        self.patches: list[dict[str, Any]] = []

    def patch_status(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patches.append(patch)
        current = self.cache.get((namespace, name)) or {}
        status = {k: v for k, v in {**(current.get("status") or {}), **patch}.items() if v is not None}
        return {**current, "status": status}


class FakeEvents:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []

    def record(self, involved: dict[str, Any], type: str, reason: str, message: str) -> None:
        self.recorded.append((type, reason, message))


def make_runner(spec: Any, generation: int = 1) -> tuple[BackupRunner, FakeBackupApi, FakeEvents, BackupMetrics]:
    cache = ObjectCache()
    cache.upsert({"apiVersion": "etcd.database.coreos.com/v1beta2", "kind": "EtcdBackup",
                  "metadata": {"namespace": "ns", "name": "b", "uid": "u", "generation": generation}, "spec": spec})
    api, events, metrics = FakeBackupApi(cache), FakeEvents(), BackupMetrics()
    context = RunnerContext(backups=cache, backup_api=api, environment=None, events=events,  # type: ignore[arg-type]
                            metrics=metrics, stop=threading.Event(), clock=lambda: NOW)
    return BackupRunner(KEY, context), api, events, metrics


PERIODIC = {"etcdEndpoints": ["http://e:2379"], "storageType": "S3", "s3": {"path": "bucket/etcd.backup"},
            "backupPolicy": {"backupIntervalInSecond": 600}}


def result() -> BackupResult:
    return BackupResult(key="etcd.backup_v5_x", size=10, sha256="s", etcd_revision=5, etcd_version="3.6.16",
                        started=NOW, duration_seconds=1.0)


def test_unsupported_storage_is_reported_once_per_generation() -> None:
    backup_runner, api, events, metrics = make_runner({"etcdEndpoints": ["http://e:2379"], "storageType": "OSS",
                                                       "oss": {"path": "b/k"}})
    assert backup_runner.reconcile_once() == runner.IDLE_SECONDS
    assert backup_runner.reconcile_once() == runner.IDLE_SECONDS
    assert len(api.patches) == 1 and api.patches[0]["lastResult"] == reasons.UNSUPPORTED_STORAGE_TYPE
    assert events.recorded == [("Warning", reasons.UNSUPPORTED_STORAGE_TYPE, api.patches[0]["conditions"][0]["message"])]
    assert metrics.failures_total.labels(reason=reasons.UNSUPPORTED_STORAGE_TYPE)._value.get() == 1


def test_success_writes_status_event_metrics_and_sleeps_one_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "take_backup", lambda request, env, log, now: result())
    backup_runner, api, events, metrics = make_runner(PERIODIC)
    assert backup_runner.reconcile_once() == 600
    assert api.patches[-1]["succeeded"] is True and api.patches[-1]["lastBackup"]["key"] == "etcd.backup_v5_x"
    assert events.recorded[0][:2] == ("Normal", reasons.SUCCEEDED)
    labels = {"namespace": "ns", "backup": "b"}
    assert metrics.last_size_bytes.labels(**labels)._value.get() == 10
    assert metrics.backups_total.labels(**labels, result="succeeded")._value.get() == 1


def test_failure_writes_reason_and_warning_and_retries_with_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(request: Any, env: Any, log: Any, now: Any) -> BackupResult:
        raise BackupFailed("S3Unreachable", "cannot reach the S3 server")
    monkeypatch.setattr(runner, "take_backup", fail)
    backup_runner, api, events, metrics = make_runner(PERIODIC)
    assert backup_runner.reconcile_once() == 5.0
    status = api.patches[-1]
    assert (status["succeeded"], status["lastResult"], status["consecutiveFailures"]) == (False, "S3Unreachable", 1)
    assert events.recorded == [("Warning", "S3Unreachable", "cannot reach the S3 server")]
    assert metrics.failures_total.labels(reason="S3Unreachable")._value.get() == 1


def test_crash_in_a_backup_is_a_failure_in_status(monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(request: Any, env: Any, log: Any, now: Any) -> BackupResult:
        raise RuntimeError("bug")
    monkeypatch.setattr(runner, "take_backup", crash)
    backup_runner, api, events, _ = make_runner(PERIODIC)
    backup_runner.reconcile_once()
    assert api.patches[-1]["lastResult"] == reasons.INTERNAL_ERROR and "bug" in api.patches[-1]["Reason"]


def test_not_due_yet_sleeps_until_due(monkeypatch: pytest.MonkeyPatch) -> None:
    backup_runner, api, _, _ = make_runner(PERIODIC)
    raw = backup_runner.context.backups.get(KEY)
    assert raw is not None
    raw["status"] = {"observedGeneration": 1, "succeeded": True, "consecutiveFailures": 0,
                     "lastAttemptTime": (NOW - timedelta(seconds=100)).strftime("%Y-%m-%dT%H:%M:%SZ")}
    backup_runner.context.backups.upsert(raw)
    monkeypatch.setattr(runner, "take_backup", lambda *a, **k: pytest.fail("no backup is due"))
    assert backup_runner.reconcile_once() == 500
    assert api.patches == []


def test_not_leading_takes_no_backup(monkeypatch: pytest.MonkeyPatch) -> None:
    backup_runner, api, _, _ = make_runner(PERIODIC)
    object.__setattr__(backup_runner.context, "may_act", lambda: False)
    monkeypatch.setattr(runner, "take_backup", lambda *a, **k: pytest.fail("not the leader"))
    assert backup_runner.reconcile_once() == runner.NOT_LEADING_DELAY_SECONDS
    assert api.patches == []
