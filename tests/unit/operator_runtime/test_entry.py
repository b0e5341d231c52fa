"""The three operators' commands go through one entry point: the same lease timing (defined only
in `LeaseTiming`), the shared flags in every `--help`, each operator's own settings and metrics."""
from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any

import pytest

from backup_operator import cli as backup_cli
from etcd_operator import cli as etcd_cli
from kube_adapter.leadership import LeaderElector
from operator_runtime import entry
from operator_runtime.running import LeaseTiming
from restore_operator import cli as restore_cli

OPERATORS = [(etcd_cli, "etcd-operator"), (backup_cli, "etcd-backup-operator"), (restore_cli, "etcd-restore-operator")]
SHARED_FLAGS = ["--namespace", "--all-namespaces", "--kubeconfig", "--http-address", "--http-port", "--leader-elect",
                "--lease-namespace", "--lease-name", "--identity", "--log-format", "--log-level", "--resync-seconds"]


def run_main(cli: ModuleType, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What `cli.main([])` hands `run_operator` (which is not run)."""
    handed: dict[str, Any] = {}

    def run_operator(settings: Any, **kwargs: Any) -> int:
        handed.update(kwargs, runtime=settings)
        return 0

    monkeypatch.setattr(entry, "run_operator", run_operator)
    assert cli.main([]) == 0
    return handed


def is_leader(registry: Any) -> float:
    """The value of the operator's one `*_is_leader` gauge, served on its /metrics."""
    (value,) = [sample.value for metric in registry.collect() for sample in metric.samples
                if sample.name.endswith("_is_leader")]
    return float(value)


def test_the_three_operators_get_the_same_lease_timing_from_one_place(monkeypatch: pytest.MonkeyPatch) -> None:
    leases = [run_main(cli, monkeypatch)["lease"] for cli, _ in OPERATORS]
    assert leases == [LeaseTiming()] * 3
    timing = LeaseTiming()
    assert timing.duration_seconds > timing.renew_deadline_seconds > timing.retry_period_seconds > 0
    # ... and no second set of defaults below it: the elector takes the timing it is given.
    parameters = inspect.signature(LeaderElector).parameters
    for timing_parameter in ("lease_duration_seconds", "renew_deadline_seconds", "retry_period_seconds"):
        assert parameters[timing_parameter].default is inspect.Parameter.empty, timing_parameter


@pytest.mark.parametrize("cli, name", OPERATORS)
def test_each_operator_runs_under_its_name_with_its_settings_and_metrics(
        cli: ModuleType, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEASE_NAME", raising=False)
    handed = run_main(cli, monkeypatch)
    assert handed["name"] == name and handed["runtime"].lease_name == name
    assert handed["describe"].runtime is handed["runtime"]  # the effective configuration is logged
    handed["on_leadership"](True)
    assert is_leader(handed["registry"]) == 1
    handed["on_leadership"](False)
    assert is_leader(handed["registry"]) == 0


@pytest.mark.parametrize("cli, name", OPERATORS)
def test_help_lists_the_shared_flags_with_their_variables(
        cli: ModuleType, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--help"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    assert shown.startswith(f"usage: {name} ")
    assert all(flag in shown for flag in SHARED_FLAGS), shown
    assert "[RESYNC_SECONDS]" in shown and "[LEASE_NAME]" in shown
    assert "Every flag defaults from the environment variable named in its help." in " ".join(shown.split())
