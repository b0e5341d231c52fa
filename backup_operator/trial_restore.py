"""A trial restore (spec.trialRestore), the effects: download the newest backup this EtcdBackup
took (status.lastBackup.key) through the storage layer, decode it (compression, encryption: with
the spec's key), check the SHA-256 trailer, read it with `etcdutl snapshot status`, restore it with
`etcdutl snapshot restore` into a directory of its own in the work directory, serve it with a
throwaway etcd on 127.0.0.1 (`etcd_common.etcd.throwaway`: no cluster is touched) just long enough
to read the revision it serves, its keys and keyspace hash at the snapshot's revision; then the
etcd is killed and the directory removed, whatever happened. `verification.mismatches` compares.

Every failure is raised as `BackupFailed` with a reason: BackupObjectCorrupt (the object does not
decode, or is not a whole etcd snapshot), BackupContentMismatch (it restores, but not to what was
recorded), TrialRestoreFailed (etcdutl or etcd failed otherwise), TrialRestoreTimedOut, the
storage's reasons (S3ObjectNotFound, ...) and the encryption key's.
"""
from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from backup_operator import reasons
from backup_operator.observed import TrialFacts
from backup_operator.reasons import BackupFailed
from backup_operator.taking import (
    WORK_PREFIX,
    BackupEnvironment,
    BackupRequest,
    Logger,
    spec_encoding,
    split_or_fail,
    storage_client,
    work_bytes_needed,
)
from backup_operator.verification import mismatches
from etcd_common.api.etcd_backup import EtcdBackup, LastBackup
from etcd_common.etcd import etcdctl as ctl
from etcd_common.etcd import etcdutl, throwaway
from etcd_common.etcd.snapshot_integrity import verify_snapshot_file
from etcd_common.storage import codec
from etcd_common.storage.locations import object_url
from etcd_common.storage.objects import ObjectStorage, StorageError

OBJECT_FILE = "object"
SNAPSHOT_FILE = "snapshot.db"
DATA_DIR = "data"
CLUSTER_TOKEN = "trial-restore"


@dataclass(frozen=True)
class TrialResult:
    facts: TrialFacts
    hash_compared: bool


def restore_on_trial(backup: EtcdBackup, last_backup: LastBackup, env: BackupEnvironment, log: Logger,
                     *, monotonic: Callable[[], float] = time.monotonic) -> TrialResult:
    """Restore `last_backup` into a throwaway etcd and compare it with its record, within
    spec.trialRestore.timeoutInSecond. Raises BackupFailed."""
    assert backup.spec is not None and backup.spec.trial_restore is not None
    limit = backup.spec.trial_restore.timeout_seconds
    started = monotonic()

    def remaining() -> float:
        left = started + limit - monotonic()
        if left <= 0:
            raise BackupFailed(reasons.TRIAL_TIMED_OUT,
                               f"the trial restore did not finish within {limit}s (trialRestore.timeoutInSecond)")
        return left

    request = BackupRequest.from_spec(backup.namespace, backup.name, backup.spec, timeout_seconds=limit)
    bucket, _ = split_or_fail(request.location)
    storage, encoding = storage_client(request, env), spec_encoding(request, env)
    where = object_url(request.location, bucket, last_backup.key)
    try:
        info = storage.head(bucket, last_backup.key)
    except StorageError as error:
        raise BackupFailed(error.reason, error.message) from error
    os.makedirs(env.work_dir, exist_ok=True)
    # The object (and its decoded copy) plus the restored data directory, about the snapshot's size
    # again; approximate for a compressed object, whose decoded size is known only once decoded.
    needed = work_bytes_needed(info.size, encoding.identity) + info.size
    with env.work_space.reserve(env.work_dir, needed), \
            tempfile.TemporaryDirectory(prefix=f"{WORK_PREFIX}trial-{backup.namespace}_{backup.name}_",
                                        dir=env.work_dir) as directory:
        path = _download(storage, bucket, info.key, info.etag, info.version_id, directory, encoding.key, where)
        facts = _restore_and_read(path, last_backup.key, directory, env, remaining, where)
        facts = replace(facts, restore_seconds=monotonic() - started)
    problems, hash_compared = mismatches(last_backup, facts)
    if problems:
        raise BackupFailed(reasons.BACKUP_CONTENT_MISMATCH,
                           f"{where} restores, but not to what was recorded when it was taken: " + "; ".join(problems))
    log.info("trial restore of %s verified: revision %d, %d keys, keyspace hash %s, %.1fs", where,
             facts.snapshot_revision, facts.key_count, "compared" if hash_compared else "not comparable",
             facts.restore_seconds)
    return TrialResult(facts, hash_compared)


def _download(storage: ObjectStorage, bucket: str, key: str, etag: str, version_id: str, directory: str,
              encryption_key: bytes | None, where: str) -> str:
    """The object downloaded (that version only) and decoded into SNAPSHOT_FILE; its path."""
    object_path, path = os.path.join(directory, OBJECT_FILE), os.path.join(directory, SNAPSHOT_FILE)
    try:
        storage.download_file(bucket, key, object_path, if_match=etag, version_id=version_id)
    except StorageError as error:
        raise BackupFailed(error.reason, error.message) from error
    if not codec.file_is_encoded(object_path):
        os.rename(object_path, path)
        return path
    try:
        codec.decode_file(object_path, path, encryption_key, where=where)
    except (codec.KeyMissing, codec.KeyWrong, codec.KeyInvalid) as error:
        raise BackupFailed(error.reason, error.message) from error
    except codec.CodecError as error:
        raise BackupFailed(reasons.BACKUP_OBJECT_CORRUPT, error.message) from error
    finally:
        os.remove(object_path)
    return path


def _restore_and_read(path: str, key: str, directory: str, env: BackupEnvironment, remaining: Callable[[], float],
                      where: str) -> TrialFacts:
    """Check the snapshot, restore it, serve it with a throwaway etcd and read what it holds."""
    try:
        sha256 = verify_snapshot_file(path, where=where)
        status = etcdutl.snapshot_status(path, binary=env.etcdutl_binary, timeout_seconds=remaining())
        peer_port = throwaway.free_loopback_port()
        data_dir = os.path.join(directory, DATA_DIR)
        etcdutl.snapshot_restore(path, data_dir=data_dir, name=throwaway.MEMBER_NAME,
                             initial_cluster=f"{throwaway.MEMBER_NAME}={throwaway.peer_url(peer_port)}",
                             initial_advertise_peer_urls=[throwaway.peer_url(peer_port)],
                             initial_cluster_token=CLUSTER_TOKEN, binary=env.etcdutl_binary,
                             timeout_seconds=remaining())
    except ctl.SnapshotInvalid as error:
        raise BackupFailed(reasons.BACKUP_OBJECT_CORRUPT, f"{where}: {error.message}") from error
    except ctl.EtcdctlError as error:
        raise BackupFailed(reasons.TRIAL_RESTORE_FAILED, f"{where}: {error.message}") from error
    try:
        with throwaway.serve_data_dir(data_dir, peer_port, remaining=remaining, binary=env.etcd_binary,
                                      etcdctl_binary=env.etcdctl_binary) as client:
            served = client.endpoint_status()[0].revision
            hashed = client.hash_kv(status.revision)
            count = client.key_count(status.revision)
    except (ctl.EtcdctlError, ValueError, IndexError) as error:
        remaining()  # out of time: say so rather than what the kill broke
        raise BackupFailed(reasons.TRIAL_RESTORE_FAILED,
                           f"{where} restored, but the throwaway etcd could not be read: {error}") from error
    return TrialFacts(key=key, sha256=sha256, snapshot_revision=status.revision, served_revision=served,
                      key_count=count, hash_kv=hashed.hash, compact_revision=hashed.compact_revision,
                      restore_seconds=0.0)
