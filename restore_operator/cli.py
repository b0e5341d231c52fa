"""`etcd-restore-operator`: parse the flags, then `run_operator` with the restore controller."""
from __future__ import annotations

import sys
import threading
from typing import Callable, Sequence

from kube_adapter.client import KubeApi
from operator_runtime.running import LeaseTiming, run_operator
from restore_operator.controller import Controller
from restore_operator.metrics import RestoreMetrics
from restore_operator.settings import parse_settings


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_settings(argv)
    metrics = RestoreMetrics()

    def make_controller(api: KubeApi, stop: threading.Event, may_act: Callable[[], bool]) -> Controller:
        return Controller(api, settings, metrics, stop, may_act=may_act)

    return run_operator(
        settings.runtime,
        name="etcd-restore-operator",
        registry=metrics.registry,
        make_controller=make_controller,
        describe=settings,
        lease=LeaseTiming(30, 20, 5),
        on_leadership=lambda leading: metrics.is_leader.set(1 if leading else 0),
    )


if __name__ == "__main__":
    sys.exit(main())
