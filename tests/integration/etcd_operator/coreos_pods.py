"""The objects the CoreOS etcd-operator (v0.9.4, its last release) made for an EtcdCluster, built
the way it built them, so tests can leave a cluster exactly as that operator left it running.

What it made, from its sources (pkg/util/k8sutil: `newEtcdPod`, `NewSeedMemberPod`, `NewEtcdPod`,
`newEtcdServiceManifest`; pkg/apis/etcd/v1beta2 `ClusterStatus`; pkg/util/etcdutil `Member`):

- member names `<cluster>-<10 random chars>` (`UniqueMemberName`, Kubernetes' `rand.String`
  alphabet), the pod's name, hostname and DNS name `<member>.<cluster>.<ns>.svc` under the
  headless service `<cluster>`;
- pod labels `app=etcd`, `etcd_cluster`, `etcd_node`; annotation `etcd.version`; an owner
  reference to the EtcdCluster (`controller: true`); `restartPolicy: Never`; no service-account
  token; no security context (etcd runs as the image's root);
- a `check-dns` busybox init container that waits until the member's DNS name resolves;
- one container `etcd` whose command is etcd's own command line split on spaces (v0.9.x), or the
  same line run by `/bin/sh -ec` (older releases; their pods outlived operator upgrades):
  listening on 0.0.0.0, advertising DNS names, `--initial-cluster-state=new` and a random UUID
  token for the seed, `existing` for every member added after it (added as *voting* members by
  `member add`, before their pod existed);
- liveness and readiness probes running `ETCDCTL_API=3 etcdctl endpoint status` in the container;
- an emptyDir `etcd-data` at /var/etcd (data dir /var/etcd/data), or, with
  `spec.pod.persistentVolumeClaimSpec`, a PVC named after the member (labels `app`, `etcd_cluster`
  only; owned by the EtcdCluster) for every member but the seed, which stays on emptyDir;
- services `<cluster>` (headless, client 2379 and peer 2380, tolerating unready endpoints) and
  `<cluster>-client` (2379), both selecting `app=etcd,etcd_cluster=<cluster>`;
- a `status` with phase, size, members ready/unready, serviceName, clientPort, currentVersion,
  targetVersion, controlPaused and conditions with `lastUpdateTime` (its own condition shape).
"""
from __future__ import annotations

import secrets
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

GROUP_VERSION = "etcd.database.coreos.com/v1beta2"
REPOSITORY = "quay.io/coreos/etcd"
BUSYBOX_IMAGE = "busybox:1.28.0-glibc"  # CoreOS's default spec.pod.busyboxImage
# k8s.io/apimachinery/pkg/util/rand: no vowels, no 0/1/3 (no words, no look-alikes)
RANDOM_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
RANDOM_SUFFIX_LENGTH = 10
TOLERATE_UNREADY_ENDPOINTS = "service.alpha.kubernetes.io/tolerate-unready-endpoints"


def coreos_cluster(name: str, size: int, version: str, *, pvc_spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """A CoreOS EtcdCluster manifest after that operator's first pass, which wrote its defaults
    (repository) back into the spec."""
    spec: dict[str, Any] = {"size": size, "version": version, "repository": REPOSITORY}
    if pvc_spec is not None:
        spec["pod"] = {"persistentVolumeClaimSpec": pvc_spec}
    return {"apiVersion": GROUP_VERSION, "kind": "EtcdCluster", "metadata": {"name": name}, "spec": spec}


def uses_pvcs(cluster: dict[str, Any]) -> bool:
    return bool((cluster["spec"].get("pod") or {}).get("persistentVolumeClaimSpec"))


def coreos_member_pvc(cluster: dict[str, Any], member: str) -> dict[str, Any]:
    """`NewEtcdPodPVC`: the member's data volume, for members added after the seed."""
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": member, "labels": cluster_labels(cluster["metadata"]["name"]),
                         "ownerReferences": [owner_reference(cluster)]},
            "spec": dict(cluster["spec"]["pod"]["persistentVolumeClaimSpec"])}


def unique_member_name(cluster: str) -> str:
    return f"{cluster}-{''.join(secrets.choice(RANDOM_ALPHABET) for _ in range(RANDOM_SUFFIX_LENGTH))}"


def member_host(cluster: str, namespace: str, member: str) -> str:
    return f"{member}.{cluster}.{namespace}.svc"


def peer_url(cluster: str, namespace: str, member: str) -> str:
    return f"http://{member_host(cluster, namespace, member)}:2380"


def client_url(cluster: str, namespace: str, member: str) -> str:
    return f"http://{member_host(cluster, namespace, member)}:2379"


def new_cluster_token() -> str:
    return str(uuid.uuid4())


def owner_reference(cluster: dict[str, Any]) -> dict[str, Any]:
    """CoreOS `EtcdCluster.AsOwner()`."""
    return {"apiVersion": GROUP_VERSION, "kind": "EtcdCluster", "name": cluster["metadata"]["name"],
            "uid": cluster["metadata"]["uid"], "controller": True}


def cluster_labels(cluster: str) -> dict[str, str]:
    return {"etcd_cluster": cluster, "app": "etcd"}


def coreos_services(cluster: dict[str, Any]) -> list[dict[str, Any]]:
    """The peer (headless) and client services, as `CreatePeerService`/`CreateClientService`."""
    name = cluster["metadata"]["name"]

    def service(service_name: str, cluster_ip: str | None, ports: list[dict[str, Any]]) -> dict[str, Any]:
        spec: dict[str, Any] = {"ports": ports, "selector": cluster_labels(name)}
        if cluster_ip:
            spec["clusterIP"] = cluster_ip
        return {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": service_name, "labels": cluster_labels(name),
                             "annotations": {TOLERATE_UNREADY_ENDPOINTS: "true"},
                             "ownerReferences": [owner_reference(cluster)]},
                "spec": spec}

    client_port = {"name": "client", "port": 2379, "targetPort": 2379, "protocol": "TCP"}
    peer_port = {"name": "peer", "port": 2380, "targetPort": 2380, "protocol": "TCP"}
    return [service(name, "None", [client_port, peer_port]), service(f"{name}-client", None, [client_port])]


def etcd_command_line(cluster: str, namespace: str, member: str, *, initial_cluster: Sequence[tuple[str, str]],
                      state: str, token: str) -> str:
    """The etcd command line of `newEtcdPod`, as one string."""
    line = (
        f"/usr/local/bin/etcd --data-dir=/var/etcd/data --name={member} "
        f"--initial-advertise-peer-urls={peer_url(cluster, namespace, member)} "
        f"--listen-peer-urls=http://0.0.0.0:2380 --listen-client-urls=http://0.0.0.0:2379 "
        f"--advertise-client-urls={client_url(cluster, namespace, member)} "
        f"--initial-cluster={','.join(f'{n}={u}' for n, u in initial_cluster)} --initial-cluster-state={state}"
    )
    if state == "new":
        line += f" --initial-cluster-token={token}"
    return line


def _probe(initial_delay: int, timeout: int, period: int, failures: int) -> dict[str, Any]:
    return {"exec": {"command": ["/bin/sh", "-ec", "ETCDCTL_API=3 etcdctl endpoint status"]},
            "initialDelaySeconds": initial_delay, "timeoutSeconds": timeout,
            "periodSeconds": period, "failureThreshold": failures}


def _check_dns_script(host: str, timeout_seconds: int = 0) -> str:
    """Wait for the member's DNS name (0: forever, CoreOS's default DNSTimeoutInSecond)."""
    return (
        f"\nTIMEOUT_READY={timeout_seconds}\n"
        f"while ( ! nslookup {host} )\n"
        "do\n"
        "  # 0 never times out\n"
        "  TIMEOUT_READY=$(( TIMEOUT_READY-1 ))\n"
        "  if [ $TIMEOUT_READY -eq 0 ];\n"
        "  then\n"
        "    echo \"Timed out waiting for DNS entry\"\n"
        "    exit 1\n"
        "  fi\n"
        "  sleep 1\n"
        "done"
    )


def coreos_member_pod(cluster: dict[str, Any], member: str, *, version: str, initial_cluster: Sequence[tuple[str, str]],
                      state: str, token: str = "", shell: bool = False) -> dict[str, Any]:
    """A member pod as `NewSeedMemberPod` (state "new") or `NewEtcdPod` (state "existing") made it;
    `shell` wraps the command line in `/bin/sh -ec` as releases before 0.9 did. A non-seed member of
    a cluster with `persistentVolumeClaimSpec` mounts its PVC (`coreos_member_pvc`)."""
    name = cluster["metadata"]["name"]
    namespace = cluster["metadata"]["namespace"]
    line = etcd_command_line(name, namespace, member, initial_cluster=initial_cluster, state=state, token=token)
    command = ["/bin/sh", "-ec", line] if shell else line.split(" ")
    container = {
        "name": "etcd",
        "image": f"{cluster['spec'].get('repository', REPOSITORY)}:v{version}",
        "command": command,
        "ports": [{"name": "server", "containerPort": 2380, "protocol": "TCP"},
                  {"name": "client", "containerPort": 2379, "protocol": "TCP"}],
        "volumeMounts": [{"name": "etcd-data", "mountPath": "/var/etcd"}],
        "livenessProbe": _probe(10, 10, 60, 3),
        "readinessProbe": _probe(1, 5, 5, 3),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": member,
            "labels": {"app": "etcd", "etcd_node": member, "etcd_cluster": name},
            "annotations": {"etcd.version": version},
            "ownerReferences": [owner_reference(cluster)],
        },
        "spec": {
            "initContainers": [{"name": "check-dns", "image": BUSYBOX_IMAGE,
                                "command": ["/bin/sh", "-c", _check_dns_script(member_host(name, namespace, member))]}],
            "containers": [container],
            "restartPolicy": "Never",
            "volumes": [{"name": "etcd-data", "persistentVolumeClaim": {"claimName": member}}
                        if state == "existing" and uses_pvcs(cluster) else {"name": "etcd-data", "emptyDir": {}}],
            "hostname": member,
            "subdomain": name,
            "automountServiceAccountToken": False,
        },
    }


def coreos_status(*, size: int, ready: Sequence[str], version: str, service_name: str,
                  now: datetime | None = None) -> dict[str, Any]:
    """The `status` the CoreOS operator kept on a healthy cluster (`ClusterStatus`)."""
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "phase": "Running",
        "size": size,
        "serviceName": service_name,
        "clientPort": 2379,
        "members": {"ready": sorted(ready)},
        "currentVersion": version,
        "targetVersion": "",
        "controlPaused": False,
        "conditions": [{"type": "Available", "status": "True", "lastUpdateTime": stamp,
                        "lastTransitionTime": stamp, "reason": "Cluster available"}],
    }
