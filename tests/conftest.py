"""Shared fixtures: one sandbox per test session, a fresh namespace per test."""
from __future__ import annotations

import os
import re
import secrets
from typing import Iterator

import pytest
from kubernetes import client as k8s

from kube_sandbox import cli
from kube_sandbox.config import SandboxConfig
from kube_sandbox.testing import Sandbox

# Network rule: nothing leaves loopback. boto3's credential chain would otherwise ask the EC2
# instance metadata service (169.254.169.254) for credentials wherever a test builds a client
# without them.
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"


@pytest.fixture(scope="session")
def sandbox() -> Iterator[Sandbox]:
    """The running sandbox; started for the session unless it is already up (e.g. by `make demo`)."""
    config = SandboxConfig.from_env()
    already_up = cli.is_up(config)
    if not already_up:
        seconds = cli.up(config)
        print(f"\nsandbox started in {seconds:.1f}s")
    yield Sandbox(config)
    if not already_up:
        cli.down(config)


@pytest.fixture
def namespace(sandbox: Sandbox, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of its own for each test, deleted afterwards."""
    base = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
    name = f"{base}-{secrets.token_hex(3)}"
    core = k8s.CoreV1Api(sandbox.api_client())
    core.create_namespace({"metadata": {"name": name, "labels": {"sandbox-test": "true"}}})
    yield name
    core.delete_namespace(name)
