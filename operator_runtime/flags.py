"""Command-line flags every operator shares, each defaulting from an environment variable named
in its help, and the settings they make. An operator's `settings.py` starts from `operator_parser`
(watch scope, API access, HTTP endpoints, leader election, logs) and adds only its own flags."""
from __future__ import annotations

import argparse
import os
import socket
from dataclasses import dataclass

from operator_runtime.logs import LOG_FORMATS

EVERY_FLAG_FROM_ENVIRONMENT = "Every flag defaults from the environment variable named in its help."


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    """1/true/yes/on (any case) is true; anything else false."""
    return os.environ.get(name, str(default)).strip().lower() in ("1", "true", "yes", "on")


def own_namespace() -> str:
    """The namespace this pod runs in ($POD_NAMESPACE, from the downward API), else default."""
    return env_str("POD_NAMESPACE", "default")


@dataclass(frozen=True)
class RuntimeSettings:
    """What `run_operator` needs: API access, the HTTP endpoints, leader election, logs."""

    kubeconfig: str | None
    http_address: str
    http_port: int
    leader_elect: bool
    lease_namespace: str
    lease_name: str
    identity: str
    log_format: str
    log_level: str


def add_watch_scope_flags(parser: argparse.ArgumentParser, *, kind_plural: str) -> None:
    """`--namespace` / `--all-namespaces`: which namespaces' `kind_plural` (e.g. EtcdClusters) to
    watch; read them back with `watched_namespace`."""
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--namespace", default=env_str("WATCH_NAMESPACE", own_namespace()),
                       help="namespace to watch [WATCH_NAMESPACE, else POD_NAMESPACE, else default]")
    scope.add_argument("--all-namespaces", action="store_true", default=env_bool("ALL_NAMESPACES", False),
                       help=f"watch {kind_plural} in every namespace (needs the ClusterRole) [ALL_NAMESPACES]")


def watched_namespace(args: argparse.Namespace) -> str | None:
    """The namespace parsed with `add_watch_scope_flags`' flags; None: every namespace."""
    return None if args.all_namespaces else str(args.namespace)


def operator_parser(*, prog: str, description: str, kind_plural: str) -> argparse.ArgumentParser:
    """The parser of an operator called `prog` (also its Lease's default name) that watches
    `kind_plural`, with the watch-scope and runtime flags; `description` says what it does."""
    parser = argparse.ArgumentParser(prog=prog, description=f"{description} {EVERY_FLAG_FROM_ENVIRONMENT}")
    add_watch_scope_flags(parser, kind_plural=kind_plural)
    add_runtime_flags(parser, default_lease_name=prog)
    return parser


def add_resync_flag(parser: argparse.ArgumentParser, *, default_seconds: float, help_text: str) -> None:
    """`--resync-seconds` [RESYNC_SECONDS]: the safety-net re-check period; `help_text` says of what."""
    parser.add_argument("--resync-seconds", type=float, default=float(env_str("RESYNC_SECONDS", str(default_seconds))),
                        help=f"{help_text} [RESYNC_SECONDS]")


def add_program_flag(parser: argparse.ArgumentParser, program: str, *, env: str) -> None:
    """`--<program>`: the path of an external program the operator runs, from `env`."""
    parser.add_argument(f"--{program}", default=os.environ.get(env),
                        help=f"{program} binary; default: the one next to this Python, else PATH [{env}]")


def add_kubeconfig_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"),
                        help="kubeconfig file; in-cluster config when unset [KUBECONFIG]")


def add_log_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-format", choices=LOG_FORMATS, default=env_str("LOG_FORMAT", "text"),
                        help="log line format [LOG_FORMAT]")
    parser.add_argument("--log-level", default=env_str("LOG_LEVEL", "INFO"), help="log level [LOG_LEVEL]")


def add_runtime_flags(parser: argparse.ArgumentParser, *, default_lease_name: str) -> None:
    """Add the flags of `RuntimeSettings` to `parser`."""
    namespace = own_namespace()
    add_kubeconfig_flag(parser)
    parser.add_argument("--http-address", default=env_str("HTTP_ADDRESS", "127.0.0.1"),
                        help="address for /metrics and /healthz; set it to the pod IP in a pod [HTTP_ADDRESS]")
    parser.add_argument("--http-port", type=int, default=int(env_str("HTTP_PORT", "8080")),
                        help="port for /metrics and /healthz [HTTP_PORT]")
    parser.add_argument("--leader-elect", action="store_true", default=env_bool("LEADER_ELECT", False),
                        help="take a Lease before acting so two replicas never act at once [LEADER_ELECT]")
    parser.add_argument("--lease-namespace", default=env_str("LEASE_NAMESPACE", namespace),
                        help="namespace of the leader-election Lease [LEASE_NAMESPACE, else POD_NAMESPACE]")
    parser.add_argument("--lease-name", default=env_str("LEASE_NAME", default_lease_name),
                        help="name of the leader-election Lease [LEASE_NAME]")
    parser.add_argument("--identity", default=env_str("POD_NAME", socket.gethostname()),
                        help="this replica's name in the Lease [POD_NAME, else the hostname]")
    add_log_flags(parser)


def runtime_settings(args: argparse.Namespace) -> RuntimeSettings:
    """The `RuntimeSettings` from arguments parsed with `add_runtime_flags`' flags."""
    return RuntimeSettings(
        kubeconfig=args.kubeconfig,
        http_address=args.http_address,
        http_port=args.http_port,
        leader_elect=args.leader_elect,
        lease_namespace=args.lease_namespace,
        lease_name=args.lease_name,
        identity=args.identity,
        log_format=args.log_format,
        log_level=args.log_level,
    )
