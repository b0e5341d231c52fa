"""Fixtures: etcd clusters of real processes on loopback (see etcd_processes.py), for every etcd
version the operator runs: 3.4.23 (upgrade source only), 3.5.35 and 3.6.16. The etcdctl wrapper
uses the operator's default etcdctl (the venv's, 3.6) against all of them."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.etcdctl.etcd_processes import ETCD_VERSIONS, EtcdCluster, etcd_dir


@pytest.fixture(params=ETCD_VERSIONS, ids=lambda version: f"etcd-{version}")
def etcd_version(request: pytest.FixtureRequest) -> str:
    version: str = request.param
    etcd_dir(version)  # skips when not installed
    return version


@pytest.fixture
def etcd_cluster(etcd_version: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[EtcdCluster]:
    cluster = EtcdCluster(binary=str(etcd_dir(etcd_version) / "etcd"), workdir=tmp_path,
                          token=f"t-{request.node.name}"[:60])
    yield cluster
    cluster.stop()


@pytest.fixture
def cluster_factory(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[str], EtcdCluster]]:
    """`cluster_factory(version)`: a new EtcdCluster running that etcd version; all stopped after."""
    clusters: list[EtcdCluster] = []

    def make(version: str) -> EtcdCluster:
        workdir = tmp_path / f"cluster{len(clusters)}"
        cluster = EtcdCluster(binary=str(etcd_dir(version) / "etcd"), workdir=workdir,
                              token=f"t{len(clusters)}-{request.node.name}"[:60])
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.stop()
