"""The backup operator's effective configuration, from flags that default from environment variables."""
from __future__ import annotations

import argparse
import os
import tempfile
from dataclasses import dataclass
from typing import Sequence

from operator_runtime.flags import (
    RuntimeSettings,
    add_runtime_flags,
    add_watch_scope_flags,
    env_str,
    runtime_settings,
    watched_namespace,
)


@dataclass(frozen=True)
class BackupOperatorSettings:
    namespace: str | None  # None: watch all namespaces
    resync_seconds: float
    work_dir: str
    etcdctl_binary: str | None
    etcdutl_binary: str | None
    runtime: RuntimeSettings


def add_etcd_tool_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--work-dir", default=env_str("BACKUP_WORK_DIR", tempfile.gettempdir()),
                        help="where snapshots are written before upload (an emptyDir with room for the "
                             "largest database) [BACKUP_WORK_DIR, else TMPDIR]")
    parser.add_argument("--etcdctl", default=os.environ.get("ETCDCTL_BINARY"),
                        help="etcdctl binary; default: the one next to this Python, else PATH [ETCDCTL_BINARY]")
    parser.add_argument("--etcdutl", default=os.environ.get("ETCDUTL_BINARY"),
                        help="etcdutl binary; default: the one next to this Python, else PATH [ETCDUTL_BINARY]")


def parse_settings(argv: Sequence[str] | None = None) -> BackupOperatorSettings:
    parser = argparse.ArgumentParser(
        prog="etcd-backup-operator",
        description="Takes etcd snapshots described by EtcdBackup resources (etcd.database.coreos.com/v1beta2) "
                    "and streams them to S3. Every flag defaults from the environment variable named in its help.",
    )
    add_watch_scope_flags(parser, kind_plural="EtcdBackups")
    add_runtime_flags(parser, default_lease_name="etcd-backup-operator")
    parser.add_argument("--resync-seconds", type=float, default=float(env_str("RESYNC_SECONDS", "30")),
                        help="safety-net re-check of every EtcdBackup's schedule, in seconds [RESYNC_SECONDS]")
    add_etcd_tool_flags(parser)
    args = parser.parse_args(argv)
    return BackupOperatorSettings(
        namespace=watched_namespace(args),
        resync_seconds=args.resync_seconds,
        work_dir=args.work_dir,
        etcdctl_binary=args.etcdctl,
        etcdutl_binary=args.etcdutl,
        runtime=runtime_settings(args),
    )
