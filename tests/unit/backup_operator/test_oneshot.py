"""`etcd-backup` (the CronJob's command): what it prints and its exit status. Taking the backup
itself is replaced (it is tested in test_taking.py and, for real, by the CronJob integration test)."""
from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from backup_operator import oneshot, reasons
from backup_operator.observed import BackupResult
from backup_operator.reasons import BackupFailed
from backup_operator.taking import BackupRequest
from etcd_common.storage.objects import ObjectInfo

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


@pytest.fixture
def kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    return str(path)


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[BackupRequest]:
    """The requests `etcd-backup` would have taken; each succeeds unless the test says otherwise."""
    requests: list[BackupRequest] = []
    monkeypatch.setattr(oneshot, "backup_environment", lambda *args, **kwargs: object())

    def take_backup(request: BackupRequest, environment: Any, log: Any) -> BackupResult:
        requests.append(request)
        return BackupResult(key="etcd.backup_v42_2026-01-02-03:04:05", size=1234, sha256="ab" * 32,
                            etcd_revision=42, etcd_version="3.6.16",
                            started=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), duration_seconds=1.5,
                            endpoint="http://127.0.0.1:2379", retained=2)
    monkeypatch.setattr(oneshot, "take_backup", take_backup)
    return requests


def args(kubeconfig: str, *more: str) -> list[str]:
    return ["--kubeconfig", kubeconfig, "--namespace", "ns", *more]


def test_a_backup_taken_exits_0_and_prints_one_json_line(
        kubeconfig: str, taken: list[BackupRequest], capsys: pytest.CaptureFixture[str]) -> None:
    code = oneshot.main(args(kubeconfig, "--etcd-cluster", "example", "--s3-path", "bucket/etcd.backup",
                             "--max-backups", "2"))
    out, err = capsys.readouterr()
    assert code == 0, err
    [line] = out.splitlines()
    printed = json.loads(line)
    assert printed["result"] == "succeeded"
    assert printed["object"] == "s3://bucket/etcd.backup_v42_2026-01-02-03:04:05"
    assert (printed["etcdRevision"], printed["retained"], printed["retentionError"]) == (42, 2, None)
    [request] = taken
    assert (request.etcd_cluster_name, request.periodic, request.max_backups) == ("example", True, 2)


def test_a_failed_backup_exits_1_with_its_reason_on_stderr(
        kubeconfig: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(oneshot, "backup_environment", lambda *args, **kwargs: object())

    def take_backup(request: BackupRequest, environment: Any, log: Any) -> BackupResult:
        raise BackupFailed(reasons.TIMED_OUT, "the backup did not finish within 60s (backupPolicy.timeoutInSecond)")
    monkeypatch.setattr(oneshot, "take_backup", take_backup)
    code = oneshot.main(args(kubeconfig, "--endpoints", "http://127.0.0.1:2379", "--s3-path", "bucket/k"))
    out, err = capsys.readouterr()
    assert code == oneshot.EXIT_FAILED == 1
    assert out == ""
    assert "backup failed: BackupTimedOut: the backup did not finish within 60s" in err


def test_a_backup_taken_whose_retention_failed_exits_1(
        kubeconfig: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(oneshot, "backup_environment", lambda *args, **kwargs: object())

    def take_backup(request: BackupRequest, environment: Any, log: Any) -> BackupResult:
        return BackupResult(key="k_v1_2026-01-02-03:04:05", size=1, sha256="", etcd_revision=1, etcd_version="3.6.16",
                            started=datetime(2026, 1, 2, tzinfo=UTC), duration_seconds=0.1,
                            retention_error="AccessDenied: s3:DeleteObject")
    monkeypatch.setattr(oneshot, "take_backup", take_backup)
    code = oneshot.main(args(kubeconfig, "--endpoints", "http://127.0.0.1:2379", "--s3-path", "bucket/k"))
    out, _ = capsys.readouterr()
    assert code == 1
    assert json.loads(out)["retentionError"] == "AccessDenied: s3:DeleteObject"  # the backup itself is reported


@pytest.mark.parametrize(("flags", "missing"), [
    (["--etcd-cluster", "example"], "--s3-path"),
    (["--s3-path", "bucket/k"], "--etcd-cluster or --endpoints"),
])
def test_a_request_without_source_or_destination_exits_1_naming_the_flag(
        kubeconfig: str, taken: list[BackupRequest], capsys: pytest.CaptureFixture[str],
        flags: list[str], missing: str) -> None:
    code = oneshot.main(args(kubeconfig, *flags))
    _, err = capsys.readouterr()
    assert code == 1
    assert "backup failed: InvalidSpec:" in err and missing in err
    assert taken == []


def test_a_malformed_flag_exits_2(kubeconfig: str, taken: list[BackupRequest],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        oneshot.main(args(kubeconfig, "--max-backups", "two"))
    assert exit_.value.code == oneshot.EXIT_USAGE == 2
    assert "--max-backups" in capsys.readouterr().err
    assert taken == []


def test_flags_override_the_template_and_the_environment_gives_defaults(
        kubeconfig: str, taken: list[BackupRequest], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("S3_PATH", "bucket/from-env")
    monkeypatch.setenv("MAX_BACKUPS", "5")
    assert oneshot.main(args(kubeconfig, "--endpoints", "http://127.0.0.1:2379")) == 0
    assert (taken[-1].location.path, taken[-1].max_backups) == ("bucket/from-env", 5)
    template = {
        "apiVersion": "etcd.database.coreos.com/v1beta2", "kind": "EtcdBackup",
        "metadata": {"name": "nightly", "namespace": "ns"},
        "spec": {"etcdEndpoints": ["http://127.0.0.1:2379"], "storageType": "S3",
                 "backupPolicy": {"maxBackups": 3, "timeoutInSecond": 90},
                 "s3": {"path": "bucket/nightly", "awsSecret": "aws"}},
    }
    parser = oneshot.build_parser()
    request = oneshot.build_request(parser.parse_args(["--namespace", "ns", "--from-backup", "nightly",
                                                       "--s3-path", "bucket/override"]), template)
    assert request.location.path == "bucket/override"  # the flag given wins
    assert request.location.secret == "aws" and request.endpoints == ("http://127.0.0.1:2379",)
    assert (request.max_backups, request.timeout_seconds, request.periodic) == (5, 90.0, True)


class ListedStorage:
    """A bucket as `etcd-backup --list` sees it: objects with their metadata."""

    def __init__(self, objects: dict[str, dict[str, str]]) -> None:
        self.objects = objects

    def list(self, bucket: str, prefix: str = "") -> list[ObjectInfo]:
        return [self._info(key) for key in self.objects if key.startswith(prefix)]

    def head(self, bucket: str, key: str, *, version_id: str = "") -> ObjectInfo:
        return self._info(key)

    def _info(self, key: str) -> ObjectInfo:
        return ObjectInfo(key=key, size=10, last_modified=datetime(2026, 1, 1, tzinfo=UTC),
                          metadata=self.objects[key])


@pytest.mark.parametrize(("one_shot_metadata", "revision"), [
    ({"etcd-revision": "17", "sha256": "ab" * 32}, 17),  # written by a one-shot backup
    ({}, None),  # put there by someone else
])
def test_the_listing_gives_a_one_shot_objects_revision_from_its_metadata(
        kubeconfig: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        one_shot_metadata: dict[str, str], revision: int | None) -> None:
    storage = ListedStorage({"etcd.backup": one_shot_metadata, "etcd.backup_v42_2026-01-02-03:04:05": {},
                             "etcd.backup_notes.txt": {}})
    monkeypatch.setattr(oneshot, "storage_for_location", lambda *args, **kwargs: storage)
    code = oneshot.main(args(kubeconfig, "--etcd-cluster", "example", "--s3-path", "bucket/etcd.backup", "--list"))
    out, err = capsys.readouterr()
    assert code == 0, err
    listed = [json.loads(line) for line in out.splitlines()]
    assert [(entry["object"], entry["etcdRevision"]) for entry in listed] == [
        ("s3://bucket/etcd.backup", revision), ("s3://bucket/etcd.backup_v42_2026-01-02-03:04:05", 42)]
