"""One EtcdBackup's pass with the API faked at our adapter boundary: what it writes to status,
which events it records, and how long it sleeps."""
from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from backup_operator import acting, reasons
from backup_operator.metrics import BackupMetrics
from backup_operator.observed import BackupResult
from backup_operator.reasons import BackupFailed
from backup_operator.schedule import IDLE_SECONDS
from backup_operator.supervisor import NOT_LEADING_DELAY_SECONDS, BackupSupervisor, SupervisorContext
from operator_runtime.cache import ObjectCache

NOW = datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)
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


def make_supervisor(spec: Any,
                    generation: int = 1) -> tuple[BackupSupervisor, FakeBackupApi, FakeEvents, BackupMetrics]:
    cache = ObjectCache()
    cache.upsert({"apiVersion": "etcd.database.coreos.com/v1beta2", "kind": "EtcdBackup",
                  "metadata": {"namespace": "ns", "name": "b", "uid": "u", "generation": generation}, "spec": spec})
    api, events, metrics = FakeBackupApi(cache), FakeEvents(), BackupMetrics()
    context = SupervisorContext(backups=cache, backup_api=api, environment=None,  # type: ignore[arg-type]
                                events=events, metrics=metrics, stop=threading.Event(), clock=lambda: NOW)
    return BackupSupervisor(KEY, context), api, events, metrics


PERIODIC = {"etcdEndpoints": ["http://e:2379"], "storageType": "S3", "s3": {"path": "bucket/etcd.backup"},
            "backupPolicy": {"backupIntervalInSecond": 600}}


def result() -> BackupResult:
    return BackupResult(key="etcd.backup_v5_x", size=10, sha256="s", etcd_revision=5, etcd_version="3.6.16",
                        started=NOW, duration_seconds=1.0)


def test_unsupported_storage_is_reported_once_per_generation() -> None:
    supervisor, api, events, metrics = make_supervisor({"etcdEndpoints": ["http://e:2379"], "storageType": "OSS",
                                                        "oss": {"path": "b/k"}})
    assert supervisor.reconcile_once() == IDLE_SECONDS
    assert supervisor.reconcile_once() == IDLE_SECONDS
    assert len(api.patches) == 1 and api.patches[0]["lastResult"] == reasons.UNSUPPORTED_STORAGE_TYPE
    assert events.recorded == [("Warning", reasons.UNSUPPORTED_STORAGE_TYPE, api.patches[0]["conditions"][0]["message"])]
    assert metrics.failures_total.labels(reason=reasons.UNSUPPORTED_STORAGE_TYPE)._value.get() == 1


def test_success_writes_status_event_metrics_and_sleeps_one_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acting, "take_backup", lambda request, env, log, now: result())
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
    object.__setattr__(supervisor.context, "may_act", lambda: False)
    monkeypatch.setattr(acting, "take_backup", lambda *a, **k: pytest.fail("not the leader"))
    assert supervisor.reconcile_once() == NOT_LEADING_DELAY_SECONDS
    assert api.patches == []
