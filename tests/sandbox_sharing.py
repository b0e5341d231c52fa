"""How integration tests share the one sandbox: most run side by side (pytest-xdist workers, each
test in its own namespace), and the tests marked `alone` run after them, one at a time, because
they change what every other test relies on (they restart the apiserver, stop a node or an object store, or
stop, restart or reconfigure an operator).

The marker is enforced, not only documented: the helpers that make such changes call
`require_alone(...)`, which fails a test that is not marked. `scripts/test.sh` runs the two
phases; `pytest -m alone` alone, or any single test, works as well.
"""
from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kube_sandbox.control_api import ControlClient

MARKER = "alone"
# The namespace the three operators' Deployments run in (deploy/namespace.yaml).
OPERATORS_NAMESPACE = "etcd-operator"


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
