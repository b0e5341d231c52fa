"""Fixtures: the cloud-storage emulators (Azurite, fake-gcs-server) on free loopback ports, one
per test module, started by the launchers in kube_sandbox; no Kubernetes sandbox needed."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from kube_sandbox.azurite import Azurite, start_azurite
from kube_sandbox.binaries import MissingBinary
from kube_sandbox.fake_gcs import FakeGcs, start_fake_gcs
from kube_sandbox.s3 import StandaloneS3, start_standalone_s3


@pytest.fixture(scope="module")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    try:
        server = start_azurite(tmp_path_factory.mktemp("azurite"))
    except MissingBinary as error:
        pytest.fail(str(error))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def fake_gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeGcs]:
    try:
        server = start_fake_gcs(tmp_path_factory.mktemp("fake-gcs"))
    except MissingBinary as error:
        pytest.fail(str(error))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def standalone_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneS3]:
    """SeaweedFS outside the sandbox: the S3-compatible server the OSS storage is tested against."""
    try:
        server = start_standalone_s3(tmp_path_factory.mktemp("s3"))
    except MissingBinary as error:
        pytest.fail(str(error))
    yield server
    server.stop()
