"""The operator's effective configuration, from flags that default from environment variables."""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Sequence

from etcd_operator.spec import DEFAULT_TRUSTED_REPOSITORIES

DEFAULT_UNHEALTHY_MEMBER_TIMEOUT_SECONDS = 300.0
from operator_runtime.flags import (
    RuntimeSettings,
    add_runtime_flags,
    add_watch_scope_flags,
    env_str,
    runtime_settings,
    watched_namespace,
)


@dataclass(frozen=True)
class OperatorSettings:
    namespace: str | None  # None: watch all namespaces
    resync_seconds: float
    etcdctl_binary: str | None
    runtime: RuntimeSettings
    trusted_repositories: tuple[str, ...] = DEFAULT_TRUSTED_REPOSITORIES
    unhealthy_member_timeout_seconds: float | None = DEFAULT_UNHEALTHY_MEMBER_TIMEOUT_SECONDS


def parse_settings(argv: Sequence[str] | None = None) -> OperatorSettings:
    parser = argparse.ArgumentParser(
        prog="etcd-operator",
        description="Runs etcd clusters described by EtcdCluster resources "
                    "(etcd.database.coreos.com/v1beta2). Every flag defaults from the environment "
                    "variable named in its help.",
    )
    add_watch_scope_flags(parser, kind_plural="EtcdClusters")
    add_runtime_flags(parser, default_lease_name="etcd-operator")
    parser.add_argument("--resync-seconds", type=float, default=float(env_str("RESYNC_SECONDS", "10")),
                        help="safety-net re-check of every cluster's etcd health, in seconds; a cluster found "
                             "converged pass after pass is re-checked less often, up to 3 times this "
                             "(events still wake it at once) [RESYNC_SECONDS]")
    parser.add_argument("--etcdctl", default=os.environ.get("ETCDCTL_BINARY"),
                        help="etcdctl binary; default: the one next to this Python, else PATH [ETCDCTL_BINARY]")
    parser.add_argument(
        "--trusted-repositories", default=env_str("TRUSTED_REPOSITORIES", ",".join(DEFAULT_TRUSTED_REPOSITORIES)),
        help="comma-separated image repositories EtcdClusters may use in spec.repository (an entry "
             "ending in / trusts every repository under it); others are refused "
             f"[TRUSTED_REPOSITORIES, default {','.join(DEFAULT_TRUSTED_REPOSITORIES)}]")
    parser.add_argument(
        "--unhealthy-member-timeout-seconds", type=float,
        default=float(env_str("UNHEALTHY_MEMBER_TIMEOUT_SECONDS", str(DEFAULT_UNHEALTHY_MEMBER_TIMEOUT_SECONDS))),
        help="a voting member unhealthy this long, or a learner that did not answer this long after its pod "
             "started, is replaced while quorum allows; 0: wait for it forever "
             f"[UNHEALTHY_MEMBER_TIMEOUT_SECONDS, default {DEFAULT_UNHEALTHY_MEMBER_TIMEOUT_SECONDS:.0f}]")
    args = parser.parse_args(argv)
    return OperatorSettings(
        namespace=watched_namespace(args),
        resync_seconds=args.resync_seconds,
        etcdctl_binary=args.etcdctl,
        runtime=runtime_settings(args),
        unhealthy_member_timeout_seconds=args.unhealthy_member_timeout_seconds or None,
        trusted_repositories=tuple(r.strip() for r in args.trusted_repositories.split(",") if r.strip()),
    )
