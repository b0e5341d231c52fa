"""The effect of TakeBackup: one backup of the EtcdBackup's spec, taken by `taking.py` (snapshot,
check, upload, retention) within the spec's timeout. Raises `BackupFailed` with the reason."""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from backup_operator.observed import BackupResult
from backup_operator.schedule import timeout_seconds
from backup_operator.taking import BackupEnvironment, BackupRequest, Logger, take_backup
from etcd_common.api.etcd_backup import EtcdBackup


def take(backup: EtcdBackup, environment: BackupEnvironment, log: Logger, now: Callable[[], datetime]) -> BackupResult:
    assert backup.spec is not None
    request = BackupRequest.from_spec(backup.namespace, backup.name, backup.spec,
                                      timeout_seconds=timeout_seconds(backup.spec))
    return take_backup(request, environment, log, now=now)
