"""`etcd-operator`: start-up, leader election, the controller, /metrics and /healthz, SIGTERM."""
from __future__ import annotations

import logging
import signal
import sys
import threading
from typing import Sequence

from etcd_operator.controller import Controller
from operator_runtime.http_endpoints import serve
from kube_adapter.client import load_api_client
from kube_adapter.leadership import LeaderElector
from operator_runtime.logs import configure_logging
from etcd_operator.metrics import OperatorMetrics
from etcd_operator.settings import parse_settings

log = logging.getLogger("etcd_operator")

EXIT_LOST_LEADERSHIP = 3
# A renewal every 5 s keeps an idle operator's API load low (each renewal is a get and an update);
# a clean shutdown releases the lease at once, so only a crashed leader costs up to 30 s of failover.
LEASE_DURATION_SECONDS = 30
LEASE_RENEW_DEADLINE_SECONDS = 20
LEASE_RETRY_PERIOD_SECONDS = 5


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_settings(argv)
    configure_logging(settings.log_format, settings.log_level)
    log.info("starting with %s", settings)
    stop = threading.Event()
    lost_leadership = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("received %s; shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    api = load_api_client(settings.kubeconfig)
    metrics = OperatorMetrics()
    endpoints = serve(settings.http_port, settings.http_address, metrics.registry, healthy=lambda: not stop.is_set())
    log.info("serving /metrics and /healthz on %s", endpoints.url)
    try:
        if not settings.leader_elect:
            Controller(api, settings, metrics, stop).run()
            return 0
        elector = LeaderElector(api, settings.lease_namespace, settings.lease_name, settings.identity,
                                lease_duration_seconds=LEASE_DURATION_SECONDS,
                                renew_deadline_seconds=LEASE_RENEW_DEADLINE_SECONDS,
                                retry_period_seconds=LEASE_RETRY_PERIOD_SECONDS)
        controller = Controller(api, settings, metrics, stop, may_act=elector.holds_lease)

        def started_leading() -> None:
            metrics.is_leader.set(1)
            log.info("became leader (lease %s/%s)", settings.lease_namespace, settings.lease_name)
            controller.run()

        def stopped_leading() -> None:
            metrics.is_leader.set(0)
            if not stop.is_set():
                # Another replica may act now: stop acting at once and exit, to restart as a follower.
                log.error("lost leadership; exiting")
                lost_leadership.set()
                stop.set()

        elector.run(stop, started_leading, stopped_leading)
        return EXIT_LOST_LEADERSHIP if lost_leadership.is_set() else 0
    finally:
        endpoints.shutdown()


if __name__ == "__main__":
    sys.exit(main())
