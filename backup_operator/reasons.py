"""Why a backup failed: the reasons written to status (`conditions[Succeeded].reason`,
`lastResult`), Warning events and the failures metric, and the one error class that carries them.

A reason is either transient (the network, a server: retried as it is) or a problem a person
must fix (a secret, a bucket, the spec: retried slowly, and recovered from by itself once fixed).
"""
from __future__ import annotations

from typing import Final

from etcd_common.storage import codec, objects, s3

SUCCEEDED: Final = "BackupSucceeded"
INVALID_SPEC: Final = "InvalidSpec"
UNSUPPORTED_STORAGE_TYPE: Final = "UnsupportedStorageType"
# An etcd or object-store endpoint the administrator did not allow (endpoint_policy.py): retried slowly, so
# widening the allowance (or fixing the awsSecret) recovers without a spec change.
ENDPOINT_NOT_ALLOWED: Final = "EndpointNotAllowed"
ETCD_CLUSTER_NOT_FOUND: Final = "EtcdClusterNotFound"
ETCD_CLIENT_TLS_UNAVAILABLE: Final = "EtcdClientTLSUnavailable"
ETCD_UNREACHABLE: Final = "EtcdUnreachable"
SNAPSHOT_FAILED: Final = "SnapshotFailed"
SNAPSHOT_INVALID: Final = "SnapshotInvalid"
TIMED_OUT: Final = "BackupTimedOut"
KUBE_API_ERROR: Final = "KubeApiError"
RETENTION_FAILED: Final = "RetentionFailed"
INTERNAL_ERROR: Final = "InternalError"
# spec.encryption: the Secret or its key is absent; its value is not base64 of 32 bytes; the
# encoded snapshot did not decode back to the snapshot (never uploaded then).
ENCRYPTION_KEY_MISSING: Final = codec.KeyMissing.reason
ENCRYPTION_KEY_INVALID: Final = codec.KeyInvalid.reason
ENCODING_FAILED: Final = "EncodingFailed"
# The work directory has less free space than the snapshot (and its encoded copy) need, counting
# the backups running at the same time: retried with backoff, never given up (space frees up when
# they finish; a database larger than the volume needs a bigger volume).
WORK_DIRECTORY_FULL: Final = "WorkDirectoryFull"
# An attempt recorded as started (status.attemptStarted) whose outcome was never written: the
# operator crashed, was evicted or OOM-killed mid-backup. Counted as a failure (the schedule backs off).
INTERRUPTED: Final = "BackupInterrupted"
# Not failures: a due backup waiting for a slot (condition Queued); backupIntervalInSecond below
# the operator's minimum (condition IntervalRaised, and a Warning event).
WAITING_FOR_SLOT: Final = "WaitingForBackupSlot"
INTERVAL_BELOW_MINIMUM: Final = "IntervalBelowMinimum"

# Trial restores (spec.trialRestore): the condition Verified's reasons, Warning events, status.trialRestore.
VERIFIED: Final = "BackupVerified"
# The object does not decode, or is not a whole etcd snapshot (truncated, overwritten, tampered with).
BACKUP_OBJECT_CORRUPT: Final = codec.ObjectCorrupt.reason
# It restores, but its revision, keys or keyspace hash are not what was recorded when it was taken.
BACKUP_CONTENT_MISMATCH: Final = "BackupContentMismatch"
# etcdutl or the throwaway etcd failed for another reason (a missing etcd binary, a full disk).
TRIAL_RESTORE_FAILED: Final = "TrialRestoreFailed"
TRIAL_TIMED_OUT: Final = "TrialRestoreTimedOut"

S3_REASONS: Final = (
    s3.REASON_SECRET_INVALID, s3.REASON_ACCESS_DENIED, s3.REASON_BUCKET_NOT_FOUND, s3.REASON_OBJECT_NOT_FOUND,
    s3.REASON_UNREACHABLE, s3.REASON_LOCATION_INVALID, s3.REASON_FAILED,
)
# The same kinds for the other object stores: `ABSSecretInvalid`, `GCSBucketNotFound`, `OSSUnreachable`...
OTHER_BACKENDS: Final = ("ABS", "GCS", "OSS")
_KINDS: Final = (objects.SecretInvalid, objects.AccessDenied, objects.BucketNotFound, objects.ObjectNotFound,
                 objects.Unreachable, objects.LocationInvalid, objects.StorageError)
# No storage secret, and the operator does not lend its own identity (--allow-pod-identity off, or
# ABS, which has no default chain here): retried slowly, so enabling it recovers without a spec change.
CREDENTIALS_REQUIRED: Final = objects.CredentialsRequired.kind
STORAGE_REASONS: Final = (CREDENTIALS_REQUIRED, *S3_REASONS,
                           *(f"{backend}{kind.kind}" for backend in OTHER_BACKENDS for kind in _KINDS))
FAILURE_REASONS: Final = (
    INVALID_SPEC, UNSUPPORTED_STORAGE_TYPE, ENDPOINT_NOT_ALLOWED, ETCD_CLUSTER_NOT_FOUND, ETCD_CLIENT_TLS_UNAVAILABLE,
    ETCD_UNREACHABLE,
    SNAPSHOT_FAILED, SNAPSHOT_INVALID, TIMED_OUT, KUBE_API_ERROR, RETENTION_FAILED, INTERNAL_ERROR,
    ENCRYPTION_KEY_MISSING, ENCRYPTION_KEY_INVALID, ENCODING_FAILED, WORK_DIRECTORY_FULL, INTERRUPTED,
    *STORAGE_REASONS,
)
TRANSIENT_REASONS: Final = frozenset({
    ETCD_UNREACHABLE, SNAPSHOT_FAILED, SNAPSHOT_INVALID, TIMED_OUT, KUBE_API_ERROR, INTERNAL_ERROR, INTERRUPTED,
    s3.REASON_UNREACHABLE, s3.REASON_FAILED,
    *(f"{backend}{kind}" for backend in OTHER_BACKENDS for kind in (objects.Unreachable.kind, objects.StorageError.kind)),
})
# Reasons about the spec itself: nothing is retried until the spec changes.
SPEC_REASONS: Final = frozenset({INVALID_SPEC, UNSUPPORTED_STORAGE_TYPE, s3.REASON_LOCATION_INVALID,
                                 *(f"{backend}{objects.LocationInvalid.kind}" for backend in OTHER_BACKENDS)})


class BackupFailed(Exception):
    """A backup attempt failed for `reason` (one of FAILURE_REASONS); the message is for people."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message

    @property
    def transient(self) -> bool:
        return is_transient(self.reason)


def is_transient(reason: str) -> bool:
    return reason in TRANSIENT_REASONS
