"""The restore operator's effective configuration, from flags that default from environment variables."""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Sequence

from etcd_common.api.restore_source import DEFAULT_BUMP_REVISION, DEFAULT_FETCH_IMAGE
from operator_runtime.flags import (
    RuntimeSettings,
    add_runtime_flags,
    add_watch_scope_flags,
    env_str,
    runtime_settings,
    watched_namespace,
)


@dataclass(frozen=True)
class RestoreSettings:
    namespace: str | None  # None: watch all namespaces
    resync_seconds: float
    work_dir: str | None
    fetch_image: str
    bump_revision: int
    etcdutl_binary: str | None
    etcdctl_binary: str | None
    runtime: RuntimeSettings


def parse_settings(argv: Sequence[str] | None = None) -> RestoreSettings:
    parser = argparse.ArgumentParser(
        prog="etcd-restore-operator",
        description="Restores etcd clusters from S3 snapshots described by EtcdRestore resources "
                    "(etcd.database.coreos.com/v1beta2). Every flag defaults from the environment "
                    "variable named in its help.",
    )
    add_watch_scope_flags(parser, kind_plural="EtcdRestores")
    add_runtime_flags(parser, default_lease_name="etcd-restore-operator")
    parser.add_argument("--resync-seconds", type=float, default=float(env_str("RESYNC_SECONDS", "10")),
                        help="safety-net re-check of every restore, in seconds [RESYNC_SECONDS]")
    parser.add_argument("--work-dir", default=os.environ.get("RESTORE_WORK_DIR"),
                        help="where snapshots are downloaded to be verified (needs room for one snapshot "
                             "and one restored copy); default: $TMPDIR [RESTORE_WORK_DIR]")
    parser.add_argument("--fetch-image", default=env_str("RESTORE_FETCH_IMAGE", DEFAULT_FETCH_IMAGE),
                        help="image whose `etcd-restore-seed` the seed pod runs to fetch the snapshot: "
                             "this operator's own image [RESTORE_FETCH_IMAGE]")
    parser.add_argument("--bump-revision", type=int,
                        default=int(env_str("RESTORE_BUMP_REVISION", str(DEFAULT_BUMP_REVISION))),
                        help="added to the restored revisions (and marked compacted) so watchers never "
                             "see revisions go backwards; 0: none [RESTORE_BUMP_REVISION]")
    parser.add_argument("--etcdutl", default=os.environ.get("ETCDUTL_BINARY"),
                        help="etcdutl binary; default: the one next to this Python, else PATH [ETCDUTL_BINARY]")
    parser.add_argument("--etcdctl", default=os.environ.get("ETCDCTL_BINARY"),
                        help="etcdctl binary; default: the one next to this Python, else PATH [ETCDCTL_BINARY]")
    args = parser.parse_args(argv)
    if args.bump_revision < 0:
        parser.error("--bump-revision must not be negative")
    return RestoreSettings(
        namespace=watched_namespace(args),
        resync_seconds=args.resync_seconds,
        work_dir=args.work_dir,
        fetch_image=args.fetch_image,
        bump_revision=args.bump_revision,
        etcdutl_binary=args.etcdutl,
        etcdctl_binary=args.etcdctl,
        runtime=runtime_settings(args),
    )
