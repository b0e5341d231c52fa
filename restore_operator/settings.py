"""The restore operator's effective configuration, from flags that default from environment variables."""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from etcd_common.api.images import (
    DEFAULT_TRUSTED_REPOSITORIES,
    OPERATOR_IMAGE_ENV,
    OPERATOR_IMAGE_FLAG,
    OPERATOR_IMAGE_HELP,
    parse_trusted_repositories,
)
from etcd_common.api.restore_source import DEFAULT_BUMP_REVISION, DEFAULT_FETCH_IMAGE
from etcd_common.storage.endpoint_allowance import S3_ENDPOINT_HOSTS_FLAG
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
class RestoreSettings:
    namespace: str | None  # None: watch all namespaces
    resync_seconds: float
    work_dir: str | None
    fetch_image: str
    bump_revision: int
    etcdutl_binary: str | None
    etcdctl_binary: str | None
    runtime: RuntimeSettings
    trusted_repositories: tuple[str, ...] = DEFAULT_TRUSTED_REPOSITORIES
    # Host patterns an object-store endpoint (spec's, or its secret's) and a gcpSecret's token_uri
    # may name besides the provider's own; () = any host (as the backup operator's flag).
    allowed_s3_endpoint_hosts: tuple[str, ...] = ()


def parse_settings(argv: Sequence[str] | None = None) -> RestoreSettings:
    parser = operator_parser(
        prog="etcd-restore-operator", kind_plural="EtcdRestores",
        description="Restores etcd clusters from S3 snapshots described by EtcdRestore resources "
                    "(etcd.database.coreos.com/v1beta2).",
    )
    add_resync_flag(parser, default_seconds=10, help_text="safety-net re-check of every restore, in seconds")
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
    parser.add_argument(
        "--trusted-repositories", default=env_str("TRUSTED_REPOSITORIES", ",".join(DEFAULT_TRUSTED_REPOSITORIES)),
        help="the etcd operator's trusted image repositories (set both the same): a restore whose fetch image "
             "or EtcdCluster repository is not among them fails before anything is deleted "
             f"[TRUSTED_REPOSITORIES, default {','.join(DEFAULT_TRUSTED_REPOSITORIES)}]")
    parser.add_argument(OPERATOR_IMAGE_FLAG, default=env_str(OPERATOR_IMAGE_ENV, ""), help=OPERATOR_IMAGE_HELP)
    parser.add_argument(
        S3_ENDPOINT_HOSTS_FLAG, default=env_str("RESTORE_ALLOWED_S3_ENDPOINT_HOSTS", ""),
        help="comma-separated host patterns (* wildcards) an object-store endpoint (spec.s3.endpoint and the other "
             "stores', or the one their secret names) and a gcpSecret's token_uri may name besides the provider's "
             "own; others fail the restore (EndpointNotAllowed) before any request; empty: any host "
             "(set it as the backup operator's) [RESTORE_ALLOWED_S3_ENDPOINT_HOSTS]")
    add_program_flag(parser, "etcdutl", env="ETCDUTL_BINARY")
    add_program_flag(parser, "etcdctl", env="ETCDCTL_BINARY")
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
        trusted_repositories=parse_trusted_repositories(args.trusted_repositories, args.operator_image),
        allowed_s3_endpoint_hosts=tuple(p.strip().lower() for p in args.allowed_s3_endpoint_hosts.split(",")
                                        if p.strip()),
    )
