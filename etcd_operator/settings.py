"""The operator's effective configuration, from flags that default from environment variables."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from etcd_common.api.images import (
    DEFAULT_TRUSTED_REPOSITORIES,
    OPERATOR_IMAGE_ENV,
    OPERATOR_IMAGE_FLAG,
    OPERATOR_IMAGE_HELP,
    parse_trusted_repositories,
)
from etcd_common.api.restore_source import DEFAULT_FETCH_IMAGE
from etcd_operator.tls.ca_rotation import DEFAULT_TRUST_PROPAGATION_SECONDS
from operator_runtime.flags import (
    RuntimeSettings,
    add_program_flag,
    add_resync_flag,
    env_str,
    operator_parser,
    runtime_settings,
    watched_namespace,
)

DEFAULT_UNHEALTHY_MEMBER_TIMEOUT_SECONDS = 300.0


@dataclass(frozen=True)
class OperatorSettings:
    namespace: str | None  # None: watch all namespaces
    resync_seconds: float
    etcdctl_binary: str | None
    runtime: RuntimeSettings
    trusted_repositories: tuple[str, ...] = DEFAULT_TRUSTED_REPOSITORIES
    unhealthy_member_timeout_seconds: float | None = DEFAULT_UNHEALTHY_MEMBER_TIMEOUT_SECONDS
    # The image whose `etcd-restore-seed` fetches a backup for a quorum-loss recovery's seed.
    recovery_fetch_image: str = DEFAULT_FETCH_IMAGE
    # spec.TLS.issued CA rotation: how long a changed Secret takes to reach mounts and clients.
    trust_propagation_seconds: float = DEFAULT_TRUST_PROPAGATION_SECONDS


def parse_settings(argv: Sequence[str] | None = None) -> OperatorSettings:
    parser = operator_parser(
        prog="etcd-operator", kind_plural="EtcdClusters",
        description="Runs etcd clusters described by EtcdCluster resources (etcd.database.coreos.com/v1beta2).",
    )
    add_resync_flag(parser, default_seconds=10,
                    help_text="safety-net re-check of every cluster's etcd health, in seconds; a cluster found "
                              "converged pass after pass is re-checked less often, up to 3 times this "
                              "(events still wake it at once)")
    add_program_flag(parser, "etcdctl", env="ETCDCTL_BINARY")
    parser.add_argument(
        "--trusted-repositories", default=env_str("TRUSTED_REPOSITORIES", ",".join(DEFAULT_TRUSTED_REPOSITORIES)),
        help="comma-separated image repositories EtcdClusters may use in spec.repository and "
             "spec.restore.fetchImage (an entry ending in / trusts every repository under it); others are refused "
             f"[TRUSTED_REPOSITORIES, default {','.join(DEFAULT_TRUSTED_REPOSITORIES)}]")
    parser.add_argument(OPERATOR_IMAGE_FLAG, default=env_str(OPERATOR_IMAGE_ENV, ""), help=OPERATOR_IMAGE_HELP)
    parser.add_argument(
        "--unhealthy-member-timeout-seconds", type=float,
        default=float(env_str("UNHEALTHY_MEMBER_TIMEOUT_SECONDS", str(DEFAULT_UNHEALTHY_MEMBER_TIMEOUT_SECONDS))),
        help="a voting member unhealthy this long, a learner that did not answer this long after its pod "
             "started, or a member whose pod stays Terminating this long past its grace period, is replaced "
             "while quorum allows; 0: wait for an unhealthy member forever (a stuck pod: 300 s) "
             f"[UNHEALTHY_MEMBER_TIMEOUT_SECONDS, default {DEFAULT_UNHEALTHY_MEMBER_TIMEOUT_SECONDS:.0f}]")
    parser.add_argument(
        "--recovery-fetch-image", default=env_str("RECOVERY_FETCH_IMAGE", DEFAULT_FETCH_IMAGE),
        help="image of the init containers that fetch an EtcdBackup's snapshot when a quorum-loss recovery seeds "
             "from a backup newer than the surviving member: this operator's own image "
             f"[RECOVERY_FETCH_IMAGE, default {DEFAULT_FETCH_IMAGE}]")
    parser.add_argument(
        "--trust-propagation-seconds", type=float,
        default=float(env_str("TRUST_PROPAGATION_SECONDS", str(DEFAULT_TRUST_PROPAGATION_SECONDS))),
        help="a CA rotation of spec.TLS.issued waits this long after it changes the Secrets' CA files or "
             "certificates before its next step: the kubelet's sync period plus its Secret cache (at least "
             "30 s, how often the operators re-read their client Secret) "
             f"[TRUST_PROPAGATION_SECONDS, default {DEFAULT_TRUST_PROPAGATION_SECONDS:.0f}]")
    args = parser.parse_args(argv)
    return OperatorSettings(
        namespace=watched_namespace(args),
        resync_seconds=args.resync_seconds,
        etcdctl_binary=args.etcdctl,
        runtime=runtime_settings(args),
        unhealthy_member_timeout_seconds=args.unhealthy_member_timeout_seconds or None,
        trusted_repositories=parse_trusted_repositories(args.trusted_repositories, args.operator_image),
        recovery_fetch_image=args.recovery_fetch_image,
        trust_propagation_seconds=args.trust_propagation_seconds,
    )
