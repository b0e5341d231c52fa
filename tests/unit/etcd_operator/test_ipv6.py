"""IPv6 and dual stack: etcd listens on a bracketed pod IP where the cluster's Services are IPv6,
and the HTTP server binds IPv6 addresses (member probes resolving IPv6 names:
tests/unit/etcd_common/test_tcp_probe.py). Nothing here connects outside 127.0.0.0/8."""
from __future__ import annotations

import socket
from typing import Any

import pytest

from etcd_common.etcd.access import EtcdAccess
from etcd_operator import actions
from etcd_operator.acting import ActionExecutor
from etcd_operator.manifests import build_member_pod, ip_family_of_services
from etcd_operator.observed import ObservedCluster
from operator_runtime.cached_client import CachedClient
from operator_runtime.http_endpoints import server_class_for, url_for
from tests.unit.etcd_operator.etcd_cluster_builders import make_cluster


def _command(ipv6: bool) -> list[str]:
    pod = build_member_pod(make_cluster(), "example-abcde", state="new", initial_cluster=[], ipv6=ipv6)
    command: list[str] = pod["spec"]["containers"][0]["command"]
    return command


def test_etcd_listens_on_a_bracketed_pod_ip_on_ipv6() -> None:
    assert "--listen-client-urls=http://[$(POD_IP)]:2379" in _command(True)
    assert "--listen-peer-urls=http://[$(POD_IP)]:2380" in _command(True)
    assert "--listen-client-urls=http://$(POD_IP):2379" in _command(False)


@pytest.mark.parametrize(("families", "ipv6"), [
    ([["IPv4"]], False), ([["IPv6"]], True), ([["IPv6", "IPv4"]], True), ([["IPv4", "IPv6"]], False), ([None], False),
])
def test_the_ip_family_is_the_primary_family_of_the_clusters_services(families: list[Any], ipv6: bool) -> None:
    services = [{"metadata": {"name": "example-client"}, "spec": {"ipFamilies": families[0]} if families[0] else {}}]
    assert ip_family_of_services(services) == ("IPv6" if ipv6 else "IPv4")


@pytest.mark.parametrize(("host", "family", "url"), [
    ("127.0.0.1", socket.AF_INET, "http://127.0.0.1:8080"),
    ("::", socket.AF_INET6, "http://[::]:8080"),
    ("fd00::1", socket.AF_INET6, "http://[fd00::1]:8080"),
])
def test_the_http_server_binds_ipv6_addresses(host: str, family: int, url: str) -> None:
    assert server_class_for(host).address_family == family
    assert url_for(host, 8080) == url


def test_member_pods_of_an_ipv6_cluster_listen_on_bracketed_addresses() -> None:
    created: list[dict[str, Any]] = []

    class Api:
        def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
            created.append(body)
            return {**body, "metadata": {**body["metadata"], "namespace": namespace}}

    executor = ActionExecutor(CachedClient(Api()), CachedClient(Api()), CachedClient(Api()),  # type: ignore[arg-type]
                              EtcdAccess(lambda ns, name: {}))
    observed = ObservedCluster(cluster=make_cluster(), ip_family="IPv6")
    executor.execute(actions.CreateSeedMember("example-abcde", "http://example-abcde.example.default.svc:2380"),
                     observed)
    assert "--listen-peer-urls=http://[$(POD_IP)]:2380" in created[0]["spec"]["containers"][0]["command"]
