"""An operator's command in one call: parse its flags into its settings, make its metrics, then
`run_operator` (logs set up, the effective configuration logged, /metrics and /healthz, leader
election with `LeaseTiming`'s defaults, the controller until stopped). Each operator's
`cli.main` is `operator_main` given its own parts."""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from prometheus_client import CollectorRegistry, Gauge

from kube_adapter.client import KubeApi
from operator_runtime.flags import RuntimeSettings
from operator_runtime.running import LeaseTiming, MayAct, Runnable, run_operator


class HasRuntimeSettings(Protocol):
    """An operator's settings: its own, plus the runtime's (`flags.runtime_settings`)."""

    @property
    def runtime(self) -> RuntimeSettings: ...


class HasLeaderGauge(Protocol):
    """An operator's metrics: its registry (served on /metrics) and its is-leader gauge."""

    @property
    def registry(self) -> CollectorRegistry: ...

    @property
    def is_leader(self) -> Gauge: ...


SettingsIn = TypeVar("SettingsIn", bound=HasRuntimeSettings, contravariant=True)
MetricsIn = TypeVar("MetricsIn", bound=HasLeaderGauge, contravariant=True)
Settings = TypeVar("Settings", bound=HasRuntimeSettings)
Metrics = TypeVar("Metrics", bound=HasLeaderGauge)


class MakeController(Protocol[SettingsIn, MetricsIn]):
    """An operator's controller class: `Controller(api, settings, metrics, stop, may_act=...)`."""

    def __call__(self, api: KubeApi, settings: SettingsIn, metrics: MetricsIn, stop: threading.Event, /, *,
                 may_act: MayAct) -> Runnable: ...


def operator_main(
    argv: Sequence[str] | None,
    *,
    name: str,
    parse_settings: Callable[[Sequence[str] | None], Settings],
    make_metrics: Callable[[], Metrics],
    make_controller: MakeController[Settings, Metrics],
) -> int:
    """Run the operator called `name` with the flags in `argv` (None: the process's); the exit
    code. `--help` and bad flags exit from `parse_settings`, before anything starts."""
    settings = parse_settings(argv)
    metrics = make_metrics()

    def controller(api: KubeApi, stop: threading.Event, may_act: MayAct) -> Runnable:
        return make_controller(api, settings, metrics, stop, may_act=may_act)

    return run_operator(
        settings.runtime,
        name=name,
        registry=metrics.registry,
        make_controller=controller,
        describe=settings,
        lease=LeaseTiming(),
        on_leadership=lambda leading: metrics.is_leader.set(1 if leading else 0),
    )
