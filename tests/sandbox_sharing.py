"""How integration tests share the one sandbox: most run side by side (pytest-xdist workers, each
test in its own namespace), and the tests marked `alone` run after them, one at a time, because
they change what every other test relies on (they restart the apiserver, stop a node or an object store, or
stop, restart or reconfigure an operator).

The marker is enforced, not only documented: the helpers that make such changes call
`require_alone(...)`, which fails a test that is not marked. `scripts/test.sh` runs the two
phases; `pytest -m alone` alone, or any single test, works as well.

The alone phase can run on several sandboxes at once (`--sandbox-per-worker`): pytest-xdist worker
gw0 uses the sandbox the environment names, worker gwK (K >= 1) an extra sandbox of its own, whose
state, ports and pod addresses are moved away from the first (`extra_sandbox_env`). Each test is
then still alone in its sandbox. `python -m tests.sandbox_sharing extra-env K` prints that
environment, for scripts/test.sh to start the extra sandboxes while the shared phase runs.
"""
from __future__ import annotations

import fcntl
import os
import re
import sys
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from kube_sandbox.config import SandboxConfig, shifted_sandbox_env
from kube_sandbox.control_api import ControlClient

MARKER = "alone"
# The namespace the three operators' Deployments run in (deploy/namespace.yaml).
OPERATORS_NAMESPACE = "etcd-operator"
# How far the K-th extra sandbox's ports are moved from the first's (K times this).
EXTRA_SANDBOX_PORT_STEP = 500
SANDBOX_PER_WORKER_OPTION = "--sandbox-per-worker"


class SharedSandboxChange(AssertionError):
    """A test not marked `alone` tried to change what other tests running beside it rely on."""


_current_test_alone = False


def note_current_test(item: pytest.Item) -> None:
    """Called before each test (tests/conftest.py): remember whether it may change shared state."""
    global _current_test_alone
    _current_test_alone = item.get_closest_marker(MARKER) is not None


def require_alone(what: str) -> None:
    if not _current_test_alone:
        raise SharedSandboxChange(
            f"{what} changes the sandbox every other test shares: mark the test "
            f"@pytest.mark.{MARKER} so it runs on its own (tests/sandbox_sharing.py)")


class AloneOnlyFaults(ControlClient):
    """The sandbox's fault API for tests: faults that reach beyond the test's own namespace (a node,
    the apiserver, S3, an operator's container) are refused unless the test runs alone."""

    def stop_node(self, node: str) -> None:
        require_alone(f"stopping node {node}")
        super().stop_node(node)

    def start_node(self, node: str) -> None:
        require_alone(f"starting node {node}")
        super().start_node(node)

    def restart_apiserver(self) -> None:
        require_alone("restarting the apiserver")
        super().restart_apiserver()

    def stop_store(self, store: str) -> None:  # stop_s3 too
        require_alone(f"stopping the object store {store}")
        super().stop_store(store)

    def start_store(self, store: str) -> None:
        require_alone(f"starting the object store {store}")
        super().start_store(store)

    def crash_container(self, namespace: str, pod: str, container: str) -> None:
        self._check_namespace(namespace, f"crashing {namespace}/{pod}")
        super().crash_container(namespace, pod, container)

    def freeze_container(self, namespace: str, pod: str, container: str) -> None:
        self._check_namespace(namespace, f"freezing {namespace}/{pod}")
        super().freeze_container(namespace, pod, container)

    def partition(self, sources: list[tuple[str, str]], targets: list[tuple[str, str]], one_way: bool = False) -> str:
        for namespace, pod in [*sources, *targets]:
            self._check_namespace(namespace, f"cutting {namespace}/{pod} off")
        return super().partition(sources, targets, one_way)

    def fill_volume(self, namespace: str, claim: str, leave_bytes: int | None = 0) -> str:
        self._check_namespace(namespace, f"filling the volume of {namespace}/{claim}")
        return super().fill_volume(namespace, claim, leave_bytes)

    def cap_memory(self, namespace: str, pod: str, container: str, limit_bytes: int | None) -> None:
        self._check_namespace(namespace, f"capping the memory of {namespace}/{pod}")
        super().cap_memory(namespace, pod, container, limit_bytes)

    def slow_disk(self, namespace: str, pod: str, write_iops: int | None = None,
                  write_bytes_per_second: int | None = None) -> str:
        self._check_namespace(namespace, f"slowing the disk of {namespace}/{pod}")
        return super().slow_disk(namespace, pod, write_iops, write_bytes_per_second)

    def isolate_pod(self, namespace: str, pod: str) -> str:
        require_alone(f"isolating {namespace}/{pod} from every pod")
        return super().isolate_pod(namespace, pod)

    def heal(self, cut_id: str | None = None) -> list[str]:
        if cut_id is None:
            require_alone("healing every cut")
        return super().heal(cut_id)

    @staticmethod
    def _check_namespace(namespace: str, what: str) -> None:
        if namespace == OPERATORS_NAMESPACE:
            require_alone(what)


@contextmanager
def setup_lock(state_dir: Path) -> Iterator[None]:
    """Held while a worker starts the sandbox or deploys the operators, so parallel workers do it
    once: the next one finds it done."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with open(state_dir / "test-setup.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def xdist_controller(config: pytest.Config) -> bool:
    return not xdist_worker(config) and bool(getattr(config.option, "numprocesses", None))


def started_marker(state_dir: Path) -> Path:
    """Written by the xdist worker that started the sandbox: the run's controller stops it at the end
    (a worker cannot, the others may still use it)."""
    return state_dir / "started-by-test-run"


def extra_sandbox_env(index: int) -> dict[str, str]:
    """The environment that names the `index`-th (>= 1) extra sandbox: the state directory beside the
    first sandbox's, every port moved by index x EXTRA_SANDBOX_PORT_STEP, pod addresses in the next
    /16 of loopback (127.2 beside 127.1)."""
    if index < 1:
        raise ValueError(f"extra sandboxes are numbered from 1, not {index}")
    first = SandboxConfig.from_env()
    return shifted_sandbox_env(Path(f"{first.state_dir}-{index}"), index * EXTRA_SANDBOX_PORT_STEP, index)


def worker_index(config: pytest.Config) -> int | None:
    """The number of this pytest-xdist worker (gw3 -> 3); None outside a worker."""
    if not xdist_worker(config):
        return None
    match = re.fullmatch(r"gw(\d+)", config.workerinput["workerid"])  # type: ignore[attr-defined]
    return int(match.group(1)) if match else None


def use_worker_sandbox(config: pytest.Config, environ: MutableMapping[str, str] = os.environ) -> None:
    """With --sandbox-per-worker, point worker gwK (K >= 1) at its own extra sandbox. Called from
    pytest_configure, before any fixture reads the environment."""
    index = worker_index(config)
    if config.getoption(SANDBOX_PER_WORKER_OPTION) and index:
        environ.update(extra_sandbox_env(index))


def owns_its_sandbox(config: pytest.Config) -> bool:
    """Whether this process alone uses the sandbox it runs against (then it stops one it started)."""
    return not xdist_worker(config) or bool(config.getoption(SANDBOX_PER_WORKER_OPTION))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "extra-env" or not sys.argv[2].isdigit():
        sys.exit("usage: python -m tests.sandbox_sharing extra-env K   (K >= 1)")
    print(" ".join(f"{name}={value}" for name, value in extra_sandbox_env(int(sys.argv[2])).items()))
