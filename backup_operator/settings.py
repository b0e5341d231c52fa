"""The backup operator's effective configuration, from flags that default from environment variables."""
from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from backup_operator.endpoint_policy import (
    CROSS_NAMESPACE_FLAG,
    DEFAULT_CLUSTER_DOMAIN,
    DEFAULT_POLICY,
    ENDPOINT_HOSTS_FLAG,
    S3_ENDPOINT_HOSTS_FLAG,
    EndpointPolicy,
)
from backup_operator.slots import DEFAULT_MAX_CONCURRENT_BACKUPS
from etcd_common.api.maintenance import parse_quantity_bytes
from etcd_common.storage.locations import POD_IDENTITY_FLAG
from operator_runtime.flags import (
    RuntimeSettings,
    add_program_flag,
    add_resync_flag,
    env_bool,
    env_str,
    operator_parser,
    runtime_settings,
    watched_namespace,
)

# CoreOS set no minimum; a snapshot of a large database every few seconds would never stop.
DEFAULT_MIN_BACKUP_INTERVAL_SECONDS: Final = 60.0


@dataclass(frozen=True)
class BackupOperatorSettings:
    namespace: str | None  # None: watch all namespaces
    resync_seconds: float
    work_dir: str
    etcdctl_binary: str | None
    etcdutl_binary: str | None
    runtime: RuntimeSettings
    # Which etcd and S3 endpoints EtcdBackups may name (tenant isolation, no request forgery).
    endpoint_policy: EndpointPolicy = DEFAULT_POLICY
    # Backups taken at once; more due wait in a fair queue (slots.py).
    max_concurrent_backups: int = DEFAULT_MAX_CONCURRENT_BACKUPS
    # A periodic backupIntervalInSecond below this is raised to it (a warning in status).
    min_backup_interval_seconds: float = DEFAULT_MIN_BACKUP_INTERVAL_SECONDS
    # The etcd a trial restore (spec.trialRestore) serves a restored snapshot with, on 127.0.0.1.
    etcd_binary: str | None = None
    # An EtcdBackup naming no storage secret may use this pod's own identity (the SDK's default
    # credential chain: IRSA, GKE workload identity); off: refused, CredentialsRequired.
    allow_pod_identity: bool = False
    # The work directory's own size limit in bytes (its emptyDir's sizeLimit); None: the disk's free space.
    work_dir_size_limit_bytes: int | None = None


def add_etcd_tool_flags(parser: argparse.ArgumentParser) -> None:
    """Where snapshots are written and the etcd programs; shared with `etcd-backup` (oneshot.py)."""
    parser.add_argument("--work-dir", default=env_str("BACKUP_WORK_DIR", tempfile.gettempdir()),
                        help="where snapshots are written before upload (an emptyDir with room for the "
                             "largest database) [BACKUP_WORK_DIR, else TMPDIR]")
    parser.add_argument("--work-dir-size-limit", type=_size_limit,
                        default=_size_limit(env_str("BACKUP_WORK_DIR_SIZE_LIMIT", "")),
                        help="the work directory's own size limit (its emptyDir's sizeLimit, a quantity such as "
                             "20Gi): a backup starts only if it fits in this limit less what the directory "
                             "holds, as well as in the disk's free space (the kubelet evicts the pod of an "
                             "emptyDir over its limit); empty: the disk's free space only "
                             "[BACKUP_WORK_DIR_SIZE_LIMIT]")
    add_program_flag(parser, "etcdctl", env="ETCDCTL_BINARY")
    add_program_flag(parser, "etcdutl", env="ETCDUTL_BINARY")


def _size_limit(value: str) -> int | None:
    """A Kubernetes quantity ("20Gi", "500M", bytes) in bytes; "" or "0": no limit."""
    if not value.strip():
        return None
    size = parse_quantity_bytes(value.strip())
    if size is None:
        raise argparse.ArgumentTypeError(f"not a quantity (like 20Gi or 500M): {value!r}")
    return size or None


def add_endpoint_policy_flags(parser: argparse.ArgumentParser) -> None:
    """What EtcdBackups' `etcdEndpoints` and `s3.endpoint` may name (docs/backup.md, "Tenants")."""
    parser.add_argument(CROSS_NAMESPACE_FLAG, action="store_true",
                        default=env_bool("BACKUP_ALLOW_CROSS_NAMESPACE_ENDPOINTS", False),
                        help="let an EtcdBackup's etcdEndpoints name services and pods of other namespaces "
                             "(<name>.<namespace>.svc); off: only its own namespace's "
                             "[BACKUP_ALLOW_CROSS_NAMESPACE_ENDPOINTS]")
    parser.add_argument(ENDPOINT_HOSTS_FLAG, type=_host_patterns,
                        default=_host_patterns(env_str("BACKUP_ALLOWED_ENDPOINT_HOSTS", "")),
                        help="comma-separated host patterns (* wildcards, e.g. '*.etcd.example.com,10.0.0.5') "
                             "etcdEndpoints may name besides the EtcdBackup's own namespace's services; "
                             "empty: none [BACKUP_ALLOWED_ENDPOINT_HOSTS]")
    parser.add_argument(S3_ENDPOINT_HOSTS_FLAG, type=_host_patterns,
                        default=_host_patterns(env_str("BACKUP_ALLOWED_S3_ENDPOINT_HOSTS", "")),
                        help="comma-separated host patterns an S3 endpoint (spec.s3.endpoint or the awsSecret's "
                             "endpoint_url) may name besides AWS's own (*.amazonaws.com); empty: any host "
                             "[BACKUP_ALLOWED_S3_ENDPOINT_HOSTS]")
    parser.add_argument(POD_IDENTITY_FLAG, action="store_true", default=env_bool("BACKUP_ALLOW_POD_IDENTITY", False),
                        help="let an EtcdBackup without awsSecret/gcpSecret/ossSecret/absSecret (or with an "
                             "absSecret saying use-workload-identity) use this pod's own identity (the SDK's "
                             "default chain: IRSA, GKE or Azure workload identity, the AWS_* environment); off: "
                             "such a backup fails with CredentialsRequired "
                             "[BACKUP_ALLOW_POD_IDENTITY]")
    parser.add_argument("--cluster-domain", default=env_str("CLUSTER_DOMAIN", DEFAULT_CLUSTER_DOMAIN),
                        help="the cluster's DNS domain, accepted after .svc in etcdEndpoints "
                             f"[CLUSTER_DOMAIN, else {DEFAULT_CLUSTER_DOMAIN}]")


def _host_patterns(value: str) -> tuple[str, ...]:
    return tuple(p.strip().lower() for p in value.split(",") if p.strip())


def endpoint_policy(args: argparse.Namespace) -> EndpointPolicy:
    return EndpointPolicy(allow_cross_namespace=args.allow_cross_namespace_endpoints,
                          allowed_hosts=args.allowed_endpoint_hosts, allowed_s3_hosts=args.allowed_s3_endpoint_hosts,
                          cluster_domain=args.cluster_domain)


def parse_settings(argv: Sequence[str] | None = None) -> BackupOperatorSettings:
    parser = operator_parser(
        prog="etcd-backup-operator", kind_plural="EtcdBackups",
        description="Takes etcd snapshots described by EtcdBackup resources (etcd.database.coreos.com/v1beta2) "
                    "and streams them to S3.",
    )
    add_resync_flag(parser, default_seconds=30,
                    help_text="safety-net re-check of every EtcdBackup's schedule, in seconds")
    add_etcd_tool_flags(parser)
    add_program_flag(parser, "etcd", env="ETCD_BINARY")
    add_endpoint_policy_flags(parser)
    parser.add_argument("--max-concurrent-backups", type=_at_least_one,
                        default=env_str("BACKUP_MAX_CONCURRENT_BACKUPS", str(DEFAULT_MAX_CONCURRENT_BACKUPS)),
                        help="backups taken at once; more that are due wait in a queue, oldest due first "
                             "(status condition Queued); the work directory needs room for this many "
                             f"[BACKUP_MAX_CONCURRENT_BACKUPS, else {DEFAULT_MAX_CONCURRENT_BACKUPS}]")
    parser.add_argument("--min-backup-interval-seconds", type=float,
                        default=env_str("BACKUP_MIN_INTERVAL_SECONDS", str(DEFAULT_MIN_BACKUP_INTERVAL_SECONDS)),
                        help="a periodic backupIntervalInSecond below this is raised to it (status condition "
                             "IntervalRaised, a Warning event) [BACKUP_MIN_INTERVAL_SECONDS, else "
                             f"{DEFAULT_MIN_BACKUP_INTERVAL_SECONDS:.0f}]")
    args = parser.parse_args(argv)
    return BackupOperatorSettings(
        namespace=watched_namespace(args),
        resync_seconds=args.resync_seconds,
        work_dir=args.work_dir,
        etcdctl_binary=args.etcdctl,
        etcdutl_binary=args.etcdutl,
        runtime=runtime_settings(args),
        endpoint_policy=endpoint_policy(args),
        max_concurrent_backups=args.max_concurrent_backups,
        min_backup_interval_seconds=max(0.0, args.min_backup_interval_seconds),
        etcd_binary=args.etcd,
        allow_pod_identity=args.allow_pod_identity,
        work_dir_size_limit_bytes=args.work_dir_size_limit,
    )


def _at_least_one(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    return number
