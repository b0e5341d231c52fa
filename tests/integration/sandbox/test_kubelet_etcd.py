"""etcd images run as real etcd processes on pod IPs, and pods find each other by pod DNS names."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from kube_sandbox import binaries
from kube_sandbox.testing import Sandbox, wait_for

pytestmark = pytest.mark.sandbox

Obj = dict[str, Any]


def wait_for_object(condition: Callable[[], Obj | None], *, timeout: float, what: str) -> Obj:
    """wait_for, typed for conditions that return the object they waited for."""
    found = wait_for(condition, timeout=timeout, what=what)
    assert found is not None
    return found


def etcd_pod(name: str, image: str, args: list[str], **spec: Any) -> Obj:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "etcd"}},
        "spec": {
            **spec,
            "containers": [{
                "name": "etcd", "image": image,
                "command": ["/usr/local/bin/etcd", f"--name={name}", "--data-dir=/var/etcd/data",
                            "--listen-client-urls=http://0.0.0.0:2379", *args],
                "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                "volumeMounts": [{"name": "data", "mountPath": "/var/etcd"}],
                # etcdctl's default endpoint is the pod's own etcd, as in a real pod
                "readinessProbe": {"exec": {"command": ["/bin/sh", "-ec", "etcdctl endpoint health"]},
                                   "periodSeconds": 1, "timeoutSeconds": 5},
            }],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
    }


def apply(sandbox: Sandbox, namespace: str, obj: Obj) -> None:
    sandbox.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj))


def ready_pod(sandbox: Sandbox, namespace: str, name: str) -> Obj | None:
    pod: Obj = json.loads(sandbox.kubectl("get", "-n", namespace, "pod", name, "-o", "json").stdout)
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))
    return pod if pod["status"].get("phase") == "Running" and ready else None


def etcd_images() -> list[str]:
    """One image per etcd release the sandbox has, in the three official spellings."""
    spellings = ["quay.io/coreos/etcd:v{}", "registry.k8s.io/etcd:{}-0", "gcr.io/etcd-development/etcd:v{}"]
    versions = sorted(binaries.etcd_binaries(), key=lambda v: tuple(int(p) for p in v.split(".")))
    return [spellings[i % len(spellings)].format(version) for i, version in enumerate(versions)]


@pytest.mark.parametrize("image", etcd_images())
def test_etcd_pod_serves_on_its_pod_ip(sandbox: Sandbox, namespace: str, image: str) -> None:
    apply(sandbox, namespace, etcd_pod("single", image, [
        "--advertise-client-urls=http://$(POD_IP):2379", "--listen-peer-urls=http://$(POD_IP):2380",
        "--initial-advertise-peer-urls=http://$(POD_IP):2380", "--initial-cluster=single=http://$(POD_IP):2380"]))
    pod = wait_for_object(lambda: ready_pod(sandbox, namespace, "single"), timeout=60, what="etcd pod ready")
    ip = pod["status"]["podIP"]
    assert ip.startswith("127.") and ip != pod["status"]["hostIP"]
    assert pod["status"]["containerStatuses"][0]["containerID"].startswith("process://")

    endpoint = f"http://{ip}:2379"
    put = sandbox.etcdctl([endpoint], "put", "greeting", "hello")
    assert put.returncode == 0, put.stderr
    got = sandbox.etcdctl([endpoint], "get", "greeting", "--print-value-only")
    assert got.stdout.strip() == "hello", got.stderr
    status = sandbox.etcdctl([endpoint], "endpoint", "status", "-w", "json")
    version = json.loads(status.stdout)[0]["Status"]["version"]
    assert version == image.rsplit(":", 1)[1].lstrip("v").split("-")[0]


def test_static_three_member_cluster_over_pod_dns_names(sandbox: Sandbox, namespace: str) -> None:
    names = ["etcd-0", "etcd-1", "etcd-2"]

    def peer(name: str) -> str:
        return f"http://{name}.etcd.{namespace}.svc:2380"

    apply(sandbox, namespace, {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "etcd"},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {"app": "etcd"},
                 "ports": [{"name": "client", "port": 2379}, {"name": "peer", "port": 2380}]},
    })
    initial_cluster = ",".join(f"{n}={peer(n)}" for n in names)
    for name in names:
        apply(sandbox, namespace, etcd_pod(name, f"gcr.io/etcd-development/etcd:v{binaries.newest_etcd_version()}", [
            f"--advertise-client-urls=http://{name}.etcd.{namespace}.svc:2379",
            "--listen-peer-urls=http://0.0.0.0:2380", f"--initial-advertise-peer-urls={peer(name)}",
            f"--initial-cluster={initial_cluster}", "--initial-cluster-state=new",
            f"--initial-cluster-token={namespace}",
        ], hostname=name, subdomain="etcd"))
    for name in names:
        wait_for(lambda: ready_pod(sandbox, namespace, name), timeout=90, what=f"{name} ready")

    def started_members() -> list[str] | None:
        result = sandbox.etcdctl([f"http://etcd-1.etcd.{namespace}.svc:2379"], "member", "list", "-w", "json")
        if result.returncode != 0:
            return None
        members = json.loads(result.stdout).get("members", [])
        started = sorted(m["name"] for m in members if m.get("name"))
        return started if len(started) == 3 else None

    assert wait_for(started_members, timeout=30, what="3 started members") == names
    # The headless Service's name resolves to its pods as well.
    put = sandbox.etcdctl([f"http://etcd.{namespace}.svc.cluster.local:2379"], "put", "k", "v")
    assert put.returncode == 0, put.stderr
