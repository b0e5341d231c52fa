"""`run_operator`: what every operator's `main` does after parsing its flags (`entry`). Logs, the
API client, /metrics and /healthz, SIGTERM/SIGINT, optional leader election (`LeaseTiming`), then
the controller until stopped. The operator gives only its settings and how to build its
controller."""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn, Protocol

from prometheus_client import CollectorRegistry

from kube_adapter.client import KubeApi, in_cluster_service_account, load_api_client
from kube_adapter.errors import stop_retrying
from kube_adapter.leadership import LeaderElector, service_account_owner
from operator_runtime.flags import RuntimeSettings
from operator_runtime.http_endpoints import serve
from operator_runtime.liveness import PROCESS_LIVENESS
from operator_runtime.logs import configure_logging

EXIT_LOST_LEADERSHIP = 3


class Runnable(Protocol):
    def run(self) -> None:
        """Work until the stop event it was built with is set."""


class MayAct(Protocol):
    """Is the lease surely ours now, and still `for_seconds` from now? Asked before every action
    (and status write or event) with how long it may take."""

    def __call__(self, for_seconds: float = 0.0) -> bool: ...


def always_may_act(for_seconds: float = 0.0) -> bool:
    """Without leader election: this replica is the only one."""
    return True


# (api, stop, may_act) -> the controller; `may_act()` is asked before every action.
ControllerFactory = Callable[[KubeApi, threading.Event, MayAct], Runnable]


@dataclass(frozen=True)
class LeaseTiming:
    """Leader-election timing; its defaults are every operator's, and defined only here.

    A renewal every 5 s keeps an idle operator's API load low (each renewal is a get and an
    update); a clean shutdown releases the lease at once, so only a crashed leader costs up to
    30 s of failover."""

    duration_seconds: int = 30
    renew_deadline_seconds: float = 20
    retry_period_seconds: float = 5


def run_operator(
    settings: RuntimeSettings,
    *,
    name: str,
    registry: CollectorRegistry,
    make_controller: ControllerFactory,
    describe: object = None,
    lease: LeaseTiming = LeaseTiming(),
    on_leadership: Callable[[bool], None] = lambda leading: None,
) -> int:
    """Run an operator called `name` (its logger, HTTP server name) until SIGTERM/SIGINT; the
    exit code. `describe` is the effective configuration logged at start (default: `settings`).
    With leader election the controller runs only while the lease is held; losing it stops
    everything and returns EXIT_LOST_LEADERSHIP, so the process restarts as a follower.
    `on_leadership(leading)` hears every change (say, for an is-leader gauge)."""
    log = logging.getLogger(name.replace("-", "_"))
    configure_logging(settings.log_format, settings.log_level)
    log.info("starting with %s", describe if describe is not None else settings)
    stop = threading.Event()
    _stop_on_signals(stop, log)
    api = load_api_client(settings.kubeconfig)
    endpoints = serve(settings.http_port, settings.http_address, registry,
                      healthy=lambda: ["stopping"] if stop.is_set() else PROCESS_LIVENESS.problems(),
                      server_name=name)
    log.info("serving /metrics and /healthz on %s", endpoints.url)
    try:
        if not settings.leader_elect:
            make_controller(api, stop, always_may_act).run()
            return 0
        code = _run_while_leading(settings, api, stop, make_controller, lease, on_leadership, log)
    finally:
        endpoints.shutdown()
    if code == EXIT_LOST_LEADERSHIP:
        exit_at_once(code)
    return code


def exit_at_once(code: int) -> NoReturn:
    """End the process with `code` now, logs flushed, without the interpreter's shutdown: after a
    lost lease, threads that still run (watches, cluster supervisors waiting on etcdctl) would meet
    the shutdown mid-write, which can abort the process (SIGABRT, exit 134: seen in a CI run)
    instead of exiting with the code that says why."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _stop_on_signals(stop: threading.Event, log: logging.Logger) -> None:
    """SIGTERM and SIGINT set `stop`."""
    def on_signal(signum: int, _frame: object) -> None:
        log.info("received %s; shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def _run_while_leading(settings: RuntimeSettings, api: KubeApi, stop: threading.Event,
                       make_controller: ControllerFactory, lease: LeaseTiming,
                       on_leadership: Callable[[bool], None], log: logging.Logger) -> int:
    """Run the controller only while this replica holds the lease; losing it stops everything
    (EXIT_LOST_LEADERSHIP)."""
    lost_leadership = threading.Event()
    owner = service_account_owner(in_cluster_service_account(), settings.lease_namespace)
    if owner is not None:
        log.info("Lease %s/%s is owned by ServiceAccount %s: removed with it on uninstall",
                 settings.lease_namespace, settings.lease_name, owner["name"])
    elector = LeaderElector(api, settings.lease_namespace, settings.lease_name, settings.identity,
                            lease_duration_seconds=lease.duration_seconds,
                            renew_deadline_seconds=lease.renew_deadline_seconds,
                            retry_period_seconds=lease.retry_period_seconds, owner=owner)
    controller = make_controller(api, stop, elector.holds_lease)

    def started_leading() -> None:
        on_leadership(True)
        log.info("became leader (lease %s/%s)", settings.lease_namespace, settings.lease_name)
        controller.run()

    def stopped_leading() -> None:
        on_leadership(False)
        if not stop.is_set():
            # Another replica may act now: stop acting at once and exit, to restart as a follower.
            log.error("lost leadership; exiting")
            stop_retrying()  # an API call being retried must not outlive the lease either
            lost_leadership.set()
            stop.set()

    elector.run(stop, started_leading, stopped_leading)
    return EXIT_LOST_LEADERSHIP if lost_leadership.is_set() else 0
