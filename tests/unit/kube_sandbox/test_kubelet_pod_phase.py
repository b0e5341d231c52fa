"""Pod phase from container states, as the real kubelet computes it."""
from __future__ import annotations

import pytest

from kube_sandbox.kubelet.pods import ContainerView, pod_phase

RUNNING = ContainerView(running=True)
WAITING = ContainerView(running=False)
SUCCEEDED = ContainerView(running=False, exit_code=0)
FAILED = ContainerView(running=False, exit_code=1)
RESTARTING = ContainerView(running=False, restarting=True)


@pytest.mark.parametrize("policy, containers, phase", [
    ("Always", [WAITING], "Pending"),
    ("Always", [RUNNING, WAITING], "Pending"),
    ("Always", [RUNNING], "Running"),
    ("Always", [RESTARTING], "Running"),
    ("Always", [RUNNING, SUCCEEDED], "Running"),
    ("Never", [SUCCEEDED], "Succeeded"),
    ("Never", [SUCCEEDED, SUCCEEDED], "Succeeded"),
    ("Never", [SUCCEEDED, FAILED], "Failed"),
    ("Never", [RUNNING, FAILED], "Running"),
    ("OnFailure", [SUCCEEDED], "Succeeded"),
    ("OnFailure", [RESTARTING], "Running"),
    ("OnFailure", [SUCCEEDED, RESTARTING], "Running"),
])
def test_phase(policy: str, containers: list[ContainerView], phase: str) -> None:
    assert pod_phase(policy, initialized=True, init_failed=False, containers=containers) == phase


def test_init_containers_gate_the_phase() -> None:
    assert pod_phase("Always", initialized=False, init_failed=False, containers=[WAITING]) == "Pending"
    assert pod_phase("Never", initialized=False, init_failed=True, containers=[WAITING]) == "Failed"
