"""Fetch and verify a snapshot before any cluster is touched (on S3, ABS, GCS or OSS): read the
object's ETag (and version id or generation), download that object and no other (If-Match; with
the restore's credentials) into a private temporary directory, decode it if it is compressed or
encrypted (`etcd_common.storage.codec`, with the EtcdRestore's key), check the SHA-256 trailer etcd appends to every
snapshot (first: etcdutl crashes on some truncated files), read it with `etcdutl snapshot status`
and restore it once into a throwaway data directory (etcdutl checks the same trailer and the
database itself). The copy is removed afterwards, whatever happened."""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass

from etcd_common.api.storage_locations import S3Location, StorageLocation
from etcd_common.etcd.etcdutl import snapshot_restore, snapshot_status
from etcd_common.etcd.snapshot_integrity import verify_snapshot_file
from etcd_common.storage import codec
from etcd_common.storage.locations import object_url, split_location
from etcd_common.storage.objects import ObjectStorage
from restore_operator.observed import SnapshotFacts

log = logging.getLogger(__name__)
TRIAL_MEMBER = "verify"
TRIAL_PEER_URL = "http://127.0.0.1:2380"  # written into the throwaway data dir only; never dialled


@dataclass(frozen=True)
class Verified:
    facts: SnapshotFacts
    download_seconds: float
    check_seconds: float


def verify_snapshot(storage: ObjectStorage, location: StorageLocation | S3Location, *, work_dir: str | None = None,
                    etcdutl: str | None = None, encryption_key: bytes | None = None) -> Verified:
    """Raises a `StorageError` (missing, unreadable), `codec.CodecError` (encrypted and no key or
    another key; failed authentication or decompression) or `etcdctl.SnapshotInvalid` (not an
    intact etcd snapshot). A compressed or encrypted object (`etcd_common.storage.codec`, told by
    its first bytes) is decoded with `encryption_key` first, and the decoded snapshot checked."""
    if isinstance(location, S3Location):
        location = StorageLocation("S3", s3=location)
    bucket, key = split_location(location)
    url = object_url(location, bucket, key)
    directory = tempfile.mkdtemp(prefix="etcd-restore-", dir=work_dir)
    try:
        path = os.path.join(directory, "snapshot.db")
        started = time.monotonic()
        info = storage.head(bucket, key)
        object_path = os.path.join(directory, "object")
        size = storage.download_file(bucket, key, object_path, if_match=info.etag, version_id=info.version_id)
        decoded = _decode(object_path, path, key=encryption_key, where=url)
        downloaded = time.monotonic()
        sha256 = verify_snapshot_file(path, where=url)
        status = snapshot_status(path, binary=etcdutl)
        snapshot_restore(
            path, data_dir=os.path.join(directory, "data"), name=TRIAL_MEMBER,
            initial_cluster=f"{TRIAL_MEMBER}={TRIAL_PEER_URL}", initial_advertise_peer_urls=[TRIAL_PEER_URL],
            initial_cluster_token="verify", binary=etcdutl,
        )
        facts = SnapshotFacts(sha256=sha256, size=size, revision=status.revision, total_keys=status.total_keys,
                              hash=status.hash, etag=info.etag, version_id=info.version_id,
                              compression=decoded.compression if decoded else "", key_id=decoded.key_id if decoded else "",
                              snapshot_size=os.path.getsize(path))
        log.info("snapshot %s verified: %d bytes, revision %d, %d keys, sha256 %s",
                 url, size, status.revision, status.total_keys, sha256)
        return Verified(facts, downloaded - started, time.monotonic() - downloaded)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _decode(object_path: str, path: str, *, key: bytes | None, where: str) -> codec.Decoded | None:
    """The snapshot at `path`: the object itself, or (None returned otherwise) decoded from it."""
    if not codec.file_is_encoded(object_path):
        os.rename(object_path, path)
        return None
    try:
        return codec.decode_file(object_path, path, key, where=where)
    finally:
        os.remove(object_path)
