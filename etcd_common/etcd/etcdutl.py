"""`etcdutl`, etcd's offline tool for snapshot files: read one (`snapshot_status`) and restore one
into a new member's data directory (`snapshot_restore`). Its failures are classified as etcdctl's
are (etcd_common.etcd.etcdctl); etcdctl 3.6 no longer has `snapshot status`/`restore`."""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Sequence

from etcd_common.etcd.etcdctl import (
    EtcdctlError,
    SnapshotInvalid,
    classify_error,
    crashed,
    default_etcdutl_binary,
    parse_snapshot_status,
)
from etcd_common.etcd.types import SnapshotStatus

logger = logging.getLogger(__name__)


def snapshot_status(path: str, *, binary: str | None = None, timeout_seconds: float = 120.0) -> SnapshotStatus:
    """Read a snapshot file with `etcdutl snapshot status`: its content hash, revision, keys and
    size. Raises SnapshotInvalid for a file that is not a readable etcd database."""
    command = [binary or default_etcdutl_binary(), "snapshot", "status", path, "--write-out", "json"]
    output = _run_etcdutl(command, timeout_seconds)
    try:
        return parse_snapshot_status(output)
    except ValueError as error:
        raise SnapshotInvalid(f"unreadable snapshot status output: {error}", command=command) from error


def snapshot_restore(
    path: str,
    *,
    data_dir: str,
    name: str,
    initial_cluster: str,
    initial_advertise_peer_urls: Sequence[str],
    initial_cluster_token: str,
    bump_revision: int = 0,
    binary: str | None = None,
    timeout_seconds: float = 600.0,
) -> None:
    """Create the data directory of member `name` of a new cluster from a snapshot file with
    `etcdutl snapshot restore` (the snapshot's integrity hash is checked). `initial_cluster` is
    "name=peer-url,..." for every member restored from the same snapshot, and the token is the new
    cluster's. `bump_revision` > 0 raises the revision by that much and marks it compacted, so that
    watchers and caches of the old cluster see a newer revision, never a reused one.

    `data_dir` must not exist yet (etcdutl refuses to overwrite one). etcdutl leaves a partial
    data directory behind when it fails; it is removed, so the restore can be retried. Raises
    SnapshotInvalid for a file that is not a readable, intact etcd database."""
    if bump_revision < 0:
        raise ValueError(f"bump_revision must not be negative, got {bump_revision}")
    if os.path.lexists(data_dir):
        raise EtcdctlError(f"cannot restore into {data_dir!r}: it already exists")
    command = [
        binary or default_etcdutl_binary(), "snapshot", "restore", path,
        "--data-dir", data_dir,
        "--name", name,
        "--initial-cluster", initial_cluster,
        "--initial-advertise-peer-urls", ",".join(initial_advertise_peer_urls),
        "--initial-cluster-token", initial_cluster_token,
    ]
    if bump_revision:
        # etcdutl requires the two together: the bumped revisions must read as compacted.
        command += ["--bump-revision", str(bump_revision), "--mark-compacted"]
    try:
        _run_etcdutl(command, timeout_seconds)
    except EtcdctlError:
        shutil.rmtree(data_dir, ignore_errors=True)
        raise
    logger.info("etcd snapshot restored: %s -> %s (member %s, bump revision %d)", path, data_dir, name, bump_revision)


def _run_etcdutl(command: list[str], timeout_seconds: float) -> str:
    """Run etcdutl; return stdout, or raise the classified error if it failed."""
    try:
        completed = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                   timeout=timeout_seconds, check=False)
    except subprocess.TimeoutExpired as error:
        raise EtcdctlError(f"etcdutl did not finish within {timeout_seconds:.0f}s", command=command) from error
    except OSError as error:
        raise EtcdctlError(f"cannot run etcdutl {command[0]!r}: {error}", command=command) from error
    if completed.returncode != 0:
        failure = classify_error(completed.stderr, command=command)
        if command[1:2] == ["snapshot"] and crashed(completed.stderr):
            # etcdutl reads the file as a bbolt database: an assertion panic or a SIGBUS means the
            # file is not one (callers check the SHA-256 trailer first; this is the fallback).
            raise SnapshotInvalid(f"the snapshot is not a readable etcd database: {failure}",
                                  command=command, stderr=completed.stderr) from None
        raise failure
    return completed.stdout
