"""`etcd-backup-operator`: parse the flags, then `run_operator` with the backup controller."""
from __future__ import annotations

import sys
import threading
from typing import Callable, Sequence

from backup_operator.controller import Controller
from backup_operator.metrics import BackupMetrics
from backup_operator.settings import parse_settings
from kube_adapter.client import KubeApi
from operator_runtime.running import LeaseTiming, run_operator

LEASE_DURATION_SECONDS = 30
LEASE_RENEW_DEADLINE_SECONDS = 20
LEASE_RETRY_PERIOD_SECONDS = 5


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_settings(argv)
    metrics = BackupMetrics()

    def make_controller(api: KubeApi, stop: threading.Event, may_act: Callable[[], bool]) -> Controller:
        return Controller(api, settings, metrics, stop, may_act=may_act)

    return run_operator(
        settings.runtime,
        name="etcd-backup-operator",
        registry=metrics.registry,
        make_controller=make_controller,
        describe=settings,
        lease=LeaseTiming(LEASE_DURATION_SECONDS, LEASE_RENEW_DEADLINE_SECONDS, LEASE_RETRY_PERIOD_SECONDS),
        on_leadership=lambda leading: metrics.is_leader.set(1 if leading else 0),
    )


if __name__ == "__main__":
    sys.exit(main())
