"""An object store for the backup tests: uploads kept in memory (by file, or streamed as ABS's SDK
streams), listed and deleted as a real store's."""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from etcd_common.storage import s3
from etcd_common.storage.objects import StorageError

STARTED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@dataclass
class FakeStorage:
    """One bucket ("bucket") held in memory: what was uploaded, with its metadata."""

    endpoint: str = ""  # AWS
    uploads: dict[str, bytes] = field(default_factory=dict)
    metadata: dict[str, dict[str, str]] = field(default_factory=dict)
    sets_metadata_last: bool = False  # True: every real store's (the snapshot streamed); False: saved first
    block_bytes: int = 4
    first_bytes: threading.Event = field(default_factory=threading.Event)  # the upload has bytes
    # Raised once the stream ended, as S3's copy onto itself does when it fails (its object kept).
    late_metadata_error: StorageError | None = None

    def check_bucket(self, bucket: str) -> None:
        assert bucket == "bucket"

    def upload_file(self, bucket: str, key: str, path: str, *, metadata: dict[str, str] | None = None,
                    progress: Callable[[int], None] | None = None) -> s3.UploadResult:
        data = Path(path).read_bytes()
        if progress is not None:
            progress(len(data))
        self.uploads[key] = data
        self.metadata[key] = dict(metadata or {})
        return s3.UploadResult(bucket, key, len(data), "etag")

    def upload_stream(self, bucket: str, key: str, stream: IO[bytes], *, metadata: dict[str, str] | None = None,
                      late_metadata: Callable[[], dict[str, str]] | None = None) -> s3.UploadResult:
        """As ABS's: blocks read until a short one, the object committed (with the late metadata)
        only after the stream ended; what the stream raises stops it, wrapped as the SDKs do."""
        assert self.sets_metadata_last
        data = b""
        try:
            while True:
                block = stream.read(self.block_bytes)
                data += block
                if data:
                    self.first_bytes.set()
                if len(block) < self.block_bytes:
                    break
        except Exception as error:
            raise StorageError(f"upload stopped: {error}", backend="ABS") from error
        self.uploads[key] = data
        if self.late_metadata_error is not None:
            self.metadata[key] = dict(metadata or {})
            raise self.late_metadata_error
        self.metadata[key] = {**(metadata or {}), **(late_metadata() if late_metadata else {})}
        return s3.UploadResult(bucket, key, len(data), "etag")

    def list(self, bucket: str, prefix: str) -> list[s3.ObjectInfo]:
        return [s3.ObjectInfo(key, len(data), STARTED) for key, data in self.uploads.items() if key.startswith(prefix)]

    def delete(self, bucket: str, key: str) -> None:
        del self.uploads[key]
