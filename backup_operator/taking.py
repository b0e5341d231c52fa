"""Taking one backup: the effects. Resolve the etcd endpoints (given, or from an EtcdCluster),
pick the healthy member with the highest revision (members that fail are skipped), stream its
snapshot into a file in a directory of its own in the work directory (refused as
WorkDirectoryFull when the member's database, and its encoded copy, would not fit), check its
integrity (etcd's SHA-256 trailer; the revision read from its pages), compress and encrypt it if
the spec says so (checked again by decoding), upload it part by part to the object store the spec
names (S3, ABS, GCS or OSS), then apply retention. Used by the
operator's per-EtcdBackup supervisor (`acting.py`) and the one-shot command.

Every failure is raised as `BackupFailed` with a reason from `backup_operator.reasons`.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any, cast

from backup_operator import reasons
from backup_operator.endpoint_policy import (
    EndpointPolicy,
    location_endpoint_refusal,
    resolved_endpoint_refusal,
    token_uri_refusal,
)
from backup_operator.keys import keys_to_delete, our_backups, periodic_key
from backup_operator.observed import BackupResult
from backup_operator.reasons import BackupFailed
from etcd_common.api.etcd_backup import BackupSpec, SnapshotFingerprint
from etcd_common.api.etcd_cluster import parse_etcd_cluster
from etcd_common.api.fields import SpecError
from etcd_common.api.storage_locations import COMPRESSION_NONE, EncryptionKeyRef, StorageLocation
from etcd_common.etcd import etcdctl as ctl
from etcd_common.etcd import types as etcd_types
from etcd_common.etcd.access import EtcdAccess
from etcd_common.etcd.alarms import CORRUPT, is_alarm
from etcd_common.etcd.endpoints import cluster_client_access
from etcd_common.etcd.snapshot_integrity import GrowingSnapshot, SnapshotDigest, follow_snapshot
from etcd_common.etcd.snapshot_revision import snapshot_revision
from etcd_common.storage import codec
from etcd_common.storage.encryption_keys import read_encryption_key
from etcd_common.storage.locations import object_url, split_location, storage_for_location
from etcd_common.storage.objects import LocationInvalid, ObjectStorage, StorageError, UploadResult
from kube_adapter.errors import KubeError, NotFound

Logger = logging.Logger | logging.LoggerAdapter[Any]
ObjectReader = Callable[[str, str], dict[str, Any]]  # (namespace, name) -> API dict

SNAPSHOT_FILE = "snapshot.db"
ENCODED_FILE = "snapshot.db.encoded"  # spec.compression / spec.encryption: what is uploaded then
# Every backup's directory in the work directory starts with this (stale ones are removed at start).
WORK_PREFIX = "etcd-backup-"
# An encoded copy (gzip of incompressible data, AES-GCM's tags) may be a little larger than the snapshot.
ENCODED_ALLOWANCE = 1.01
STATUS_TIMEOUT_SECONDS = 5.0
# Hashing the keyspace at the snapshot's revision reads the whole database on the member.
FINGERPRINT_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class BackupRequest:
    """What to back up where, from an EtcdBackup spec (or the one-shot command's flags)."""

    namespace: str
    owner: str  # the EtcdBackup's name (logs, client-certificate cache)
    location: StorageLocation
    endpoints: tuple[str, ...] = ()
    client_tls_secret: str = ""
    etcd_cluster_name: str = ""
    periodic: bool = False
    max_backups: int = 0
    timeout_seconds: float = 1800.0
    compression: str = COMPRESSION_NONE
    encryption: EncryptionKeyRef | None = None
    # spec.trialRestore set: the member's key count and keyspace hash at the snapshot's revision are
    # read for the trials to compare with. Else not: hashing the keyspace reads the whole database
    # on the member, on every backup, for nothing.
    record_keyspace: bool = False

    @classmethod
    def from_spec(cls, namespace: str, name: str, spec: BackupSpec, *, timeout_seconds: float,
                  periodic: bool | None = None) -> BackupRequest:
        return cls(
            namespace=namespace, owner=name, location=spec.storage, endpoints=spec.etcd_endpoints,
            client_tls_secret=spec.client_tls_secret, etcd_cluster_name=spec.etcd_cluster_name,
            periodic=spec.policy.periodic if periodic is None else periodic,
            max_backups=spec.policy.max_backups, timeout_seconds=timeout_seconds,
            compression=spec.compression, encryption=spec.encryption,
            record_keyspace=spec.trial_restore is not None,
        )


def work_bytes_needed(db_size: int, identity: bool) -> int:
    """The work directory's bytes for one backup of a `db_size`-byte database: the snapshot, plus
    its encoded copy when the spec compresses or encrypts it (both are on disk during the upload)."""
    return db_size if identity else db_size + int(db_size * ENCODED_ALLOWANCE)


def directory_bytes(path: str) -> int:
    """The bytes the files under `path` take (what the kubelet counts against an emptyDir's sizeLimit)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:  # removed meanwhile
                continue
    return total


class WorkSpace:
    """The work directory's free space, shared by the backups taken at once: a backup starts only
    if what it needs fits in the free space less what the other running backups reserved and have
    not written yet (they write as they go, so this errs on the safe side). The free space is the
    node's disk's free space and, when the work directory has a size limit of its own (an emptyDir's
    `sizeLimit`, --work-dir-size-limit), that limit less what the directory holds: the kubelet
    evicts a pod whose emptyDir outgrows its limit however much room the node has."""

    def __init__(self, free_bytes: Callable[[str], int] = lambda path: shutil.disk_usage(path).free,
                 *, size_limit_bytes: int | None = None,
                 used_bytes: Callable[[str], int] = directory_bytes) -> None:
        self._free_bytes = free_bytes
        self._size_limit = size_limit_bytes or None
        self._used_bytes = used_bytes
        self._lock = threading.Lock()
        self._reserved = 0

    def _free(self, work_dir: str) -> tuple[int, str]:
        """The free bytes and, when the size limit is what bounds them, how they were counted."""
        free = self._free_bytes(work_dir)
        if self._size_limit is None:
            return free, ""
        room = self._size_limit - self._used_bytes(work_dir)
        if room >= free:
            return free, ""
        return max(0, room), f" (its size limit {self._size_limit} less {self._size_limit - room} in use)"

    @contextmanager
    def reserve(self, work_dir: str, needed: int) -> Iterator[None]:
        """Hold `needed` bytes for one backup, or raise BackupFailed(WorkDirectoryFull)."""
        with self._lock:
            free, bound = self._free(work_dir)
            if needed > free - self._reserved:
                others = f", {self._reserved} of them held by backups running now" if self._reserved else ""
                raise BackupFailed(reasons.WORK_DIRECTORY_FULL,
                                   f"the backup needs {needed} bytes in the work directory {work_dir}, "
                                   f"{free} are free{bound}{others}; retried later (--work-dir: a volume with room "
                                   "for --max-concurrent-backups databases, twice each when compressed or encrypted; "
                                   "--work-dir-size-limit: its emptyDir's sizeLimit)")
            self._reserved += needed
        try:
            yield
        finally:
            with self._lock:
                self._reserved -= needed


@dataclass
class BackupEnvironment:
    """What taking a backup needs from outside: API reads, etcd access, a directory on disk."""

    read_secret: ObjectReader
    read_etcd_cluster: ObjectReader
    etcd: EtcdAccess
    work_dir: str
    etcdutl_binary: str | None = None
    # The throwaway etcd of trial restores (spec.trialRestore) and the etcdctl that reads it.
    etcd_binary: str | None = None
    etcdctl_binary: str | None = None
    s3_options: dict[str, Any] = field(default_factory=dict)
    # The object-store endpoint a secret names is checked here (the spec's, by the planner too).
    endpoint_policy: EndpointPolicy = field(default_factory=EndpointPolicy)
    # The work directory's free space, checked before each snapshot (shared by concurrent backups).
    work_space: WorkSpace = field(default_factory=WorkSpace)
    # A location without a secret may use this process's own identity (--allow-pod-identity; the
    # one-shot command: its own pod's); else CredentialsRequired.
    allow_pod_identity: bool = False
    # Services, read to resolve an etcd endpoint before it is dialed (an ExternalName is followed
    # and checked against the endpoint policy); None: endpoints are checked by name only.
    read_service: ObjectReader | None = None
    # The operator (tenants' EtcdBackups): every etcd endpoint dialed, the member list's too, is
    # checked against `endpoint_policy` after resolution. Off for the one-shot command (its caller
    # is an administrator choosing endpoints on the command line).
    check_etcd_endpoints: bool = False


def take_backup(request: BackupRequest, env: BackupEnvironment, log: Logger,
                *, now: Callable[[], datetime] = lambda: datetime.now(UTC),
                monotonic: Callable[[], float] = time.monotonic) -> BackupResult:
    """Take one backup; `now` stamps it, `monotonic` measures its duration and its deadline."""
    started = now()
    clock_start = monotonic()
    deadline = clock_start + request.timeout_seconds

    def remaining() -> float:
        left = deadline - monotonic()
        if left <= 0:
            raise BackupFailed(reasons.TIMED_OUT, f"the backup did not finish within {request.timeout_seconds:.0f}s "
                                                  "(backupPolicy.timeoutInSecond)")
        return left

    bucket, base_key = split_or_fail(request.location)
    storage = storage_client(request, env)
    _s3_call(lambda: storage.check_bucket(bucket))
    encoding, (endpoints, tls_secret, cluster_uid) = spec_encoding(request, env), _target(request, env)
    candidates, version, member_revision, db_size, cluster_ids = _members_by_revision(
        request, env, endpoints, tls_secret, log)
    with _work_directory(request, env, work_bytes_needed(db_size, encoding.identity)) as directory:
        path = os.path.join(directory, SNAPSHOT_FILE)
        # The key and status carry the revision the member reported just before the snapshot (as
        # CoreOS did).
        key = periodic_key(base_key, member_revision, started) if request.periodic else base_key
        metadata = {"etcd-revision": str(member_revision), "etcd-version": version, **encoding.metadata()}
        if encoding.identity and storage.sets_metadata_last:
            endpoint, sha256, upload, fingerprint = _streamed_backup(
                request, env, storage, candidates, tls_secret, path, (bucket, key), metadata, remaining, log)
            size = os.path.getsize(path)
        else:
            endpoint, sha256, upload, size, fingerprint = _saved_backup(
                request, env, storage, candidates, tls_secret, path, (bucket, key), metadata, encoding, member_revision,
                remaining, log)
        if upload.size != size:
            raise BackupFailed(StorageError("", backend=request.location.storage_type).reason,
                               f"{object_url(request.location, bucket, key)} has {upload.size} bytes, uploaded {size}")
    retained: int | None = None
    retention_error = ""
    if request.periodic:
        retained, retention_error = _apply_retention(storage, bucket, base_key, key, request.max_backups, log)
    return BackupResult(
        key=key, size=size, sha256=sha256, etcd_revision=member_revision, etcd_version=version,
        started=started, duration_seconds=monotonic() - clock_start, endpoint=endpoint,
        retained=retained, retention_error=retention_error, fingerprint=fingerprint,
        # The incarnation: the cluster ID the snapshot's member answered for, and (by
        # spec.etcdCluster.name only) the EtcdCluster's UID; quorum-loss recovery compares only these.
        etcd_cluster_id=cluster_ids.get(endpoint, 0), etcd_cluster_uid=cluster_uid,
        **_encoding_facts(encoding),
    )


def _saved_backup(request: BackupRequest, env: BackupEnvironment, storage: ObjectStorage, candidates: list[str],
                  tls_secret: str, path: str, target: tuple[str, str], metadata: dict[str, str],
                  encoding: codec.Encoding, member_revision: int, remaining: Callable[[], float],
                  log: Logger) -> tuple[str, str, UploadResult, int, SnapshotFingerprint]:
    """The snapshot saved to `path` whole (its digest taken as etcdctl writes it), encoded when
    the spec says so, then uploaded (an encoded upload needs the whole snapshot first; a store
    that cannot take metadata after the bytes, GCS, needs its SHA-256 first). The snapshot's revision
    is read from its pages before the upload starts; the member's fingerprint at it during the
    upload. Returns the endpoint, the SHA-256, the upload, its size and the fingerprint."""
    bucket, key = target
    endpoint, sha256 = _save_snapshot(request, env, candidates, tls_secret, path, remaining, log)
    upload_path, size = _to_upload(path, encoding, sha256, where=object_url(request.location, bucket, key))
    revision = _readable_revision(lambda: snapshot_revision(path), endpoint)
    log.info("snapshot from %s: revision %d, %d bytes, sha256 %s; uploading %s to %s", endpoint, member_revision,
             os.path.getsize(path), sha256, _describe(encoding, size), object_url(request.location, bucket, key))
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot-fingerprint") as pool:
        # The member's key count and hash at the snapshot's revision, read during the upload.
        fingerprint_call = pool.submit(_fingerprint, request, env, endpoint, tls_secret, revision, log)
        def stop_when_time_is_up(sent: int) -> None:  # the upload's progress callback
            remaining()
        try:
            upload = storage.upload_file(bucket, key, upload_path, metadata={"sha256": sha256, **metadata},
                                         progress=stop_when_time_is_up)
        except StorageError as error:
            if isinstance(error.__cause__, BackupFailed):
                raise error.__cause__ from None
            raise BackupFailed(error.reason, error.message) from error
        fingerprint = _fingerprint_result(fingerprint_call)
    return endpoint, sha256, upload, size, fingerprint


def _streamed_backup(request: BackupRequest, env: BackupEnvironment, storage: ObjectStorage, candidates: list[str],
                     tls_secret: str, path: str, target: tuple[str, str], metadata: dict[str, str],
                     remaining: Callable[[], float], log: Logger) -> tuple[str, str, UploadResult, SnapshotFingerprint]:
    """Upload the snapshot while etcdctl writes it, to a store that takes the metadata's SHA-256,
    known only at the end, after the bytes (ABS with the block list, S3 and OSS by a copy of the
    object onto itself): the transfer from etcd and the upload overlap. The upload's
    end waits for the whole file, its SHA-256 trailer and its revision read from its pages; a
    member whose snapshot fails stops that upload before its object is complete, and the next
    member is tried with a new one. Returns the endpoint, the SHA-256, the upload and the
    fingerprint (read while the upload finishes)."""
    bucket, key = target
    where = object_url(request.location, bucket, key)
    client = _client(request, env, tuple(candidates), tls_secret)
    failures: list[str] = []
    reason = reasons.SNAPSHOT_FAILED
    for endpoint in candidates:
        with ThreadPoolExecutor(max_workers=3, thread_name_prefix="snapshot-stream") as pool:
            saved = pool.submit(client.snapshot_save, path, endpoint=endpoint, timeout_seconds=remaining())
            revision_call, fingerprint_call = _checks_once_saved(pool, request, env, endpoint, tls_secret, path,
                                                                 saved, remaining, log)

            def complete(sha256: str, endpoint: str = endpoint, revision_call: Future[int] = revision_call) -> None:
                revision = _readable_revision(revision_call.result, endpoint)
                log.info("snapshot from %s: revision %d, %d bytes, sha256 %s; the upload to %s ends now",
                         endpoint, revision, os.path.getsize(path), sha256, where)

            snapshot = GrowingSnapshot(f"{path}.part", path, saved, complete, remaining)
            log.info("streaming the snapshot from %s to %s as it arrives", endpoint, where)
            try:
                # The SDKs read, tell and seek: all an upload asks of a stream.
                upload = storage.upload_stream(bucket, key, cast(IO[bytes], snapshot), metadata=metadata,
                                               late_metadata=lambda: {"sha256": snapshot.sha256})
                return endpoint, snapshot.sha256, upload, _fingerprint_result(fingerprint_call)
            except StorageError as error:
                failure = snapshot.failure
                if isinstance(failure, BackupFailed):
                    raise failure from None
                if failure is None:
                    raise BackupFailed(error.reason, error.message) from error
                if isinstance(failure, ctl.SnapshotInvalid):
                    reason = reasons.SNAPSHOT_INVALID
                    log.warning("snapshot from %s is not whole, its upload stopped: %s; trying the next member",
                                endpoint, failure.message)
                elif isinstance(failure, ctl.EtcdctlError):
                    reason = reasons.SNAPSHOT_FAILED
                    log.warning("snapshot from %s failed: %s; trying the next member", endpoint, failure.message)
                else:
                    raise BackupFailed(error.reason, error.message) from error
                failures.append(f"{endpoint}: {failure.message}")
            finally:
                snapshot.close()
                saved.exception()  # etcdctl is done with the file before it is removed
        for leftover in (path, f"{path}.part"):
            if os.path.exists(leftover):
                os.remove(leftover)
    raise BackupFailed(reason, "no member delivered a whole snapshot: " + "; ".join(failures))


def _checks_once_saved(pool: ThreadPoolExecutor, request: BackupRequest, env: BackupEnvironment, endpoint: str,
                       tls_secret: str, path: str, saved: Future[None], remaining: Callable[[], float],
                       log: Logger) -> tuple[Future[int], Future[SnapshotFingerprint]]:
    """The snapshot's revision (from its pages), then the member's fingerprint at it, each
    started as soon as what it needs is there (etcdctl done; the revision): while the upload
    sends what it has not sent yet, not after it. A backup whose time ran out during the snapshot
    fails as TimedOut here."""
    def saved_revision() -> int:
        saved.result()
        remaining()
        return snapshot_revision(path)

    revision_call = pool.submit(saved_revision)

    def fingerprint() -> SnapshotFingerprint:
        return _fingerprint(request, env, endpoint, tls_secret, revision_call.result(), log)
    return revision_call, pool.submit(fingerprint)


def _fingerprint_result(call: Future[SnapshotFingerprint]) -> SnapshotFingerprint:
    try:
        return call.result()
    except BackupFailed:
        raise
    except Exception as error:  # the revision it waited for could not be read: reported by the gate
        raise BackupFailed(reasons.SNAPSHOT_FAILED, f"cannot read the snapshot's revision: {error}") from error


def _fingerprint(request: BackupRequest, env: BackupEnvironment, endpoint: str, tls_secret: str, revision: int,
                 log: Logger) -> SnapshotFingerprint:
    """The snapshot's revision, and (`record_keyspace`) the member's key count and keyspace hash
    at it (two reads of the member the snapshot came from); what the member cannot tell stays None:
    a backup is not failed for it (its trial restore then compares less)."""
    if not request.record_keyspace:
        return SnapshotFingerprint(revision)
    try:
        client = _client(request, env, (endpoint,), tls_secret, command_timeout_seconds=FINGERPRINT_TIMEOUT_SECONDS)
        hashed = client.hash_kv(revision)
        return SnapshotFingerprint(revision, key_count=client.key_count(revision), hash_kv=hashed.hash,
                                   compact_revision=hashed.compact_revision)
    except (ctl.EtcdctlError, BackupFailed, ValueError) as error:
        log.warning("cannot read the key count and hash of revision %d from %s (%s); a trial restore "
                    "compares the revision and the snapshot's digest only", revision, endpoint, error)
        return SnapshotFingerprint(revision)


@contextmanager
def _work_directory(request: BackupRequest, env: BackupEnvironment, needed: int) -> Iterator[str]:
    """A directory of this backup's own in the work directory, `needed` bytes held for it (else
    WorkDirectoryFull); removed with everything in it when the backup ends."""
    os.makedirs(env.work_dir, exist_ok=True)
    with env.work_space.reserve(env.work_dir, needed), \
            tempfile.TemporaryDirectory(prefix=f"{WORK_PREFIX}{request.namespace}_{request.owner}_",
                                        dir=env.work_dir) as directory:
        yield directory


def remove_stale_snapshots(work_dir: str, log: Logger) -> None:
    """Remove what backups interrupted by a crash left in the work directory (an emptyDir outlives
    a container restart)."""
    if not os.path.isdir(work_dir):
        return
    for entry in os.listdir(work_dir):
        if entry.startswith(WORK_PREFIX):
            shutil.rmtree(os.path.join(work_dir, entry), ignore_errors=True)
            log.info("removed %s left in %s by an interrupted backup", entry, work_dir)


def split_or_fail(location: StorageLocation) -> tuple[str, str]:
    try:
        return split_location(location)
    except LocationInvalid as error:
        raise BackupFailed(error.reason, error.message) from error


def storage_client(request: BackupRequest, env: BackupEnvironment) -> ObjectStorage:
    """The object-store client for the request (without a secret: CredentialsRequired unless the
    environment lends its identity); its endpoint (the spec's, else the one its secret names,
    else the provider's) is checked against the endpoint policy before any request is sent."""
    location = request.location
    try:
        storage = storage_for_location(location, request.namespace, env.read_secret,
                                       allow_pod_identity=env.allow_pod_identity, **env.s3_options)
    except StorageError as error:
        raise BackupFailed(error.reason, error.message) from error
    except KubeError as error:
        raise BackupFailed(reasons.KUBE_API_ERROR, f"cannot read secret {location.secret}: {error}") from error
    # Only the awsSecret (`endpoint_url`) and the absSecret (`endpoint`) can name an endpoint.
    secret_key = "endpoint_url" if location.s3 is not None else "endpoint"
    where = f"spec.{location.section}.endpoint" if location.endpoint else f"{secret_key} of secret {location.secret}"
    refusal = location_endpoint_refusal(location.storage_type, storage.endpoint, env.endpoint_policy, where=where) \
        or token_uri_refusal(getattr(storage, "token_uri", ""), env.endpoint_policy,
                             where=f"token_uri of the service-account key in secret {location.secret}")
    if refusal is not None:
        raise BackupFailed(reasons.ENDPOINT_NOT_ALLOWED, refusal)
    return storage


def spec_encoding(request: BackupRequest, env: BackupEnvironment) -> codec.Encoding:
    """spec.compression and spec.encryption, with the key read from its Secret (before etcd is asked)."""
    if request.encryption is None:
        return codec.Encoding(request.compression)
    try:
        key = read_encryption_key(env.read_secret, request.namespace, request.encryption)
    except codec.CodecError as error:
        raise BackupFailed(error.reason, error.message) from error
    except KubeError as error:
        raise BackupFailed(reasons.KUBE_API_ERROR,
                           f"cannot read secret {request.encryption.secret_name}: {error}") from error
    return codec.Encoding(request.compression, key)


def _encoding_facts(encoding: codec.Encoding) -> dict[str, str]:
    """BackupResult's `compression` and `key_id`."""
    return {"compression": "" if encoding.compression == COMPRESSION_NONE else encoding.compression,
            "key_id": "" if encoding.key is None else codec.key_id(encoding.key)}


def _describe(encoding: codec.Encoding, size: int) -> str:
    if encoding.identity:
        return "as it is"
    parts = [] if encoding.compression == COMPRESSION_NONE else [encoding.compression.lower()]
    if encoding.key is not None:
        parts.append(f"AES-256-GCM, key id {codec.key_id(encoding.key)}")
    return f"encoded ({', '.join(parts)}, {size} bytes)"


def _to_upload(path: str, encoding: codec.Encoding, sha256: str, *, where: str) -> tuple[str, int]:
    """The file to upload: the snapshot at `path`, or (spec.compression, spec.encryption) its
    encoding next to it, decoded again and checked (the snapshot's SHA-256 trailer and digest on
    what comes out) before anything is uploaded: what is uploaded restores. Returns it and its size."""
    if encoding.identity:
        return path, os.path.getsize(path)
    encoded_path = os.path.join(os.path.dirname(path), ENCODED_FILE)
    codec.encode_file(path, encoded_path, encoding)
    digest = SnapshotDigest()
    try:
        with open(encoded_path, "rb") as encoded:
            for piece in codec.decode_stream(encoded, encoding.key, where=where):
                digest.feed(piece)
        decoded_sha256 = digest.finish(where)
    except (codec.CodecError, ctl.SnapshotInvalid) as error:
        raise BackupFailed(reasons.ENCODING_FAILED, f"the encoded snapshot does not decode: {error}") from error
    if decoded_sha256 != sha256:
        raise BackupFailed(reasons.ENCODING_FAILED, f"the encoded snapshot decodes to sha256 {decoded_sha256}, "
                                                    f"not the snapshot's {sha256}")
    return encoded_path, os.path.getsize(encoded_path)


def _s3_call(call: Callable[[], None]) -> None:
    try:
        call()
    except StorageError as error:
        raise BackupFailed(error.reason, error.message) from error


def _target(request: BackupRequest, env: BackupEnvironment) -> tuple[tuple[str, ...], str, str]:
    """The endpoints to ask, the client-certificate secret ("" = none) and the EtcdCluster's UID
    ("": spec.etcdEndpoints, no EtcdCluster named)."""
    if not request.etcd_cluster_name:
        if not request.endpoints:
            raise BackupFailed(reasons.INVALID_SPEC, "spec.etcdEndpoints or spec.etcdCluster.name is required")
        return request.endpoints, request.client_tls_secret, ""
    name = request.etcd_cluster_name
    try:
        raw = env.read_etcd_cluster(request.namespace, name)
    except NotFound as error:
        raise BackupFailed(reasons.ETCD_CLUSTER_NOT_FOUND,
                           f"EtcdCluster {request.namespace}/{name} (spec.etcdCluster.name) does not exist") from error
    except KubeError as error:
        raise BackupFailed(reasons.KUBE_API_ERROR, f"cannot read EtcdCluster {request.namespace}/{name}: {error}") from error
    try:
        access = cluster_client_access(parse_etcd_cluster(raw))
    except SpecError as error:
        raise BackupFailed(reasons.ETCD_UNREACHABLE,
                           f"EtcdCluster {request.namespace}/{name} has an invalid spec: {error}") from error
    uid = str((raw.get("metadata") or {}).get("uid") or "")
    return (access.url,), request.client_tls_secret or access.tls_secret, uid


def _client(request: BackupRequest, env: BackupEnvironment, endpoints: tuple[str, ...], tls_secret: str,
            **options: Any) -> ctl.Etcdctl:
    field_name = "spec.clientTLSSecret" if request.client_tls_secret else "spec.TLS.static.operatorSecret of the EtcdCluster"
    try:
        return env.etcd.client_with_secret(request.namespace, request.owner, endpoints, tls_secret or None,
                                           secret_field=field_name, **options)
    except ctl.ClientTLSUnavailable as error:
        raise BackupFailed(reasons.ETCD_CLIENT_TLS_UNAVAILABLE, error.message) from error


def _members_by_revision(request: BackupRequest, env: BackupEnvironment, endpoints: tuple[str, ...],
                         tls_secret: str, log: Logger) -> tuple[list[str], str, int, int, dict[str, int]]:
    """Every voting member that answers, highest revision first, the etcd version, the highest
    revision, the largest database size (bytes) among them and the cluster ID each answered for. The given
    endpoints may be a service; the members' own client URLs come from the member list. Members
    that do not answer, or answer for another cluster than the member list's, are skipped.
    Every endpoint is checked against the endpoint policy after resolution before it is dialed."""
    endpoints = _allowed_endpoints(request, env, endpoints, log, member_list=False)
    client = _client(request, env, endpoints, tls_secret)
    member_urls: list[str] = []
    cluster_id = 0
    try:
        answer = client.cluster_members()
        cluster_id = answer.cluster_id
        member_urls = [url for m in answer.members if m.started and not m.is_learner for url in m.client_urls[:1]]
        member_urls = list(_allowed_endpoints(request, env, tuple(member_urls), log, member_list=True))
    except ctl.EtcdctlError as error:
        log.warning("member list through %s failed (%s); trying the given endpoints themselves",
                    ",".join(endpoints), error.message)
    candidates = tuple(dict.fromkeys(member_urls or endpoints))
    try:
        statuses = _client(request, env, candidates, tls_secret,
                           command_timeout_seconds=STATUS_TIMEOUT_SECONDS).endpoint_status()
    except ctl.EtcdctlError as error:
        raise BackupFailed(reasons.ETCD_UNREACHABLE,
                           f"no etcd member answers at {', '.join(candidates)}: {error.message}") from error
    # A member URL (a DNS name) that now reaches another etcd cluster's member is not this cluster's.
    foreign = {s.endpoint: why for s in statuses if (why := ctl.foreign_cluster_error(s.cluster_id, cluster_id))}
    healthy = [s for s in statuses
               if s.reachable and not s.is_learner and not _refuses_snapshots(s) and s.endpoint not in foreign]
    for status in statuses:
        if status not in healthy:
            log.warning("skipping etcd member %s: %s", status.endpoint, foreign.get(status.endpoint)
                        or _refuses_snapshots(status) or ("learner" if status.is_learner else "unhealthy"))
    if not healthy:
        raise BackupFailed(reasons.ETCD_UNREACHABLE, f"no healthy etcd member among {', '.join(candidates)}")
    healthy.sort(key=lambda s: (s.revision, s.raft_index), reverse=True)
    return ([s.endpoint for s in healthy], healthy[0].version, healthy[0].revision,
            max(s.db_size for s in healthy), {s.endpoint: s.cluster_id or cluster_id for s in healthy})


def _allowed_endpoints(request: BackupRequest, env: BackupEnvironment, urls: tuple[str, ...], log: Logger,
                       *, member_list: bool) -> tuple[str, ...]:
    """The etcd endpoints of `urls` the endpoint policy allows after resolution (an ExternalName
    Service followed to what it names). The given endpoints: all, or BackupFailed(EndpointNotAllowed).
    The member list's client URLs (`member_list`): those allowed, the others skipped with a warning;
    none allowed of several is EndpointNotAllowed (a member list pointing elsewhere is not followed)."""
    if not env.check_etcd_endpoints:
        return urls
    allowed: list[str] = []
    refusals: list[str] = []
    for url in urls:
        refusal = resolved_endpoint_refusal(url, request.namespace, env.endpoint_policy,
                                            lambda namespace, name: _read_service(env, namespace, name))
        if refusal is None:
            allowed.append(url)
            continue
        refusals.append(refusal)
        if member_list:
            log.warning("skipping etcd member URL %s from the member list: %s", url, refusal)
    if refusals and (not member_list or not allowed):
        where = "the member list's client URLs: " if member_list else ""
        raise BackupFailed(reasons.ENDPOINT_NOT_ALLOWED, where + "; ".join(refusals))
    return tuple(allowed)


def _read_service(env: BackupEnvironment, namespace: str, name: str) -> dict[str, Any] | None:
    """Service `namespace/name`, None when there is none (or no reader: the endpoint is not resolved)."""
    if env.read_service is None:
        return None
    try:
        return env.read_service(namespace, name)
    except NotFound:
        return None
    except KubeError as error:
        raise BackupFailed(reasons.KUBE_API_ERROR, f"cannot read Service {namespace}/{name} to check the etcd "
                                                   f"endpoint it serves: {error}") from error


def _save_snapshot(request: BackupRequest, env: BackupEnvironment, candidates: list[str], tls_secret: str,
                   path: str, remaining: Callable[[], float], log: Logger) -> tuple[str, str]:
    """Save a snapshot from the first candidate that delivers a whole one; its endpoint and the
    file's SHA-256. The file is digested while etcdctl writes it."""
    client = _client(request, env, tuple(candidates), tls_secret)
    failures: list[str] = []
    reason = reasons.SNAPSHOT_FAILED
    for endpoint in candidates:
        written = threading.Event()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot-digest") as pool:
            digest = pool.submit(follow_snapshot, f"{path}.part", path, written)
            try:
                client.snapshot_save(path, endpoint=endpoint, timeout_seconds=remaining())
                written.set()
                sha256 = digest.result()
                if sha256 is None:
                    raise ctl.SnapshotInvalid("etcdctl reported success but wrote no snapshot file")
                return endpoint, sha256
            except ctl.SnapshotInvalid as error:
                written.set()
                failures.append(f"{endpoint}: {error.message}")
                log.warning("snapshot from %s is not whole, not uploaded: %s; trying the next member",
                            endpoint, error.message)
                reason = reasons.SNAPSHOT_INVALID
            except ctl.EtcdctlError as error:
                written.set()
                failures.append(f"{endpoint}: {error.message}")
                log.warning("snapshot from %s failed: %s; trying the next member", endpoint, error.message)
                reason = reasons.SNAPSHOT_FAILED
            finally:
                written.set()
        for leftover in (path, f"{path}.part"):
            if os.path.exists(leftover):
                os.remove(leftover)
    raise BackupFailed(reason, "no member delivered a whole snapshot: " + "; ".join(failures))


def _readable_revision(read: Callable[[], int], endpoint: str) -> int:
    """The snapshot's revision, as `read` gets it from its pages (or the future that does);
    BackupFailed when it cannot: SnapshotInvalid for a file that is not whole, SnapshotFailed for
    etcdctl's own failure."""
    try:
        return read()
    except ctl.SnapshotInvalid as error:
        raise BackupFailed(reasons.SNAPSHOT_INVALID, f"snapshot from {endpoint} not uploaded: {error.message}") from error
    except ctl.EtcdctlError as error:
        raise BackupFailed(reasons.SNAPSHOT_FAILED, f"cannot read the snapshot from {endpoint}: {error.message}") from error


def _apply_retention(storage: ObjectStorage, bucket: str, base_key: str, uploaded: str, max_backups: int,
                     log: Logger) -> tuple[int | None, str]:
    """Delete the oldest periodic backups of `base_key` beyond `max_backups`, never `uploaded` (the
    backup just taken, counted even if the listing does not show it yet); returns how many remain
    and an error text ("" if none). A failure here does not undo the backup."""
    try:
        keys = list(dict.fromkeys([*(info.key for info in storage.list(bucket, base_key)), uploaded]))
        doomed = keys_to_delete(base_key, keys, max_backups, keep=uploaded)
        for key in doomed:
            storage.delete(bucket, key)
            log.info("retention (maxBackups %d): deleted %s/%s", max_backups, bucket, key)
    except StorageError as error:
        log.warning("retention failed: %s", error.message)
        return None, error.message
    return len(our_backups(base_key, keys)) - len(doomed), ""


def _refuses_snapshots(status: etcd_types.EndpointStatus) -> str:
    """Why this member must not be snapshotted ("" if it may): an error of its own (no leader),
    or a CORRUPT alarm raised for it. NOSPACE does not count: a snapshot only reads."""
    own = [error for error in status.errors if not is_alarm(error)]
    corrupt = [alarm for alarm in status.alarms if alarm.kind == CORRUPT and alarm.member_id == status.member_id]
    return "; ".join([*own, *(alarm.describe() for alarm in corrupt)])
