"""The revision the backup operator reads from a snapshot's bbolt pages is the one `etcdutl snapshot
status` reports, on snapshots of every etcd version: one whose `key` bucket is inline (a few small
keys) and one whose bucket is a tree of branch and leaf pages ending in a tombstone, compacted.
A damaged file is SnapshotInvalid, never another error and never a wrong revision."""
from __future__ import annotations

import base64
from pathlib import Path

import pytest

from etcd_common.etcd.etcdctl import SnapshotInvalid
from etcd_common.etcd.etcdutl import snapshot_status
from etcd_common.etcd.snapshot_revision import FIRST_META_PAGE_SIZE, PAGE_HEADER, snapshot_revision
from tests.integration.etcdctl.etcd_processes import EtcdCluster, post_json

# Values of 2 KiB: two to a 4 KiB leaf page, so this many puts need branch pages above the leaves.
TREE_PUTS = 400
VALUE = "v" * 2048
CUTS = 24


def _put(url: str, key: str, value: str) -> None:
    post_json(url, "/v3/kv/put", {"key": base64.b64encode(key.encode()).decode(),
                                  "value": base64.b64encode(value.encode()).decode()})


def _snapshot(cluster: EtcdCluster, path: Path) -> Path:
    cluster.etcdctl().snapshot_save(str(path))
    return path


@pytest.fixture
def snapshots(etcd_cluster: EtcdCluster, tmp_path: Path) -> tuple[Path, Path]:
    """(inline, tree): the snapshot of three small puts, then of the tree described above."""
    member = etcd_cluster.start_seed()
    for index in range(3):
        _put(member.client_url, f"small{index}", "x")
    inline = _snapshot(etcd_cluster, tmp_path / "inline.db")
    for index in range(TREE_PUTS):
        _put(member.client_url, f"key{index % 50}", VALUE)
    post_json(member.client_url, "/v3/kv/compaction", {"revision": TREE_PUTS // 2})
    post_json(member.client_url, "/v3/kv/deleterange",
              {"key": base64.b64encode(b"key7").decode()})  # the newest entry: a tombstone
    return inline, _snapshot(etcd_cluster, tmp_path / "tree.db")


def test_the_revision_read_from_the_pages_is_etcdutls(snapshots: tuple[Path, Path]) -> None:
    inline, tree = snapshots
    assert snapshot_revision(str(inline)) == snapshot_status(str(inline)).revision == 4
    expected = snapshot_status(str(tree)).revision
    assert expected == 4 + TREE_PUTS + 1
    assert snapshot_revision(str(tree)) == expected


def test_a_damaged_snapshot_is_invalid_or_read_right(snapshots: tuple[Path, Path], tmp_path: Path) -> None:
    """Cut anywhere, the file is refused, or (cut past every page the read needs; the SHA-256
    trailer catches those) read right. Both metas damaged: refused; one: the other is used."""
    _, tree = snapshots
    content = tree.read_bytes()
    expected = snapshot_revision(str(tree))
    refused = 0
    for cut in sorted({len(content) * step // CUTS for step in range(CUTS)} | {100, FIRST_META_PAGE_SIZE + 100}):
        damaged = tmp_path / "cut.db"
        damaged.write_bytes(content[:cut])
        try:
            assert snapshot_revision(str(damaged)) == expected, f"cut at {cut}"
        except SnapshotInvalid:
            refused += 1
    assert refused >= 3, "no cut was refused: the checks went untested"

    def with_meta_damaged(*pages: int) -> Path:
        data = bytearray(content)
        for page in pages:
            data[page * FIRST_META_PAGE_SIZE + PAGE_HEADER.size + 40] ^= 0xFF  # inside the meta: its checksum fails
        damaged = tmp_path / "meta.db"
        damaged.write_bytes(bytes(data))
        return damaged

    assert snapshot_revision(str(with_meta_damaged(0))) == expected
    assert snapshot_revision(str(with_meta_damaged(1))) == expected
    with pytest.raises(SnapshotInvalid, match="neither meta page is valid"):
        snapshot_revision(str(with_meta_damaged(0, 1)))
