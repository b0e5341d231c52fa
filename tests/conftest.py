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


def pytest_runtest_setup(item: pytest.Item) -> None:
    sandbox_sharing.note_current_test(item)


@pytest.fixture(scope="session")
def sandbox(pytestconfig: pytest.Config) -> Iterator[Sandbox]:
    """The running sandbox; started for the session unless it is already up (e.g. by `make demo` or
    scripts/test.sh). Parallel workers start it once; the run's controller stops it."""
    config = SandboxConfig.from_env()
    marker = sandbox_sharing.started_marker(config.state_dir)
    with sandbox_sharing.setup_lock(config.state_dir):
        started_here = not cli.is_up(config)
        if started_here:
            seconds = cli.up(config)
            print(f"\nsandbox started in {seconds:.1f}s")
            if sandbox_sharing.xdist_worker(pytestconfig):
                marker.write_text("")
    handle = Sandbox(config)
    handle.faults = sandbox_sharing.AloneOnlyFaults(config)
    yield handle
    if started_here and not sandbox_sharing.xdist_worker(pytestconfig):
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
