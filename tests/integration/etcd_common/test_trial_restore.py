"""Trial restores (spec.trialRestore) without the Kubernetes sandbox: a backup taken from a real
local etcd onto Google Cloud Storage (fake-gcs-server) as the backup operator takes it, then one
EtcdBackup's pass (its supervisor, the API faked at our adapter boundary) restores it into a
throwaway etcd and records the verification; the object overwritten with damaged bytes, the next
trial fails as BackupObjectCorrupt, and the metrics the EtcdBackupNotVerified alert compares say
so. A record that does not match what the snapshot holds is BackupContentMismatch; a compressed,
encrypted backup is decoded with the spec's key, and damaged it is BackupObjectCorrupt too."""
from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from backup_operator import reasons
from backup_operator.endpoint_policy import EndpointPolicy
from backup_operator.metrics import BackupMetrics
from backup_operator.observing import parse_last_backup
from backup_operator.reasons import BackupFailed
from backup_operator.status import CONDITION_VERIFIED, success_status
from backup_operator.supervisor import BackupSupervisor, SupervisorContext
from backup_operator.taking import WORK_PREFIX, BackupEnvironment, BackupRequest, take_backup
from backup_operator.trial_restore import restore_on_trial
from etcd_common.api.etcd_backup import parse_etcd_backup
from etcd_common.etcd.access import EtcdAccess
from etcd_common.storage.locations import split_location, storage_for_location
from kube_adapter.errors import NotFound
from kube_sandbox.fake_gcs import FakeGcs
from operator_runtime.cache import ObjectCache
from tests.integration.etcdctl.etcd_processes import EtcdCluster, etcd_dir

KEYS = 150
TAKEN = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
TRIAL_INTERVAL_SECONDS = 600
MAX_AGE_SECONDS = 1800
KEY = ("ns", "b")


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A one-member etcd 3.6 with KEYS keys, some overwritten and deleted, compacted; its client URL."""
    cluster = EtcdCluster(binary=str(etcd_dir("3.6.16") / "etcd"), workdir=tmp_path_factory.mktemp("etcd"),
                          token="trial-restore")
    member = cluster.start_seed()
    etcdctl = cluster.etcdctl()
    for index in range(KEYS + 10):
        etcdctl.put(f"key{index}", f"value-{index}")
    for index in range(KEYS, KEYS + 10):
        etcdctl.put(f"key{index}", "overwritten")
    for index in range(KEYS, KEYS + 10):
        etcdctl._run(["del", f"key{index}"], output="simple")
    etcdctl._run(["compact", str(KEYS)], output="simple")  # the keyspace hash covers the compaction too
    yield member.client_url
    cluster.stop()


class FakeBackupApi:
    """The EtcdBackup's status subresource: merge patches applied as the API server does."""

    def __init__(self, cache: ObjectCache) -> None:
        self.cache = cache

    def patch_status(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        current = self.cache.get((namespace, name)) or {}
        status = {k: v for k, v in {**(current.get("status") or {}), **patch}.items() if v is not None}
        return {**current, "status": status}


class FakeEvents:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []

    def record(self, involved: dict[str, Any], type: str, reason: str, message: str) -> None:
        self.recorded.append((type, reason, message))


def test_a_good_backup_is_verified_and_a_corrupted_one_is_reported(etcd: str, fake_gcs: FakeGcs,
                                                                   tmp_path: Path) -> None:
    secrets = {"gcp": {"stringData": {"access-token": "any-token"}}}

    def read_secret(namespace: str, secret: str) -> dict[str, Any]:
        if secret not in secrets:
            raise NotFound(f"secret {namespace}/{secret}")
        return secrets[secret]

    def no_cluster(namespace: str, cluster: str) -> dict[str, Any]:
        raise AssertionError("the spec names endpoints, not a cluster")
    raw: dict[str, Any] = {
        "apiVersion": "etcd.database.coreos.com/v1beta2", "kind": "EtcdBackup",
        "metadata": {"namespace": "ns", "name": "b", "uid": "u", "generation": 1},
        "spec": {"storageType": "GCS", "gcs": {"path": "trials/etcd.backup", "gcpSecret": "gcp",
                                                "endpoint": fake_gcs.endpoint},
                 "etcdEndpoints": [etcd], "backupPolicy": {"backupIntervalInSecond": 3600},
                 "trialRestore": {"intervalInSecond": TRIAL_INTERVAL_SECONDS,
                                  "maxUnverifiedAgeInSecond": MAX_AGE_SECONDS}}}
    spec = parse_etcd_backup(raw).spec
    assert spec is not None
    request = BackupRequest.from_spec("ns", "b", spec, timeout_seconds=120)
    env = BackupEnvironment(read_secret=read_secret, read_etcd_cluster=no_cluster, etcd=EtcdAccess(read_secret),
                            work_dir=str(tmp_path / "work"), etcd_binary=str(etcd_dir("3.6.16") / "etcd"))
    storage = storage_for_location(request.location, "ns", read_secret)
    bucket, _ = split_location(request.location)
    storage.create_bucket(bucket)
    try:
        result = take_backup(request, env, logging.getLogger("test"), now=lambda: TAKEN)
        fingerprint = result.fingerprint
        assert fingerprint is not None and fingerprint.key_count == KEYS, fingerprint
        assert fingerprint.hash_kv is not None and fingerprint.revision >= result.etcd_revision

        # The supervisor's pass: the backup is not due (taken just now), the first trial restore is.
        raw["status"] = success_status({}, 1, result, TAKEN)
        cache = ObjectCache()
        cache.upsert(raw)
        events, metrics = FakeEvents(), BackupMetrics()
        clock = [TAKEN + timedelta(seconds=5)]
        context = SupervisorContext(backups=cache, backup_api=FakeBackupApi(cache),  # type: ignore[arg-type]
                                    environment=env, events=events,  # type: ignore[arg-type]
                                    metrics=metrics, stop=threading.Event(), clock=lambda: clock[0],
                                    min_interval_seconds=60, endpoint_policy=EndpointPolicy(allowed_hosts=("127.*",)))
        supervisor = BackupSupervisor(KEY, context)
        delay = supervisor.reconcile_once()
        status = cache.get(KEY)["status"]  # type: ignore[index]
        trial = status["trialRestore"]
        assert trial["lastResult"] == reasons.VERIFIED, trial
        assert (trial["verifiedObject"], trial["verifiedRevision"], trial["keyCount"]) == \
               (result.key, fingerprint.revision, KEYS)
        assert trial["hashCompared"] is True and trial["restoreSeconds"] > 0
        assert trial["verifiedBackupTime"] == "2026-03-04T05:06:07Z"
        verified = next(c for c in status["conditions"] if c["type"] == CONDITION_VERIFIED)
        assert (verified["status"], verified["reason"]) == ("True", reasons.VERIFIED)
        assert status["lastBackup"]["key"] == result.key and status["succeeded"] is True  # the backup's fields stay
        assert TRIAL_INTERVAL_SECONDS - 10 <= delay <= TRIAL_INTERVAL_SECONDS
        labels = {"namespace": "ns", "backup": "b"}
        supervisor.reconcile_once()  # not due: the metrics are read back from status
        assert metrics.last_verified_backup_timestamp_seconds.labels(**labels)._value.get() == TAKEN.timestamp()
        assert metrics.max_unverified_age_seconds.labels(**labels)._value.get() == MAX_AGE_SECONDS
        assert metrics.trial_restores_total.labels(**labels, result="succeeded")._value.get() == 1
        assert not list((tmp_path / "work").glob(f"{WORK_PREFIX}*"))  # the trial's directory removed

        # The object overwritten with damaged bytes: the next trial fails, one Warning event, and
        # the newest verified backup stays the one before (the alert's comparison now holds).
        damaged = tmp_path / "damaged"
        storage.download_file(bucket, result.key, str(damaged))
        data = bytearray(damaged.read_bytes())
        data[len(data) // 2:len(data) // 2 + 64] = bytes(b ^ 0xFF for b in data[len(data) // 2:len(data) // 2 + 64])
        damaged.write_bytes(bytes(data))
        storage.upload_file(bucket, result.key, str(damaged))
        for _ in range(2):
            clock[0] += timedelta(seconds=TRIAL_INTERVAL_SECONDS + 1)
            supervisor.reconcile_once()
            trial = cache.get(KEY)["status"]["trialRestore"]  # type: ignore[index]
            assert trial["lastResult"] == reasons.BACKUP_OBJECT_CORRUPT, trial
        assert "integrity check" in trial["message"] and trial["verifiedObject"] == result.key
        warnings = [e for e in events.recorded if e[0] == "Warning"]
        assert [e[1] for e in warnings] == [reasons.BACKUP_OBJECT_CORRUPT]  # once per reason, not per trial
        condition = next(c for c in cache.get(KEY)["status"]["conditions"]  # type: ignore[index]
                         if c["type"] == CONDITION_VERIFIED)
        assert (condition["status"], condition["reason"]) == ("False", reasons.BACKUP_OBJECT_CORRUPT)
        assert metrics.trial_restores_total.labels(**labels, result="failed")._value.get() == 2
        supervisor.reconcile_once()
        last_verified = metrics.last_verified_backup_timestamp_seconds.labels(**labels)._value.get()
        assert last_verified == TAKEN.timestamp()
        later = TAKEN + timedelta(seconds=MAX_AGE_SECONDS + 1)  # EtcdBackupNotVerified's expression
        assert later.timestamp() - last_verified > metrics.max_unverified_age_seconds.labels(**labels)._value.get()
        assert not list((tmp_path / "work").glob(f"{WORK_PREFIX}*"))
    finally:
        for listed in storage.list(bucket):
            storage.delete(bucket, listed.key)
        storage.delete_bucket(bucket)


def test_a_backup_that_does_not_hold_what_was_recorded_is_a_content_mismatch(
        etcd: str, fake_gcs: FakeGcs, tmp_path: Path) -> None:
    """The snapshot restores, but the record says other keys: BackupContentMismatch, naming it."""
    secrets = {"gcp": {"stringData": {"access-token": "any-token"}}}
    raw: dict[str, Any] = {
        "metadata": {"namespace": "ns", "name": "m"},
        "spec": {"storageType": "GCS", "gcs": {"path": "mismatch/etcd.backup", "gcpSecret": "gcp",
                                                "endpoint": fake_gcs.endpoint},
                 "etcdEndpoints": [etcd], "trialRestore": {"intervalInSecond": 60}}}
    backup = parse_etcd_backup(raw)
    assert backup.spec is not None
    env = BackupEnvironment(read_secret=lambda ns, name: secrets[name], read_etcd_cluster=lambda ns, name: {},
                            etcd=EtcdAccess(lambda ns, name: secrets[name]), work_dir=str(tmp_path / "work"),
                            etcd_binary=str(etcd_dir("3.6.16") / "etcd"))
    request = BackupRequest.from_spec("ns", "m", backup.spec, timeout_seconds=120)
    storage = storage_for_location(request.location, "ns", env.read_secret)
    bucket, _ = split_location(request.location)
    storage.create_bucket(bucket)
    try:
        result = take_backup(request, env, logging.getLogger("test"), now=lambda: TAKEN)
        status = success_status({}, 1, result, TAKEN)
        status["lastBackup"]["keyCount"] = KEYS + 1
        last_backup = parse_last_backup(status)
        assert last_backup is not None
        with pytest.raises(BackupFailed) as failed:
            restore_on_trial(backup, last_backup, env, logging.getLogger("test"))
        assert failed.value.reason == reasons.BACKUP_CONTENT_MISMATCH
        assert f"{KEYS} keys at revision" in failed.value.message and f"recorded {KEYS + 1}" in failed.value.message
    finally:
        for listed in storage.list(bucket):
            storage.delete(bucket, listed.key)
        storage.delete_bucket(bucket)


def test_a_compressed_encrypted_backup_is_verified_with_its_key_and_a_damaged_one_is_corrupt(
        etcd: str, fake_gcs: FakeGcs, tmp_path: Path) -> None:
    """spec.compression Gzip + spec.encryption: the trial decodes the object with the spec's key;
    without the key it says so (EncryptionKeyMissing); one changed byte fails authentication
    (BackupObjectCorrupt)."""
    key = bytes(range(32))
    secrets: dict[str, Any] = {"gcp": {"stringData": {"access-token": "any-token"}},
                               "backup-key": {"stringData": {"key": base64.b64encode(key).decode()}}}

    def read_secret(namespace: str, name: str) -> dict[str, Any]:
        if name not in secrets:
            raise NotFound(f"secret {namespace}/{name}")
        return secrets[name]
    raw: dict[str, Any] = {
        "metadata": {"namespace": "ns", "name": "e"},
        "spec": {"storageType": "GCS", "gcs": {"path": "encrypted/etcd.backup", "gcpSecret": "gcp",
                                                "endpoint": fake_gcs.endpoint},
                 "etcdEndpoints": [etcd], "compression": "Gzip", "encryption": {"secretName": "backup-key"},
                 "trialRestore": {"intervalInSecond": 60}}}
    backup = parse_etcd_backup(raw)
    assert backup.spec is not None
    env = BackupEnvironment(read_secret=read_secret, read_etcd_cluster=lambda ns, name: {},
                            etcd=EtcdAccess(read_secret), work_dir=str(tmp_path / "work"),
                            etcd_binary=str(etcd_dir("3.6.16") / "etcd"))
    request = BackupRequest.from_spec("ns", "e", backup.spec, timeout_seconds=120)
    storage = storage_for_location(request.location, "ns", read_secret)
    bucket, _ = split_location(request.location)
    storage.create_bucket(bucket)
    log = logging.getLogger("test")
    try:
        result = take_backup(request, env, log, now=lambda: TAKEN)
        last_backup = parse_last_backup(success_status({}, 1, result, TAKEN))
        assert last_backup is not None and result.key_id
        verified = restore_on_trial(backup, last_backup, env, log)
        assert verified.hash_compared and verified.facts.key_count == KEYS

        secrets.pop("backup-key")
        with pytest.raises(BackupFailed) as missing:
            restore_on_trial(backup, last_backup, env, log)
        assert missing.value.reason == "EncryptionKeyMissing"
        secrets["backup-key"] = {"stringData": {"key": base64.b64encode(key).decode()}}

        damaged = tmp_path / "damaged"
        storage.download_file(bucket, result.key, str(damaged))
        data = bytearray(damaged.read_bytes())
        data[-100] ^= 0xFF
        damaged.write_bytes(bytes(data))
        storage.upload_file(bucket, result.key, str(damaged))
        with pytest.raises(BackupFailed) as corrupt:
            restore_on_trial(backup, last_backup, env, log)
        assert corrupt.value.reason == reasons.BACKUP_OBJECT_CORRUPT and "failed authentication" in corrupt.value.message
        assert not list((tmp_path / "work").glob(f"{WORK_PREFIX}*"))
    finally:
        for listed in storage.list(bucket):
            storage.delete(bucket, listed.key)
        storage.delete_bucket(bucket)
