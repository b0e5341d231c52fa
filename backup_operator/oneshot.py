"""`etcd-backup`: take one backup, apply retention, print what was done, exit; for a Kubernetes
CronJob (scheduled backups without the operator's own schedule).

What to back up comes from flags (each defaulting from an environment variable) or from an
EtcdBackup used as a template (`--from-backup NAME`: its endpoints or cluster, storage section,
client TLS secret, maxBackups and timeout; flags given override it). The storage is S3
(`--s3-path`), Azure Blob Storage (`--abs-path`), Google Cloud Storage (`--gcs-path`) or Alibaba
OSS (`--oss-path`), each with its secret and endpoint flags named after the EtcdBackup fields. Keys follow the periodic
scheme `<path>_v<revision>_<UTC time>` unless `--exact-key`, so each run writes a new object and
retention keeps the newest `--max-backups`. Exit status 0 on success, 1 when the backup failed (the
reason on stderr), 2 for bad flags.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from backup_operator import reasons
from backup_operator.controller import backup_environment
from backup_operator.keys import our_backups
from backup_operator.reasons import BackupFailed
from backup_operator.schedule import DEFAULT_TIMEOUT_SECONDS
from backup_operator.settings import add_etcd_tool_flags
from backup_operator.taking import BackupRequest, take_backup
from etcd_common.api.etcd_backup import parse_etcd_backup
from etcd_common.api.resources import ETCD_BACKUPS
from etcd_common.api.storage_locations import (
    COMPRESSIONS,
    STORAGE_TYPE_S3,
    EncryptionKeyRef,
    OtherLocation,
    S3Location,
    StorageLocation,
)
from etcd_common.storage.locations import object_url, split_location, storage_for_location
from etcd_common.storage.objects import ObjectStorage, StorageError
from kube_adapter.client import load_api_client
from kube_adapter.errors import KubeError
from kube_adapter.resources import SECRETS, ResourceClient
from operator_runtime.flags import (
    EVERY_FLAG_FROM_ENVIRONMENT,
    add_kubeconfig_flag,
    add_log_flags,
    env_bool,
    env_str,
    own_namespace,
)
from operator_runtime.logs import configure_logging

EXIT_FAILED = 1
EXIT_USAGE = 2
# Without a storage secret the command uses its own pod's identity (the SDK's default chain): that
# pod is a CronJob's, run under the ServiceAccount its creator chose, not the operator's.
OWN_POD_IDENTITY = True
log = logging.getLogger("backup_operator.oneshot")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="etcd-backup",
        description="Take one etcd snapshot, upload it to S3, ABS, GCS or OSS and apply retention (for a CronJob). "
                    f"{EVERY_FLAG_FROM_ENVIRONMENT}",
    )
    parser.add_argument("--namespace", default=env_str("BACKUP_NAMESPACE", own_namespace()),
                        help="namespace of the EtcdBackup template, EtcdCluster and secrets [BACKUP_NAMESPACE, "
                             "else POD_NAMESPACE]")
    parser.add_argument("--from-backup", default=env_str("FROM_BACKUP", ""),
                        help="an EtcdBackup whose spec is the template [FROM_BACKUP]")
    parser.add_argument("--etcd-cluster", default=env_str("ETCD_CLUSTER", ""),
                        help="an EtcdCluster to back up (its endpoints and client TLS) [ETCD_CLUSTER]")
    parser.add_argument("--endpoints", default=env_str("ETCD_ENDPOINTS", ""),
                        help="comma-separated etcd client URLs, instead of --etcd-cluster [ETCD_ENDPOINTS]")
    parser.add_argument("--client-tls-secret", default=env_str("CLIENT_TLS_SECRET", ""),
                        help="secret with etcd-client.crt/.key/-ca.crt [CLIENT_TLS_SECRET]")
    parser.add_argument("--s3-path", default=env_str("S3_PATH", ""), help='"<bucket>/<key>" [S3_PATH]')
    parser.add_argument("--aws-secret", default=env_str("AWS_SECRET", ""),
                        help="secret with AWS `credentials`/`config` files; unset: the AWS_* environment "
                             "[AWS_SECRET]")
    parser.add_argument("--s3-endpoint", default=env_str("S3_ENDPOINT", ""),
                        help="S3-compatible server URL; unset: AWS [S3_ENDPOINT]")
    parser.add_argument("--force-path-style", action="store_true", default=env_bool("S3_FORCE_PATH_STYLE", False),
                        help="path-style bucket addressing [S3_FORCE_PATH_STYLE]")
    for section, secret_flag, secret_help in (
        ("abs", "abs-secret", "secret with storage-account and storage-key (optional cloud, endpoint), or use-workload-identity "
                                "instead of the key; unset: this pod's Azure workload identity at --abs-endpoint"),
        ("gcs", "gcp-secret", "secret with access-token or credentials.json (optional endpoint); unset: default credentials"),
        ("oss", "oss-secret", "secret with accessKeyID and accessKeySecret; unset: the AWS_* environment"),
    ):
        upper = section.upper()
        env_secret = secret_flag.upper().replace("-", "_")
        parser.add_argument(f"--{section}-path", default=env_str(f"{upper}_PATH", ""),
                            help=f'"<bucket or container>/<key>" on {upper}, instead of --s3-path [{upper}_PATH]')
        parser.add_argument(f"--{secret_flag}", default=env_str(env_secret, ""), help=f"{secret_help} [{env_secret}]")
        parser.add_argument(f"--{section}-endpoint", default=env_str(f"{upper}_ENDPOINT", ""),
                            help=f"{upper} endpoint URL; unset: the provider's [{upper}_ENDPOINT]")
    parser.add_argument("--compression", default=env_str("BACKUP_COMPRESSION", ""), choices=["", *COMPRESSIONS],
                        help="None or Gzip; empty: the template's, else None [BACKUP_COMPRESSION]")
    parser.add_argument("--encryption-secret", default=env_str("ENCRYPTION_SECRET", ""),
                        help="secret whose key `key` is the AES-256 key (base64 of 32 bytes) to encrypt with; "
                             "empty: the template's spec.encryption, else none [ENCRYPTION_SECRET]")
    parser.add_argument("--max-backups", type=int, default=int(env_str("MAX_BACKUPS", "-1")),
                        help="keep this many newest backups of the path (0: all) [MAX_BACKUPS]")
    parser.add_argument("--timeout-seconds", type=float, default=float(env_str("TIMEOUT_SECONDS", "0")),
                        help=f"give up after this long (default {DEFAULT_TIMEOUT_SECONDS}) [TIMEOUT_SECONDS]")
    parser.add_argument("--exact-key", action="store_true", default=env_bool("EXACT_KEY", False),
                        help="write the path as given (overwritten every run) instead of <path>_v<rev>_<time> "
                             "[EXACT_KEY]")
    parser.add_argument("--list", action="store_true",
                        help="list the backups under the path (one JSON line each) instead of taking one")
    add_kubeconfig_flag(parser)
    add_log_flags(parser)
    add_etcd_tool_flags(parser)
    return parser


def build_request(args: argparse.Namespace, template: dict[str, object] | None) -> BackupRequest:
    """The request from the template (if any) with the flags given laid over it; raises
    BackupFailed(InvalidSpec) when it names no source or no destination."""
    owner = args.from_backup or "etcd-backup"
    if template is not None:
        backup = parse_etcd_backup(template)
        if backup.spec is None:
            raise BackupFailed(reasons.INVALID_SPEC, f"EtcdBackup {args.namespace}/{args.from_backup}: {backup.spec_error}")
        request = BackupRequest.from_spec(args.namespace, owner, backup.spec, periodic=True,
                                          timeout_seconds=backup.spec.policy.timeout_seconds or DEFAULT_TIMEOUT_SECONDS)
    else:
        request = BackupRequest(namespace=args.namespace, owner=owner,
                                location=StorageLocation(STORAGE_TYPE_S3, s3=S3Location(path="")))
    location = _location_from_flags(args, request.location)
    endpoints = tuple(e.strip() for e in args.endpoints.split(",") if e.strip())
    request = replace(
        request, location=location,
        endpoints=endpoints or (() if args.etcd_cluster else request.endpoints),
        etcd_cluster_name=args.etcd_cluster or ("" if endpoints else request.etcd_cluster_name),
        client_tls_secret=args.client_tls_secret or request.client_tls_secret,
        periodic=not args.exact_key,
        max_backups=args.max_backups if args.max_backups >= 0 else request.max_backups,
        timeout_seconds=args.timeout_seconds or request.timeout_seconds or DEFAULT_TIMEOUT_SECONDS,
        compression=args.compression or request.compression,
        encryption=EncryptionKeyRef(args.encryption_secret) if args.encryption_secret else request.encryption,
    )
    if not request.location.path:
        raise BackupFailed(reasons.INVALID_SPEC, f"--{request.location.section}-path (or a template's "
                                                 f"spec.{request.location.section}.path) is required")
    if not request.endpoints and not request.etcd_cluster_name:
        raise BackupFailed(reasons.INVALID_SPEC, "--etcd-cluster or --endpoints (or a template) is required")
    return request


def _location_from_flags(args: argparse.Namespace, template: StorageLocation) -> StorageLocation:
    """The template's location with the storage flags laid over it; a path flag of another
    storage type than the template's replaces its location."""
    chosen = [section for section in ("s3", "abs", "gcs", "oss") if getattr(args, f"{section}_path")]
    if len(chosen) > 1:
        raise BackupFailed(reasons.INVALID_SPEC, f"only one of {', '.join(f'--{c}-path' for c in chosen)} may be given")
    section = chosen[0] if chosen else template.section
    storage_type = section.upper()
    if section == "s3":
        base = template.s3 if template.s3 is not None else S3Location(path="")
        return StorageLocation(storage_type, s3=replace(
            base, path=args.s3_path or base.path, aws_secret=args.aws_secret or base.aws_secret,
            endpoint=args.s3_endpoint or base.endpoint, force_path_style=args.force_path_style or base.force_path_style))
    other = template.other if template.other is not None and template.section == section else OtherLocation(path="")
    secret = getattr(args, {"abs": "abs_secret", "gcs": "gcp_secret", "oss": "oss_secret"}[section])
    return StorageLocation(storage_type, other=replace(
        other, path=getattr(args, f"{section}_path") or other.path, secret=secret or other.secret,
        endpoint=getattr(args, f"{section}_endpoint") or other.endpoint))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_format, args.log_level)
    try:
        api = load_api_client(args.kubeconfig)
        template = None
        if args.from_backup:
            try:
                template = ResourceClient(api, ETCD_BACKUPS).get(args.namespace, args.from_backup)
            except KubeError as error:
                raise BackupFailed(reasons.INVALID_SPEC,
                                   f"cannot read EtcdBackup {args.namespace}/{args.from_backup}: {error}") from error
        request = build_request(args, template)
        if args.list:
            return list_backups(request, ResourceClient(api, SECRETS).get)
        environment = backup_environment(api, work_dir=args.work_dir, etcdctl_binary=args.etcdctl,
                                         etcdutl_binary=args.etcdutl, allow_pod_identity=OWN_POD_IDENTITY,
                                         work_dir_size_limit_bytes=args.work_dir_size_limit)
        result = take_backup(request, environment, log)
    except BackupFailed as failure:
        print(f"etcd-backup: backup failed: {failure.reason}: {failure.message}", file=sys.stderr)
        return EXIT_FAILED
    bucket = request.location.path.strip().lstrip("/").split("/", 1)[0]
    print(json.dumps({
        "result": "succeeded", "object": object_url(request.location, bucket, result.key), "size": result.size,
        "sha256": result.sha256,
        "etcdRevision": result.etcd_revision, "etcdVersion": result.etcd_version, "endpoint": result.endpoint,
        "durationSeconds": round(result.duration_seconds, 3), "retained": result.retained,
        "retentionError": result.retention_error or None,
    }))
    return EXIT_FAILED if result.retention_error else 0


def list_backups(request: BackupRequest, read_secret: Callable[[str, str], dict[str, Any]]) -> int:
    """Print every object under the request's path: the one-shot key and the periodic ones
    (with their revision: a periodic key's, the one-shot object's metadata), oldest first."""
    try:
        storage = storage_for_location(request.location, request.namespace, read_secret,
                                       allow_pod_identity=OWN_POD_IDENTITY)
        bucket, base_key = split_location(request.location)
        objects = storage.list(bucket, base_key)
    except StorageError as error:
        print(f"etcd-backup: cannot list: {error.reason}: {error.message}", file=sys.stderr)
        return EXIT_FAILED
    periodic = {p.key: p for p in our_backups(base_key, (o.key for o in objects))}
    for info in sorted(objects, key=lambda o: (1, periodic[o.key].time, periodic[o.key].revision)
                       if o.key in periodic else (0, o.last_modified, 0)):
        if info.key != base_key and info.key not in periodic:
            continue  # foreign objects under the same prefix
        entry = periodic.get(info.key)
        print(json.dumps({"object": object_url(request.location, bucket, info.key), "size": info.size,
                          "lastModified": info.last_modified.isoformat(),
                          "etcdRevision": entry.revision if entry else _recorded_revision(storage, bucket, info.key)}))
    return 0


def _recorded_revision(storage: ObjectStorage, bucket: str, key: str) -> int | None:
    """The `etcd-revision` a backup recorded in its object's metadata; None when it has none (an
    object not written by a backup) or is gone since it was listed."""
    try:
        recorded = (storage.head(bucket, key).metadata or {}).get("etcd-revision", "")
    except StorageError:
        return None
    return int(recorded) if recorded.isdigit() else None


if __name__ == "__main__":
    sys.exit(main())
