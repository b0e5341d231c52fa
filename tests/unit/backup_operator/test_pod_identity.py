"""The backup operator lends its own pod identity to EtcdBackups without a storage secret only
where its administrator allowed it (`--allow-pod-identity`, BACKUP_ALLOW_POD_IDENTITY, default
off): otherwise the backup fails with CredentialsRequired before any secret, etcd member or
bucket is touched, and is retried slowly (enabling the flag recovers without a spec change). The
one-shot command runs in its own pod (a CronJob's ServiceAccount) and uses that pod's identity."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from backup_operator import oneshot, reasons
from backup_operator.controller import backup_environment
from backup_operator.reasons import BackupFailed
from backup_operator.settings import parse_settings
from backup_operator.taking import BackupEnvironment, BackupRequest, take_backup
from etcd_common.api.storage_locations import OtherLocation, S3Location, StorageLocation
from etcd_common.storage import gcs, s3
from tests.unit.backup_operator.storage_fakes import FakeStorage


class Untouchable:
    """Etcd access that must not be used: a refused backup asks etcd for nothing."""

    def client_with_secret(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("etcd may not be asked for a refused backup")


def no_api(namespace: str, name: str) -> dict[str, Any]:
    raise AssertionError("no API read expected")


def request(location: StorageLocation) -> BackupRequest:
    return BackupRequest(namespace="tenant", owner="b", location=location, endpoints=("http://c-client.tenant.svc:2379",))


def environment(tmp_path: Path, *, allow_pod_identity: bool) -> BackupEnvironment:
    return BackupEnvironment(read_secret=no_api, read_etcd_cluster=no_api, etcd=Untouchable(),  # type: ignore[arg-type]
                             work_dir=str(tmp_path), allow_pod_identity=allow_pod_identity)


def test_the_flag_defaults_off_and_comes_from_a_flag_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BACKUP_ALLOW_POD_IDENTITY", raising=False)
    assert parse_settings([]).allow_pod_identity is False
    assert parse_settings(["--allow-pod-identity"]).allow_pod_identity is True
    monkeypatch.setenv("BACKUP_ALLOW_POD_IDENTITY", "true")
    assert parse_settings([]).allow_pod_identity is True


def test_the_setting_reaches_the_environment_backups_are_taken_with() -> None:
    for allowed in (False, True):
        env = backup_environment(object(), work_dir="/w", etcdctl_binary=None, etcdutl_binary=None,  # type: ignore[arg-type]
                                 allow_pod_identity=allowed)
        assert env.allow_pod_identity is allowed
    assert backup_environment(object(), work_dir="/w", etcdctl_binary=None,  # type: ignore[arg-type]
                              etcdutl_binary=None).allow_pod_identity is False


@pytest.mark.parametrize("location", [
    StorageLocation("S3", s3=S3Location("bucket/key")),
    StorageLocation("GCS", other=OtherLocation("bucket/key")),
    StorageLocation("OSS", other=OtherLocation("bucket/key")),
    StorageLocation("ABS", other=OtherLocation("bucket/key")),
], ids=lambda location: location.storage_type)
def test_a_backup_without_a_secret_is_refused_before_anything_is_touched(tmp_path: Path, location: StorageLocation,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def no_client(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no storage client may be built")
    monkeypatch.setattr(s3, "storage_for_location", no_client)
    monkeypatch.setattr(gcs, "storage_for_location", no_client)
    with pytest.raises(BackupFailed) as failure:
        take_backup(request(location), environment(tmp_path, allow_pod_identity=False), logging.getLogger("test"))
    assert failure.value.reason == reasons.CREDENTIALS_REQUIRED == "CredentialsRequired"
    assert "--allow-pod-identity is off" in failure.value.message
    assert reasons.CREDENTIALS_REQUIRED in reasons.FAILURE_REASONS and not failure.value.transient
    assert list(tmp_path.iterdir()) == []


def test_with_the_flag_a_backup_without_a_secret_gets_a_client_from_the_default_chain(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[tuple[S3Location, str]] = []

    def storage_for_location(location: S3Location, namespace: str, read_secret: Any, **options: Any) -> FakeStorage:
        built.append((location, namespace))
        return FakeStorage()
    monkeypatch.setattr(s3, "storage_for_location", storage_for_location)
    location = StorageLocation("S3", s3=S3Location("bucket/key"))
    with pytest.raises(AssertionError, match="etcd may not be asked"):  # past the storage client: etcd is next
        take_backup(request(location), environment(tmp_path, allow_pod_identity=True), logging.getLogger("test"))
    assert built == [(location.s3, "tenant")]


def test_the_one_shot_command_uses_its_own_pods_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[bool] = []

    def environment(api: Any, **kwargs: Any) -> Any:
        asked.append(kwargs.get("allow_pod_identity", False))
        return None

    def take(request: BackupRequest, env: Any, log: Any) -> Any:
        raise BackupFailed(reasons.ETCD_UNREACHABLE, "stop here")
    monkeypatch.setattr(oneshot, "load_api_client", lambda kubeconfig: object())
    monkeypatch.setattr(oneshot, "backup_environment", environment)
    monkeypatch.setattr(oneshot, "take_backup", take)
    assert oneshot.main(["--namespace=tenant", "--s3-path=bucket/key", "--endpoints=http://c-client.tenant.svc:2379"]) == 1
    assert asked == [True]
