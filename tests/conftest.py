"""Shared fixtures: one sandbox per test run (shared by parallel workers, see sandbox_sharing.py), a
fresh namespace per test."""
from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s

from kube_sandbox import cli
from kube_sandbox.config import SandboxConfig
from kube_sandbox.testing import Sandbox
from tests import sandbox_sharing

# Network rule: nothing leaves loopback. boto3's credential chain would otherwise ask the EC2
# instance metadata service (169.254.169.254) for credentials wherever a test builds a client
# without them.
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(sandbox_sharing.SANDBOX_PER_WORKER_OPTION, action="store_true",
                     help="give each pytest-xdist worker after the first a sandbox of its own "
                          "(tests/sandbox_sharing.py); for the tests marked alone")


def pytest_configure(config: pytest.Config) -> None:
    sandbox_sharing.use_worker_sandbox(config)


def pytest_runtest_setup(item: pytest.Item) -> None:
    sandbox_sharing.note_current_test(item)


@pytest.fixture(scope="session")
def sandbox(pytestconfig: pytest.Config) -> Iterator[Sandbox]:
    """The running sandbox; started for the session unless it is already up (e.g. by `make demo` or
    scripts/test.sh). Parallel workers start a shared one once and the run's controller stops it; a
    worker with a sandbox of its own (--sandbox-per-worker) stops the one it started."""
    config = SandboxConfig.from_env()
    marker = sandbox_sharing.started_marker(config.state_dir)
    with sandbox_sharing.setup_lock(config.state_dir):
        started_here = not cli.is_up(config)
        if started_here:
            seconds = cli.up(config)
            print(f"\nsandbox started in {seconds:.1f}s")
            if not sandbox_sharing.owns_its_sandbox(pytestconfig):
                marker.write_text("")
    handle = Sandbox(config)
    handle.faults = sandbox_sharing.AloneOnlyFaults(config)
    yield handle
    if started_here and sandbox_sharing.owns_its_sandbox(pytestconfig):
        cli.down(config)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if sandbox_sharing.xdist_controller(session.config):
        config = SandboxConfig.from_env()
        marker = sandbox_sharing.started_marker(config.state_dir)
        if marker.exists():
            cli.down(config)
            marker.unlink()


@pytest.fixture
def namespace(sandbox: Sandbox, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of its own for each test, deleted afterwards."""
    base = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
    name = f"{base}-{secrets.token_hex(3)}"
    core = k8s.CoreV1Api(sandbox.api_client())
    core.create_namespace({"metadata": {"name": name, "labels": {"sandbox-test": "true"}}})
    yield name
    core.delete_namespace(name)
