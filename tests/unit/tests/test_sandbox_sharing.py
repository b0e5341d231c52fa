"""The alone phase's extra sandboxes (tests/sandbox_sharing.py): each is moved away from the first
in state, ports and pod addresses, and only workers after the first are pointed at one."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kube_sandbox.config import SandboxConfig
from tests import sandbox_sharing


def test_an_extra_sandbox_shares_nothing_with_the_first(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SANDBOX_DIR", str(tmp_path / "first"))
    monkeypatch.delenv("SANDBOX_PORT_OFFSET", raising=False)
    monkeypatch.delenv("SANDBOX_POD_IP_PREFIX", raising=False)
    first = SandboxConfig.from_env()
    for index in (1, 2):
        with monkeypatch.context() as patch:
            for name, value in sandbox_sharing.extra_sandbox_env(index).items():
                patch.setenv(name, value)
            extra = SandboxConfig.from_env()
        assert extra.state_dir == tmp_path / f"first-{index}"
        assert extra.pod_ip_prefix == f"127.{1 + index}"
        first_ports = {value for name, value in vars(first).items() if name.endswith("_port")}
        extra_ports = {value for name, value in vars(extra).items() if name.endswith("_port")}
        assert first_ports.isdisjoint(extra_ports)


def test_extra_sandboxes_are_numbered_from_one() -> None:
    with pytest.raises(ValueError):
        sandbox_sharing.extra_sandbox_env(0)


def fake_config(worker: str | None, per_worker: bool) -> Any:
    config = SimpleNamespace(getoption=lambda name: per_worker)
    if worker is not None:
        config.workerinput = {"workerid": worker}
    return config


@pytest.mark.parametrize("worker, per_worker, moved", [
    ("gw1", True, True), ("gw0", True, False), ("gw1", False, False), (None, True, False)])
def test_only_later_workers_of_a_per_worker_run_are_moved(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          worker: str | None, per_worker: bool, moved: bool) -> None:
    monkeypatch.setenv("SANDBOX_DIR", str(tmp_path / "first"))
    environ = {"SANDBOX_DIR": str(tmp_path / "first")}
    sandbox_sharing.use_worker_sandbox(fake_config(worker, per_worker), environ)
    assert (environ["SANDBOX_DIR"] == f"{tmp_path / 'first'}-1") is moved
    assert ("SANDBOX_PORT_OFFSET" in environ) is moved


@pytest.mark.parametrize("worker, per_worker, owns", [
    (None, False, True), ("gw0", False, False), ("gw0", True, True), ("gw2", True, True)])
def test_a_worker_owns_its_sandbox_only_when_each_has_one(worker: str | None, per_worker: bool, owns: bool) -> None:
    assert sandbox_sharing.owns_its_sandbox(fake_config(worker, per_worker)) is owns
