"""Every reason the restore operator writes: status.reason and the conditions' reasons (why a
restore failed, waits or finished) and its events' reasons. One place, so a reason is one word
everywhere (status, events, alerts, docs)."""
from __future__ import annotations

from typing import Final

# Why a restore failed (status.reason; the condition SnapshotVerified or ClusterRestored).
INVALID_SPEC: Final = "InvalidSpec"
UNSUPPORTED_STORAGE: Final = "UnsupportedStorageType"
CLUSTER_DELETED: Final = "RestoredClusterDeleted"
STAGING_FAILED: Final = "StagingFailed"
STAGING_NAME_TAKEN: Final = "StagingNameTaken"
STAGED_CLAIM_LOST: Final = "StagedClaimLost"
RESTORE_TIMED_OUT: Final = "RestoreTimedOut"
SNAPSHOT_INVALID: Final = "SnapshotInvalid"
SECRET_NOT_FOUND: Final = "SecretNotFound"
# Refused before anything is touched (preflight.py).
SEED_WITHOUT_CREDENTIALS: Final = "SeedHasNoCredentials"
INVALID_CLUSTER_SPEC: Final = "InvalidClusterSpec"
UNSUPPORTED_VERSION: Final = "UnsupportedVersion"
UNTRUSTED_IMAGE: Final = "UntrustedImage"
CLUSTER_NOT_FOUND: Final = "ClusterNotFound"
SNAPSHOT_MISSING: Final = "SnapshotMissing"
SNAPSHOT_CHANGED: Final = "SnapshotChanged"
INSUFFICIENT_SPACE: Final = "InsufficientSpace"
# The object store's endpoint (or a gcpSecret's token_uri) is outside --allowed-s3-endpoint-hosts.
ENDPOINT_NOT_ALLOWED: Final = "EndpointNotAllowed"

# Not failures: the conditions' reasons while a restore goes on or when it finished.
CHECK_FAILED: Final = "SnapshotCheckFailed"  # etcdutl itself failed: retried
VERIFIED: Final = "Verified"
WAITING: Final = "Waiting"
SEED_FAILING: Final = "SeedFailing"
MEMBER_START_BLOCKED: Final = "MemberStartBlocked"
SEEDING: Final = "Seeding"
SERVED: Final = "Served"

# Events.
SNAPSHOT_VERIFIED: Final = "SnapshotVerified"
STAGING: Final = "Staging"
STAGING_REMOVED: Final = "StagingRemoved"
REPLACING_CLUSTER: Final = "ReplacingCluster"
REVISION_NOT_BUMPED: Final = "RevisionNotBumped"
CLUSTER_CREATED: Final = "ClusterCreated"
RESTORE_SUCCEEDED: Final = "RestoreSucceeded"
RESTORE_FAILED: Final = "RestoreFailed"
