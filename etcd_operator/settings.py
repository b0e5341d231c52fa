"""The operator's effective configuration, from flags that default from environment variables."""
from __future__ import annotations

import argparse
import os
import socket
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class OperatorSettings:
    namespace: str | None  # None: watch all namespaces
    kubeconfig: str | None
    http_address: str
    http_port: int
    leader_elect: bool
    lease_namespace: str
    lease_name: str
    identity: str
    resync_seconds: float
    log_format: str
    log_level: str
    etcdctl_binary: str | None


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def _env_bool(name: str, default: bool) -> bool:
    return os.environ.get(name, str(default)).strip().lower() in ("1", "true", "yes", "on")


def parse_settings(argv: Sequence[str] | None = None) -> OperatorSettings:
    own_namespace = _env("POD_NAMESPACE", "default")
    parser = argparse.ArgumentParser(
        prog="etcd-operator",
        description="Runs etcd clusters described by EtcdCluster resources "
                    "(etcd.database.coreos.com/v1beta2). Every flag defaults from the environment "
                    "variable named in its help.",
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--namespace", default=_env("WATCH_NAMESPACE", own_namespace),
                       help="namespace to watch [WATCH_NAMESPACE, else POD_NAMESPACE, else default]")
    scope.add_argument("--all-namespaces", action="store_true", default=_env_bool("ALL_NAMESPACES", False),
                       help="watch EtcdClusters in every namespace (needs the ClusterRole) [ALL_NAMESPACES]")
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"),
                        help="kubeconfig file; in-cluster config when unset [KUBECONFIG]")
    parser.add_argument("--http-address", default=_env("HTTP_ADDRESS", "127.0.0.1"),
                        help="address for /metrics and /healthz; set it to the pod IP in a pod [HTTP_ADDRESS]")
    parser.add_argument("--http-port", type=int, default=int(_env("HTTP_PORT", "8080")),
                        help="port for /metrics and /healthz [HTTP_PORT]")
    parser.add_argument("--leader-elect", action="store_true", default=_env_bool("LEADER_ELECT", False),
                        help="take a Lease before acting so two replicas never act at once [LEADER_ELECT]")
    parser.add_argument("--lease-namespace", default=_env("LEASE_NAMESPACE", own_namespace),
                        help="namespace of the leader-election Lease [LEASE_NAMESPACE, else POD_NAMESPACE]")
    parser.add_argument("--lease-name", default=_env("LEASE_NAME", "etcd-operator"),
                        help="name of the leader-election Lease [LEASE_NAME]")
    parser.add_argument("--identity", default=_env("POD_NAME", socket.gethostname()),
                        help="this replica's name in the Lease [POD_NAME, else the hostname]")
    parser.add_argument("--resync-seconds", type=float, default=float(_env("RESYNC_SECONDS", "10")),
                        help="safety-net re-check of every cluster's etcd health, in seconds [RESYNC_SECONDS]")
    parser.add_argument("--log-format", choices=("text", "json"), default=_env("LOG_FORMAT", "text"),
                        help="log line format [LOG_FORMAT]")
    parser.add_argument("--log-level", default=_env("LOG_LEVEL", "INFO"), help="log level [LOG_LEVEL]")
    parser.add_argument("--etcdctl", default=os.environ.get("ETCDCTL_BINARY"),
                        help="etcdctl binary; default: the one next to this Python, else PATH [ETCDCTL_BINARY]")
    args = parser.parse_args(argv)
    return OperatorSettings(
        namespace=None if args.all_namespaces else args.namespace,
        kubeconfig=args.kubeconfig,
        http_address=args.http_address,
        http_port=args.http_port,
        leader_elect=args.leader_elect,
        lease_namespace=args.lease_namespace,
        lease_name=args.lease_name,
        identity=args.identity,
        resync_seconds=args.resync_seconds,
        log_format=args.log_format,
        log_level=args.log_level,
        etcdctl_binary=args.etcdctl,
    )
