"""Is a snapshot file whole? etcd appends the SHA-256 of the database to every snapshot it sends;
a truncated or corrupted file does not match it. One pass over the file, a buffer at a time, also
gives the SHA-256 of the whole file (written to status and to the object's metadata)."""
from __future__ import annotations

import hashlib
import os
from typing import Final

from etcd_common.etcdctl import SnapshotInvalid

TRAILER_BYTES: Final = 32  # sha256 digest
READ_BYTES: Final = 1024 * 1024


def verify_snapshot_file(path: str) -> str:
    """Check the file's SHA-256 trailer; return the SHA-256 (hex) of the whole file. Raises
    SnapshotInvalid when the trailer does not match (or the file is too short to have one)."""
    size = os.path.getsize(path)
    if size <= TRAILER_BYTES:
        raise SnapshotInvalid(f"snapshot {path} has {size} bytes: too short to be an etcd snapshot")
    body_hash = hashlib.sha256()
    file_hash = hashlib.sha256()
    body_left = size - TRAILER_BYTES
    trailer = b""
    with open(path, "rb") as snapshot:
        while True:
            chunk = snapshot.read(READ_BYTES)
            if not chunk:
                break
            file_hash.update(chunk)
            if body_left > 0:
                body_part = chunk[:body_left]
                body_hash.update(body_part)
                body_left -= len(body_part)
                chunk = chunk[len(body_part):]
            trailer = (trailer + chunk)[-TRAILER_BYTES:]
    if trailer != body_hash.digest():
        raise SnapshotInvalid(f"snapshot {path} failed its integrity check: the SHA-256 etcd appended "
                              "does not match the data (truncated or corrupt)")
    return file_hash.hexdigest()
