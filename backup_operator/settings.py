"""The backup operator's effective configuration, from flags that default from environment variables."""
from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from operator_runtime.flags import (
    RuntimeSettings,
    add_program_flag,
    add_resync_flag,
    env_str,
    operator_parser,
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
    """Where snapshots are written and the etcd programs; shared with `etcd-backup` (oneshot.py)."""
    parser.add_argument("--work-dir", default=env_str("BACKUP_WORK_DIR", tempfile.gettempdir()),
                        help="where snapshots are written before upload (an emptyDir with room for the "
                             "largest database) [BACKUP_WORK_DIR, else TMPDIR]")
    add_program_flag(parser, "etcdctl", env="ETCDCTL_BINARY")
    add_program_flag(parser, "etcdutl", env="ETCDUTL_BINARY")


def parse_settings(argv: Sequence[str] | None = None) -> BackupOperatorSettings:
    parser = operator_parser(
        prog="etcd-backup-operator", kind_plural="EtcdBackups",
        description="Takes etcd snapshots described by EtcdBackup resources (etcd.database.coreos.com/v1beta2) "
                    "and streams them to S3.",
    )
    add_resync_flag(parser, default_seconds=30,
                    help_text="safety-net re-check of every EtcdBackup's schedule, in seconds")
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
