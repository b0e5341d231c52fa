"""Parsing EtcdCluster specs: what is accepted, defaulted, warned about, and refused (and why)."""
from __future__ import annotations

from typing import Any

import pytest

from etcd_common.api import etcd_cluster as shared
from etcd_common.api.etcd_cluster import StaticTLS, UnsupportedVersion
from etcd_common.api.fields import SpecError
from etcd_common.api.versions import EtcdVersion
from etcd_operator.spec import parse_cluster_spec, parse_etcd_cluster
from tests.unit.etcd_operator.etcd_cluster_builders import raw_cluster


def test_coreos_example_parses_with_defaults() -> None:
    cluster = parse_etcd_cluster({
        "apiVersion": "etcd.database.coreos.com/v1beta2",
        "kind": "EtcdCluster",
        "metadata": {"name": "example-etcd-cluster", "namespace": "ns1", "uid": "u-1", "generation": 2},
        "spec": {"size": 3, "version": "3.5.1"},
    })
    assert cluster.spec_error is None
    spec = cluster.require_spec()
    assert (cluster.name, cluster.namespace, cluster.uid, cluster.generation) == ("example-etcd-cluster", "ns1", "u-1", 2)
    assert spec.size == 3 and spec.version == EtcdVersion(3, 5, 1)
    assert spec.image == "quay.io/coreos/etcd:v3.5.1"
    assert not spec.paused and not spec.uses_persistent_volumes
    assert spec.tls == StaticTLS() and spec.warnings == ()
    assert not cluster.recorded.bootstrapped


@pytest.mark.parametrize("spec, check", [
    pytest.param({"size": 1}, lambda s: str(s.version) == "3.6.16", id="default-version"),
    pytest.param({"size": 1, "version": "v3.5.35"}, lambda s: s.image == "quay.io/coreos/etcd:v3.5.35", id="v-prefix"),
    pytest.param({"size": 1, "version": "3.4.23"},
                 lambda s: s.image == "quay.io/coreos/etcd:v3.4.23" and "only as an upgrade source" in s.warnings[0],
                 id="upgrade-source-accepted-with-warning"),
    pytest.param({"size": 7, "repository": "registry.local:5000/etcd"},
                 lambda s: s.image == "registry.local:5000/etcd:v3.6.16", id="repository-with-port"),
    pytest.param({"size": 1, "baseImage": "mirror/etcd", "repository": "quay.io/coreos/etcd"},
                 lambda s: s.repository == "mirror/etcd" and "baseImage" in s.warnings[0], id="coreos-baseImage"),
    pytest.param({"size": 1, "paused": True}, lambda s: s.paused, id="paused"),
    pytest.param({"size": 1, "pod": {"persistentVolumeClaimSpec": {"resources": {"requests": {"storage": "1Gi"}}}}},
                 lambda s: s.uses_persistent_volumes, id="pvc"),
    pytest.param({"size": 1, "pod": {"ClusterDomain": "cluster.local"}},
                 lambda s: s.pod.cluster_domain == ".cluster.local", id="cluster-domain-without-dot"),
    pytest.param({"size": 1, "pod": {"ClusterDomain": ".cluster.local"}},
                 lambda s: s.pod.cluster_domain == ".cluster.local", id="cluster-domain-coreos-style"),
    pytest.param({"size": 1, "pod": {"busyboxImage": "busybox:1.28", "DNSTimeoutInSecond": 60}},
                 lambda s: len(s.warnings) == 2, id="ignored-fields-warned"),
    pytest.param({"size": 1, "TLS": {"static": {"member": {"peerSecret": "p", "serverSecret": "s"},
                                                 "operatorSecret": "o"}}},
                 lambda s: s.tls.peer_tls and s.tls.client_tls, id="full-tls"),
    pytest.param({"size": 1, "TLS": {"static": {"member": {"peerSecret": "p"}}}},
                 lambda s: s.tls.peer_tls and not s.tls.client_tls, id="peer-tls-only"),
    pytest.param({"size": 1, "pod": {"antiAffinity": True, "affinity": {"nodeAffinity": {}}}},
                 lambda s: s.pod.anti_affinity, id="anti-affinity-beside-node-affinity"),
    pytest.param({"size": 1, "pod": {"etcdEnv": [{"name": "ETCD_QUOTA_BACKEND_BYTES", "value": "1"}]}},
                 lambda s: s.pod.etcd_env[0]["name"] == "ETCD_QUOTA_BACKEND_BYTES", id="etcd-env"),
])
def test_accepted(spec: dict[str, Any], check: Any) -> None:
    assert check(parse_cluster_spec(spec))


@pytest.mark.parametrize("spec, says", [
    pytest.param({}, "spec.size", id="size-missing"),
    pytest.param({"size": "three"}, "spec.size", id="size-string"),
    pytest.param({"size": True}, "spec.size", id="size-bool"),
    pytest.param({"size": 9}, "1 to 7", id="size-too-big"),
    pytest.param({"size": 3, "version": "3.2.13"}, "3.5.x, 3.6.x (3.4.x only to upgrade from)", id="coreos-era-version"),
    pytest.param({"size": 3, "version": "3.7.0"}, "etcd 3.7.0 is not supported", id="future-minor"),
    pytest.param({"size": 3, "version": "4.0.0"}, "etcd 4.0.0 is not supported", id="future-major"),
    pytest.param({"size": 3, "version": "latest"}, "not an etcd version", id="version-not-semver"),
    pytest.param({"size": 3, "repository": "quay.io/coreos/etcd:v3.5.1"}, "tag", id="repository-with-tag"),
    pytest.param({"size": 3, "paused": "yes"}, "spec.paused", id="paused-string"),
    pytest.param({"size": 3, "pod": {"labels": {"etcd_cluster": "x"}}}, "etcd_cluster", id="reserved-label"),
    pytest.param({"size": 3, "pod": {"labels": {"etcd.database.coreos.com/serving": "false"}}},
                 "etcd.database.coreos.com/serving", id="reserved-serving-label"),
    pytest.param({"size": 3, "pod": {"annotations": {"etcd.version": "x"}}}, "etcd.version", id="reserved-annotation"),
    pytest.param({"size": 3, "pod": {"antiAffinity": True, "affinity": {"podAntiAffinity": {"x": 1}}}},
                 "antiAffinity", id="two-anti-affinities"),
    pytest.param({"size": 3, "pod": {"etcdEnv": [{"name": "ETCD_INITIAL_CLUSTER", "value": "x"}]}},
                 "ETCD_INITIAL_CLUSTER", id="env-shadows-flag"),
    pytest.param({"size": 3, "pod": {"etcdEnv": [{"name": "POD_IP", "value": "x"}]}}, "POD_IP", id="env-pod-ip"),
    pytest.param({"size": 3, "pod": {"persistentVolumeClaimSpec": {"accessModes": ["ReadWriteOnce"]}}},
                 "requests.storage", id="pvc-without-size"),
    pytest.param({"size": 3, "pod": {"ClusterDomain": "bad domain"}}, "ClusterDomain", id="bad-cluster-domain"),
    pytest.param({"size": 3, "pod": {"DNSTimeoutInSecond": -1}}, "DNSTimeoutInSecond", id="negative-dns-timeout"),
    pytest.param({"size": 3, "pod": {"nodeSelector": {"disk": 1}}}, "nodeSelector.disk", id="selector-not-string"),
    pytest.param({"size": 3, "TLS": {"static": {"member": {"serverSecret": "s"}}}}, "operatorSecret",
                 id="server-secret-alone"),
    pytest.param({"size": 3, "TLS": {"static": {"operatorSecret": "o"}}}, "serverSecret", id="operator-secret-alone"),
    pytest.param({"size": 3, "pod": "fast"}, "spec.pod must be an object", id="pod-not-object"),
])
def test_refused(spec: dict[str, Any], says: str) -> None:
    with pytest.raises(SpecError) as raised:
        parse_cluster_spec(spec)
    assert says in raised.value.reason


@pytest.mark.parametrize("cluster_name", ["Example", "my.cluster", "1st", "a" * 57])
def test_cluster_name_must_fit_service_and_pod_names(cluster_name: str) -> None:
    cluster = parse_etcd_cluster(raw_cluster(cluster_name=cluster_name))
    assert cluster.spec is None and cluster.spec_error is not None and "DNS label" in cluster.spec_error


def test_longest_allowed_cluster_name() -> None:
    assert parse_etcd_cluster(raw_cluster(cluster_name="a" * 56)).spec is not None


def test_invalid_spec_is_reported_not_raised() -> None:
    cluster = parse_etcd_cluster(raw_cluster({"version": "3.1.0", "paused": True}))
    assert cluster.spec is None and "not supported" in (cluster.spec_error or "")
    assert cluster.paused
    with pytest.raises(SpecError):
        cluster.require_spec()


# What the operator refuses above although the shared parse (etcd_common) accepts its shape.
@pytest.mark.parametrize("spec", [
    pytest.param({"size": 3, "version": "3.2.13"}, id="coreos-era-version"),
    pytest.param({"size": 3, "pod": {"labels": {"etcd_cluster": "x"}}}, id="reserved-label"),
    pytest.param({"size": 3, "pod": {"annotations": {"etcd.version": "x"}}}, id="reserved-annotation"),
    pytest.param({"size": 3, "pod": {"antiAffinity": True, "affinity": {"podAntiAffinity": {"x": 1}}}},
                 id="two-anti-affinities"),
    pytest.param({"size": 3, "pod": {"etcdEnv": [{"name": "ETCD_INITIAL_CLUSTER", "value": "x"}]}},
                 id="env-shadows-flag"),
    pytest.param({"size": 3, "TLS": {"static": {"operatorSecret": "o"}}}, id="operator-secret-alone"),
])
def test_operator_policy_is_not_the_shape(spec: dict[str, Any]) -> None:
    shared.parse_cluster_spec(spec)
    with pytest.raises(SpecError):
        parse_cluster_spec(spec)


def test_a_spec_version_that_is_no_version_lists_the_versions_the_operator_runs() -> None:
    with pytest.raises(UnsupportedVersion) as from_shape:
        shared.parse_cluster_spec({"size": 1, "version": "latest"})
    with pytest.raises(UnsupportedVersion) as from_operator:
        parse_cluster_spec({"size": 1, "version": "latest"})
    assert from_operator.value.reason.startswith(from_shape.value.reason)
    assert "supported: 3.5.x" in from_operator.value.reason


def test_operator_warnings_come_before_the_shape_warnings() -> None:
    spec = parse_etcd_cluster(raw_cluster({"version": "3.4.23", "baseImage": "mirror/etcd"})).require_spec()
    assert shared.parse_cluster_spec({"size": 1, "version": "3.4.23", "baseImage": "mirror/etcd"}).warnings == (
        "spec.baseImage is deprecated; use spec.repository",)
    assert len(spec.warnings) == 2
    assert "only as an upgrade source" in spec.warnings[0] and "baseImage" in spec.warnings[1]
