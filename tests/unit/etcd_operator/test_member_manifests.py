"""The Kubernetes objects built for a cluster: member pods, PVCs and the two services."""
from __future__ import annotations

from typing import Any

import pytest

from etcd_common.api import constants as c
from etcd_operator.manifests import (
    build_client_service,
    build_member_pod,
    build_member_pvc,
    build_peer_service,
    build_service,
    client_service_url,
    member_client_url,
    member_peer_url,
    pod_policy_hash,
    service_names,
)
from tests.unit.etcd_operator.etcd_cluster_builders import PVC_SPEC, UID, make_cluster

MEMBER = "example-abcde"
HOST = f"{MEMBER}.example.default.svc"
OWNER = {
    "apiVersion": "etcd.database.coreos.com/v1beta2", "kind": "EtcdCluster", "name": "example", "uid": UID,
    "controller": True, "blockOwnerDeletion": True,
}


def _seed_pod(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    cluster = make_cluster(spec)
    return build_member_pod(cluster, MEMBER, state="new", initial_cluster=[(MEMBER, member_peer_url(cluster, MEMBER))])


def _container(pod: dict[str, Any]) -> dict[str, Any]:
    [container] = pod["spec"]["containers"]
    assert container["name"] == "etcd"
    return dict(container)


def test_seed_pod() -> None:
    pod = _seed_pod()
    metadata, spec = pod["metadata"], pod["spec"]
    assert metadata["name"] == MEMBER and metadata["namespace"] == "default"
    assert metadata["labels"] == {"app": "etcd", "etcd_cluster": "example", "etcd_node": MEMBER,
                                  "etcd.database.coreos.com/serving": "true"}
    assert metadata["annotations"][c.ANNOTATION_ETCD_VERSION] == "3.6.16"
    assert metadata["annotations"][c.ANNOTATION_INITIAL_CLUSTER_STATE] == "new"
    assert metadata["ownerReferences"] == [OWNER]
    assert (spec["hostname"], spec["subdomain"]) == (MEMBER, "example")
    assert spec["enableServiceLinks"] is False and spec["restartPolicy"] == "Always"
    container = _container(pod)
    assert container["image"] == "quay.io/coreos/etcd:v3.6.16"
    assert container["command"] == [
        "/usr/local/bin/etcd",
        f"--name={MEMBER}",
        "--data-dir=/var/etcd/data",
        "--listen-client-urls=http://$(POD_IP):2379",
        "--listen-peer-urls=http://$(POD_IP):2380",
        f"--advertise-client-urls=http://{HOST}:2379",
        f"--initial-advertise-peer-urls=http://{HOST}:2380",
        f"--initial-cluster={MEMBER}=http://{HOST}:2380",
        "--initial-cluster-state=new",
        f"--initial-cluster-token={UID}",
        "--listen-metrics-urls=http://$(POD_IP):2381",
        "--feature-gates=InitialCorruptCheck=true",
        "--auto-compaction-mode=periodic",
        "--auto-compaction-retention=1h",
    ]
    assert container["env"] == [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    assert container["volumeMounts"] == [{"name": "etcd-data", "mountPath": "/var/etcd"}]
    assert spec["volumes"] == [{"name": "etcd-data", "emptyDir": {}}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/health?exclude=NOSPACE", "port": 2379, "scheme": "HTTP"}
    assert container["livenessProbe"]["tcpSocket"] == {"port": 2379}
    assert container["ports"][-1] == {"name": "metrics", "containerPort": 2381, "protocol": "TCP"}
    assert metadata["annotations"]["prometheus.io/scrape"] == "true"
    assert metadata["annotations"]["prometheus.io/port"] == "2381"
    assert metadata["annotations"]["prometheus.io/path"] == "/metrics"
    assert "affinity" not in spec and "nodeSelector" not in spec


def test_joining_member_lists_every_member_and_no_token() -> None:
    cluster = make_cluster()
    others = [("example-aaaaa", "http://example-aaaaa.example.default.svc:2380"), (MEMBER, member_peer_url(cluster, MEMBER))]
    command = _container(build_member_pod(cluster, MEMBER, state="existing", initial_cluster=others))["command"]
    assert f"--initial-cluster=example-aaaaa=http://example-aaaaa.example.default.svc:2380,{MEMBER}=http://{HOST}:2380" in command
    assert "--initial-cluster-state=existing" in command
    assert not any(flag.startswith("--initial-cluster-token") for flag in command)


def test_pvc_member() -> None:
    cluster = make_cluster({"pod": {"persistentVolumeClaimSpec": {"resources": {"requests": {"storage": "1Gi"}}}}})
    pod = build_member_pod(cluster, MEMBER, state="existing", initial_cluster=[])
    assert pod["spec"]["volumes"] == [{"name": "etcd-data", "persistentVolumeClaim": {"claimName": MEMBER}}]
    pvc = build_member_pvc(cluster, MEMBER)
    assert pvc["metadata"]["name"] == MEMBER and pvc["metadata"]["ownerReferences"] == [OWNER]
    assert pvc["metadata"]["labels"]["etcd_node"] == MEMBER
    assert pvc["spec"] == {"resources": {"requests": {"storage": "1Gi"}}, "accessModes": ["ReadWriteOnce"]}
    with pytest.raises(ValueError):
        build_member_pvc(make_cluster(), MEMBER)


def test_tls_member() -> None:
    spec = {"TLS": {"static": {"member": {"peerSecret": "peer-s", "serverSecret": "server-s"}, "operatorSecret": "op-s"}}}
    cluster = make_cluster(spec)
    assert member_peer_url(cluster, MEMBER) == f"https://{HOST}:2380"
    assert member_client_url(cluster, MEMBER) == f"https://{HOST}:2379"
    assert client_service_url(cluster) == "https://example-client.default.svc:2379"
    pod = _seed_pod(spec)
    container = _container(pod)
    command = container["command"]
    for flag in (
        "--listen-client-urls=https://$(POD_IP):2379", "--listen-peer-urls=https://$(POD_IP):2380",
        "--peer-client-cert-auth=true", "--peer-cert-file=/etc/etcdtls/member/peer-tls/peer.crt",
        "--peer-key-file=/etc/etcdtls/member/peer-tls/peer.key",
        "--peer-trusted-ca-file=/etc/etcdtls/member/peer-tls/peer-ca.crt",
        "--client-cert-auth=true", "--cert-file=/etc/etcdtls/member/server-tls/server.crt",
        "--key-file=/etc/etcdtls/member/server-tls/server.key",
        "--trusted-ca-file=/etc/etcdtls/member/server-tls/server-ca.crt",
    ):
        assert flag in command
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v}
    # The operator's client certificate stays out of member pods (issue 12, least privilege):
    # readiness is etcd's /health on a plain-HTTP metrics listener instead of etcdctl with it.
    assert secrets == {"member-peer-tls": "peer-s", "member-server-tls": "server-s"}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["member-peer-tls"] == "/etc/etcdtls/member/peer-tls" and "etcd-client-tls" not in mounts
    assert "--listen-metrics-urls=http://$(POD_IP):2381" in command
    assert container["readinessProbe"]["httpGet"] == {"path": "/health?exclude=NOSPACE", "port": 2381, "scheme": "HTTP"}


def test_3_4_members_are_probed_without_v2_requests() -> None:
    """etcd 3.4's /health is a v2 QGET through the raft log, which etcd 3.6 cannot replay: a 3.4
    member is probed with `etcdctl endpoint health` (v3) so the cluster can later reach 3.6."""
    probe = _container(_seed_pod({"version": "3.4.23"}))["readinessProbe"]
    assert "httpGet" not in probe
    assert probe["exec"]["command"] == [
        "/usr/local/bin/etcdctl", f"--endpoints=http://{HOST}:2379", "--dial-timeout=3s", "--command-timeout=4s",
        "endpoint", "health",
    ]
    assert _container(_seed_pod({"version": "3.5.35"}))["readinessProbe"]["httpGet"]["path"] == "/health?exclude=NOSPACE"


def test_peer_tls_only_keeps_http_clients() -> None:
    command = _container(_seed_pod({"TLS": {"static": {"member": {"peerSecret": "p"}}}}))["command"]
    assert f"--advertise-client-urls=http://{HOST}:2379" in command
    assert f"--initial-advertise-peer-urls=https://{HOST}:2380" in command


def test_pod_policy_applied() -> None:
    policy = {
        "labels": {"team": "db"},
        "annotations": {"prometheus.io/scrape": "true"},
        "nodeSelector": {"disk": "ssd"},
        "antiAffinity": True,
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
        "resources": {"limits": {"memory": "1Gi"}, "requests": {"cpu": 1}},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "etcd", "effect": "NoSchedule"}],
        "etcdEnv": [{"name": "ETCD_QUOTA_BACKEND_BYTES", "value": "8589934592"}],
        "securityContext": {"runAsUser": 1000, "fsGroup": 1000},
        "ClusterDomain": ".cluster.local",
    }
    pod = _seed_pod({"pod": policy})
    metadata, spec, container = pod["metadata"], pod["spec"], _container(pod)
    assert metadata["labels"] == {"team": "db", "app": "etcd", "etcd_cluster": "example", "etcd_node": MEMBER,
                                  "etcd.database.coreos.com/serving": "true"}
    assert metadata["annotations"]["prometheus.io/scrape"] == "true"
    assert spec["nodeSelector"] == {"disk": "ssd"}
    assert spec["tolerations"] == policy["tolerations"]
    assert spec["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 65532, "fsGroup": 1000,
        "fsGroupChangePolicy": "OnRootMismatch", "seccompProfile": {"type": "RuntimeDefault"},
    }, "the user's fields win, the defaults fill the rest"
    assert container["resources"] == policy["resources"]
    assert [e["name"] for e in container["env"]] == ["POD_IP", "ETCD_QUOTA_BACKEND_BYTES"]
    assert "nodeAffinity" in spec["affinity"]
    [term] = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term == {"labelSelector": {"matchLabels": {"app": "etcd", "etcd_cluster": "example"}},
                    "topologyKey": "kubernetes.io/hostname"}
    assert f"--advertise-client-urls=http://{HOST}.cluster.local:2379" in container["command"]
    # the built pod is a copy: editing it leaves the spec alone
    container["resources"]["limits"]["memory"] = "2Gi"
    assert _container(_seed_pod({"pod": policy}))["resources"]["limits"]["memory"] == "1Gi"


def test_services() -> None:
    cluster = make_cluster()
    assert service_names("example") == ("example", "example-client")
    client = build_client_service(cluster)
    assert client["metadata"]["name"] == "example-client" and client["metadata"]["ownerReferences"] == [OWNER]
    # Only pods labelled serving get clients: a member is drained before it is removed or restarted.
    assert client["spec"]["selector"] == {"app": "etcd", "etcd_cluster": "example",
                                          "etcd.database.coreos.com/serving": "true"}
    assert client["spec"]["ports"] == [{"name": "client", "port": 2379, "targetPort": 2379, "protocol": "TCP"}]
    peer = build_peer_service(cluster)
    assert peer["metadata"]["name"] == "example"
    assert peer["spec"]["clusterIP"] == "None" and peer["spec"]["publishNotReadyAddresses"] is True
    assert [p["port"] for p in peer["spec"]["ports"]] == [2379, 2380]
    assert build_service(cluster, "example") == peer and build_service(cluster, "example-client") == client
    with pytest.raises(ValueError):
        build_service(cluster, "other")


@pytest.mark.parametrize("change, rolls", [
    pytest.param({"version": "3.5.35"}, False, id="version-is-not-policy"),
    pytest.param({"repository": "mirror/etcd"}, False, id="repository-is-the-image"),
    pytest.param({"pod": {"ClusterDomain": "cluster.local"}}, False, id="cluster-domain-excluded"),
    pytest.param({"pod": {"labels": {}, "etcdEnv": []}}, False, id="empty-fields-do-not-count"),
    pytest.param({"pod": {"resources": {"limits": {"memory": "1Gi"}}}}, True, id="resources"),
    pytest.param({"pod": {"labels": {"team": "db"}}}, True, id="labels"),
    pytest.param({"pod": {"persistentVolumeClaimSpec": PVC_SPEC}}, True, id="storage-kind"),
    pytest.param({"TLS": {"static": {"member": {"peerSecret": "p"}}}}, True, id="tls-secret"),
    pytest.param({"compaction": {"mode": "periodic", "retention": "1h"}}, False, id="compaction-default-spelled-out"),
    pytest.param({"compaction": {"retention": "30m"}}, True, id="compaction-retention"),
    pytest.param({"compaction": {"mode": "disabled"}}, True, id="compaction-disabled"),
    pytest.param({"backendQuota": "1Gi"}, True, id="backend-quota"),
    pytest.param({"defragmentation": {"thresholdPercent": 20}, "alarms": {"recoverNoSpace": False}}, False,
                 id="defragmentation-and-alarms-are-not-flags"),
])
def test_pod_policy_hash(change: dict[str, Any], rolls: bool) -> None:
    base = pod_policy_hash(make_cluster().require_spec())
    assert base == pod_policy_hash(make_cluster().require_spec())
    assert (pod_policy_hash(make_cluster(change).require_spec()) != base) is rolls
