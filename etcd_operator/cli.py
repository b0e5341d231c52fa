"""`etcd-operator`: parse the flags, then `run_operator` with the etcd controller."""
from __future__ import annotations

import sys
import threading
from typing import Sequence

from etcd_operator.controller import Controller
from etcd_operator.metrics import OperatorMetrics
from etcd_operator.settings import parse_settings
from kube_adapter.client import KubeApi
from operator_runtime.running import LeaseTiming, MayAct, run_operator

# A renewal every 5 s keeps an idle operator's API load low (each renewal is a get and an update);
# a clean shutdown releases the lease at once, so only a crashed leader costs up to 30 s of failover.
LEASE_DURATION_SECONDS = 30
LEASE_RENEW_DEADLINE_SECONDS = 20
LEASE_RETRY_PERIOD_SECONDS = 5


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_settings(argv)
    metrics = OperatorMetrics()

    def make_controller(api: KubeApi, stop: threading.Event, may_act: MayAct) -> Controller:
        return Controller(api, settings, metrics, stop, may_act=may_act)

    return run_operator(
        settings.runtime,
        name="etcd-operator",
        registry=metrics.registry,
        make_controller=make_controller,
        describe=settings,
        lease=LeaseTiming(LEASE_DURATION_SECONDS, LEASE_RENEW_DEADLINE_SECONDS, LEASE_RETRY_PERIOD_SECONDS),
        on_leadership=lambda leading: metrics.is_leader.set(1 if leading else 0),
    )


if __name__ == "__main__":
    sys.exit(main())
