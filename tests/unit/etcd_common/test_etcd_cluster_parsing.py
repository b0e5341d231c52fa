"""The shared EtcdCluster parse checks the API shape only; what the etcd operator refuses as its own
policy parses here (tests/unit/etcd_operator/test_cluster_spec.py checks the policy)."""
from __future__ import annotations

from typing import Any

import pytest

from etcd_common.api.etcd_cluster import (
    UnsupportedVersion,
    parse_cluster_spec,
    parse_etcd_cluster,
    parse_recorded_status,
)
from etcd_common.api.fields import SpecError
from etcd_common.api.versions import EtcdVersion


@pytest.mark.parametrize("spec, says", [
    pytest.param({"size": 0}, "spec.size", id="size-zero"),
    pytest.param({"size": 3, "version": 3.5}, "not an etcd version", id="version-number"),
    pytest.param({"size": 3, "repository": "etcd@sha256:00"}, "digest", id="repository-digest"),
    pytest.param({"size": 3, "pod": {"tolerations": {"key": "x"}}}, "spec.pod.tolerations must be a list",
                 id="tolerations-object"),
    pytest.param({"size": 3, "pod": {"etcdEnv": [{"name": "1X"}]}}, "not a valid environment variable",
                 id="env-name"),
    pytest.param({"size": 3, "TLS": {"static": {"member": {"peerSecret": 1}}}}, "peerSecret must be a string",
                 id="secret-number"),
])
def test_shape_errors(spec: dict[str, Any], says: str) -> None:
    with pytest.raises(SpecError) as raised:
        parse_cluster_spec(spec)
    assert says in raised.value.reason


def test_not_a_version_is_an_unsupported_version() -> None:
    with pytest.raises(UnsupportedVersion):
        parse_cluster_spec({"size": 1, "version": "latest"})
    cluster = parse_etcd_cluster({"metadata": {"name": "c"}, "spec": {"size": 1, "version": "latest"}})
    assert cluster.spec is None and cluster.unsupported_version


def test_shared_parse_of_a_whole_cluster() -> None:
    cluster = parse_etcd_cluster({
        "metadata": {"name": "example", "namespace": "ns", "uid": "u", "generation": 4},
        "spec": {"size": 3, "version": "3.4.23", "baseImage": "mirror/etcd"},
        "status": {"phase": "Running"},
    })
    spec = cluster.require_spec()
    assert (cluster.name, cluster.namespace, cluster.uid, cluster.generation) == ("example", "ns", "u", 4)
    assert spec.version == EtcdVersion(3, 4, 23) and spec.repository == "mirror/etcd"
    assert spec.warnings == ("spec.baseImage is deprecated; use spec.repository",), "no operator warnings"
    assert cluster.recorded.bootstrapped


@pytest.mark.parametrize("status, bootstrapped", [
    (None, False),
    ({}, False),
    ({"bootstrapped": True}, True),
    ({"phase": "Running"}, True),  # adopted from the CoreOS operator
    ({"size": 3}, True),
    ({"phase": "Creating", "size": 0}, False),
    # Ours: a seed pod counts in size before its member first ran; `bootstrapped` decides.
    ({"phase": "Creating", "size": 1, "bootstrapped": False}, False),
    ({"phase": "Failed", "size": 3, "bootstrapped": True}, True),
])
def test_recorded_bootstrapped(status: Any, bootstrapped: bool) -> None:
    assert parse_recorded_status(status).bootstrapped is bootstrapped


def test_recorded_conditions() -> None:
    recorded = parse_recorded_status({"conditions": [
        {"type": "Available", "status": "True", "reason": "QuorumAvailable", "lastTransitionTime": "2024-05-01T12:00:00Z"},
        "garbage",
    ]})
    available = recorded.condition("Available")
    assert available is not None and available.last_transition_time == "2024-05-01T12:00:00Z"
    assert recorded.condition("Degraded") is None
