"""A real etcd 3.6 snapshot cut short anywhere is refused as SnapshotInvalid, never as a crash or a
retryable error: by the restore operator's verification (the SHA-256 trailer, checked before
etcdutl reads the file) and by etcdutl itself (which panics or dies of SIGBUS on some cuts; that
is mapped to SnapshotInvalid too). CI once saw the restore operator retry such a file forever."""
from __future__ import annotations

import hashlib
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from etcd_common.api.storage_locations import S3Location
from etcd_common.etcd.etcdctl import SnapshotInvalid
from etcd_common.etcd.etcdutl import snapshot_status
from etcd_common.storage.s3 import ObjectInfo
from restore_operator.verifying import verify_snapshot
from tests.integration.etcdctl.etcd_processes import EtcdCluster, etcd_dir

CUTS = 16


class LocalStorage:
    """Serves one local file as every S3 object (verify_snapshot reads its head, then downloads
    that very object: the ETag it asks for is the file's)."""

    def __init__(self, source: Path) -> None:
        self.source = source
        self.etag = hashlib.md5(source.read_bytes()).hexdigest()

    def head(self, bucket: str, key: str, *, version_id: str = "") -> ObjectInfo:
        return ObjectInfo(key=key, size=self.source.stat().st_size, last_modified=datetime.now(UTC), etag=self.etag)

    def download_file(self, bucket: str, key: str, path: str, *, if_match: str = "", version_id: str = "") -> int:
        assert if_match == self.etag, "the download must ask for the object whose head was read"
        shutil.copyfile(self.source, path)
        return self.source.stat().st_size


@pytest.fixture
def saved_snapshot(tmp_path: Path) -> Path:
    cluster = EtcdCluster(binary=str(etcd_dir("3.6.16") / "etcd"), workdir=tmp_path / "etcd", token="truncated")
    try:
        cluster.start_seed()
        etcdctl = cluster.etcdctl()
        for index in range(300):
            etcdctl.put(f"key{index}", f"value-{index}-" + "x" * 400)
        path = tmp_path / "snapshot.db"
        etcdctl.snapshot_save(str(path))
        return path
    finally:
        cluster.stop()


def test_the_whole_snapshot_verifies(saved_snapshot: Path, tmp_path: Path) -> None:
    verified = verify_snapshot(LocalStorage(saved_snapshot), S3Location(path="bucket/key"), work_dir=str(tmp_path))
    assert verified.facts.size == saved_snapshot.stat().st_size and verified.facts.total_keys >= 300


def test_a_snapshot_cut_anywhere_is_invalid(saved_snapshot: Path, tmp_path: Path) -> None:
    content = saved_snapshot.read_bytes()
    cuts = sorted({len(content) * step // CUTS for step in range(1, CUTS)} | {len(content) - 1, 4096, 8192})
    crashed_etcdutl = 0
    for cut in cuts:
        truncated = tmp_path / f"cut-{cut}.db"
        truncated.write_bytes(content[:cut])
        with pytest.raises(SnapshotInvalid, match="s3://bucket/key"):
            verify_snapshot(LocalStorage(truncated), S3Location(path="bucket/key"), work_dir=str(tmp_path))
        # etcdutl alone: some cuts read fine (the trailer is what catches them), some crash it.
        try:
            snapshot_status(str(truncated))
        except SnapshotInvalid as error:
            crashed_etcdutl += "crashed" in str(error)
    assert crashed_etcdutl > 0, "no cut crashed etcdutl: the fallback mapping went untested"
