"""Fixtures: etcd clusters of real processes on loopback (see etcd_processes.py)."""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from etcd_processes import ETCD_3_4, ETCD_3_5, EtcdCluster

ETCD_VERSIONS = {"3.5.1": ETCD_3_5, "3.4.23": ETCD_3_4}


@pytest.fixture(params=sorted(ETCD_VERSIONS), ids=lambda version: f"etcd-{version}")
def etcd_version(request: pytest.FixtureRequest) -> str:
    version: str = request.param
    if not os.access(ETCD_VERSIONS[version], os.X_OK):
        pytest.skip(f"etcd {version} not installed at {ETCD_VERSIONS[version]}")
    return version


@pytest.fixture
def etcd_cluster(etcd_version: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[EtcdCluster]:
    cluster = EtcdCluster(binary=ETCD_VERSIONS[etcd_version], workdir=tmp_path, token=f"t-{request.node.name}"[:60])
    yield cluster
    cluster.stop()


@pytest.fixture
def etcd_3_5_cluster(tmp_path: Path) -> Iterator[EtcdCluster]:
    cluster = EtcdCluster(binary=ETCD_3_5, workdir=tmp_path, token="t-3-5")
    yield cluster
    cluster.stop()


@pytest.fixture
def etcdctl_3_4_binary() -> str:
    binary = shutil.which("etcdctl", path="/usr/bin")
    if binary is None:
        pytest.skip("etcdctl 3.4 not installed in /usr/bin")
    return binary
