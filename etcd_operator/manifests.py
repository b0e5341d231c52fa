"""Pure builders of the Kubernetes objects a cluster is made of: member pods and their PVCs, the
client service `<cluster>-client` and the headless peer service `<cluster>`. Plain API dicts
(camelCase), owned by the EtcdCluster so deleting it deletes them.

A member's addresses are DNS names, `<member>.<cluster>.<ns>.svc`: the pod's hostname and
subdomain under the headless service, stable for the member's whole life. etcd listens on the
pod IP only (never 0.0.0.0 or 127.0.0.1), which is right on Kubernetes and lets several members
share a host in the local sandbox.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from etcd_common.api import constants as c
from etcd_common.api.cert_manager_tls import CERT_MANAGER_KEY
from etcd_common.api.etcd_cluster import ClusterSpec, EtcdCluster, PodPolicy
from etcd_common.api.maintenance import QUOTA_ENV_VARIABLE
from etcd_common.api.restore_source import RestoreSource
from etcd_common.etcd.endpoints import client_service_url  # noqa: F401 (re-exported: what clients connect to)
from etcd_common.seed.pod import recovery_seed_init_containers, seed_restore_init_containers, seed_restore_volumes
from etcd_common.seed.security import (  # noqa: F401 (re-exported: callers import them from here)
    default_pod_security_context,
    etcd_container_security_context,
    member_pod_security_context,
)

InitialClusterState = Literal["new", "existing"]
SECRET_FILE_MODE = 0o440
# Plain-HTTP listener for /health and /metrics on every member (Prometheus scrapes it); readiness
# of client-TLS members is probed there, so member pods need no client certificate.
METRICS_PORT = c.METRICS_PORT
METRICS_PORT_NAME = c.METRICS_PORT_NAME
# etcd's /health with the NOSPACE alarm left out (etcd >= 3.5): a member whose only problem is a
# full quota still serves reads, so it stays ready and in the client service while the operator
# frees space. Every httpGet readiness probe is of a 3.5+ member (see `_readiness_probe`).
READINESS_HEALTH_PATH = "/health?exclude=NOSPACE"
# etcd variables CoreOS-era manifests set in spec.pod.etcdEnv for what spec.compaction and
# spec.backendQuota now say: honoured, the operator then leaves its own flag out
# (`maintenance_flags`), since etcd refuses to start when a variable shadows a flag.
COMPACTION_ENV = ("ETCD_AUTO_COMPACTION_MODE", "ETCD_AUTO_COMPACTION_RETENTION")
QUOTA_ENV = (QUOTA_ENV_VARIABLE,)
# etcd's check of its data against its peers' before it serves (`corruption_check_flags`), per
# minor version: 3.5 has it as an experimental flag, 3.6 as a feature gate (the flag deprecated).
INITIAL_CORRUPT_CHECK_FLAGS = {
    "3.5": "--experimental-initial-corrupt-check=true",
    "3.6": "--feature-gates=InitialCorruptCheck=true",
}
# Variables in spec.pod.etcdEnv that set the same (etcd refuses a flag its variable shadows).
CORRUPT_CHECK_ENV = ("ETCD_EXPERIMENTAL_INITIAL_CORRUPT_CHECK", "ETCD_FEATURE_GATES")


# ---------------------------------------------------------------------------------------------
# Names and addresses


def client_service_name(cluster_name: str) -> str:
    return f"{cluster_name}{c.CLIENT_SERVICE_SUFFIX}"


def peer_service_name(cluster_name: str) -> str:
    return cluster_name


def service_names(cluster_name: str) -> tuple[str, str]:
    return peer_service_name(cluster_name), client_service_name(cluster_name)


def disruption_budget_name(cluster_name: str) -> str:
    return cluster_name


def member_name(cluster_name: str, suffix: str) -> str:
    return f"{cluster_name}-{suffix}"


def derived_name_suffix(suffix: str, index: int) -> str:
    """The `index`-th name suffix drawn from `suffix` (index 0: `suffix` itself), for members
    named together (a restored cluster bootstrapping all at once): as random as `suffix`, and the
    planner stays a pure function of its observation."""
    if index == 0:
        return suffix
    digest = hashlib.sha256(f"{suffix}/{index}".encode()).digest()
    alphabet = c.NAME_SUFFIX_ALPHABET
    return "".join(alphabet[byte % len(alphabet)] for byte in digest[:c.NAME_SUFFIX_LENGTH])


def member_host(cluster: EtcdCluster, member: str) -> str:
    domain = cluster.require_spec().pod.cluster_domain
    return f"{member}.{peer_service_name(cluster.name)}.{cluster.namespace}.svc{domain}"


def member_peer_url(cluster: EtcdCluster, member: str) -> str:
    spec = cluster.require_spec()
    scheme = "https" if spec.tls.peer_tls and not spec.tls_bridge else "http"
    return f"{scheme}://{member_host(cluster, member)}:{c.PEER_PORT}"


def member_client_url(cluster: EtcdCluster, member: str) -> str:
    """Where the operator reaches a member: http while a move to TLS bridges (tls/transition.py),
    every member then still serves http clients; https while a move off TLS bridges."""
    scheme = "https" if cluster.require_spec().reaches_members_over_https else "http"
    return f"{scheme}://{member_host(cluster, member)}:{c.CLIENT_PORT}"


def advertised_client_url(cluster: EtcdCluster, member: str) -> str:
    """The client URL a member's etcd advertises (the member list's clientURLs): http for a bridge
    pod, which serves both schemes, so the URL stays right whichever way the move goes."""
    spec = cluster.require_spec()
    scheme = "https" if spec.tls.client_tls and not spec.tls_bridge else "http"
    return f"{scheme}://{member_host(cluster, member)}:{c.CLIENT_PORT}"


def cluster_labels(cluster_name: str) -> dict[str, str]:
    """The selector of everything a cluster owns (CoreOS labels)."""
    return {c.LABEL_APP: c.LABEL_APP_VALUE, c.LABEL_CLUSTER: cluster_name}


def member_labels(cluster_name: str, member: str) -> dict[str, str]:
    return {**cluster_labels(cluster_name), c.LABEL_MEMBER: member}


def client_service_selector(cluster_name: str) -> dict[str, str]:
    """The client service sends clients only to member pods labelled serving: removing the label
    drains a member before it is removed or restarted (planning/draining.py)."""
    return {**cluster_labels(cluster_name), c.LABEL_SERVING: c.LABEL_SERVING_VALUE}


def client_selector_outdated(service: dict[str, Any]) -> bool:
    """A client service (CoreOS-made, or made before draining existed) whose selector does not
    require the serving label: draining a member would not keep clients off it."""
    selector = (service.get("spec") or {}).get("selector") or {}
    return selector.get(c.LABEL_SERVING) != c.LABEL_SERVING_VALUE


def owner_reference(cluster: EtcdCluster) -> dict[str, Any]:
    return {
        "apiVersion": c.API_GROUP_VERSION,
        "kind": c.KIND,
        "name": cluster.name,
        "uid": cluster.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_policy_hash(spec: ClusterSpec) -> str:
    """Fingerprint of what, besides the image, shapes a member pod. Empty fields are left out so
    adding a field to PodPolicy later does not change the hash of existing pods (and roll them).
    Excluded on purpose: the PVC spec (an existing claim cannot change), the cluster domain
    (a member keeps the peer URL it was added with) and the bridge step of a move to TLS
    (tls/transition.py compares the pods' TLS mode itself).
    The compaction and quota flags are in: default compaction made them non-empty, so the first
    operator version with them rolled every existing cluster once (docs/upgrades.md).
    The security contexts are hashed as the pod gets them (defaults merged with the user's), so
    a change of the operator's defaults rolls the members once, and only once."""
    pod = spec.pod
    material: dict[str, Any] = {
        "labels": dict(pod.labels),
        "annotations": dict(pod.annotations),
        "nodeSelector": dict(pod.node_selector),
        "antiAffinity": pod.anti_affinity,
        "affinity": pod.affinity,
        "resources": pod.resources,
        "tolerations": list(pod.tolerations),
        "etcdEnv": list(pod.etcd_env),
        "securityContext": member_pod_security_context(spec),
        "containerSecurityContext": etcd_container_security_context(),
        "persistentVolumes": pod.uses_persistent_volumes,
        "peerSecret": spec.tls.member_peer_secret,
        "serverSecret": spec.tls.member_server_secret,
        "operatorSecret": spec.tls.operator_secret,
        # Read by etcd only at start: a change restarts the members one at a time (planning/membership.py, `upgrade_outdated`).
        "maintenanceFlags": maintenance_flags(spec),
        "metricsPort": METRICS_PORT,
    }
    kept = {key: value for key, value in material.items() if value not in (None, "", False, [], {})}
    canonical = json.dumps(kept, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# Security: the `restricted` Pod Security Standard


# default_pod_security_context, member_pod_security_context, etcd_container_security_context:
# etcd_common.seed.security (the restore operator's staging pod runs with them too).


# ---------------------------------------------------------------------------------------------
# Services


def build_peer_service(cluster: EtcdCluster) -> dict[str, Any]:
    """Headless service `<cluster>`: gives each member pod its DNS name, ready or not (a member
    must resolve before it is healthy, or it could never join)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(cluster, peer_service_name(cluster.name), cluster_labels(cluster.name)),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": cluster_labels(cluster.name),
            "ports": [
                _service_port(c.CLIENT_PORT_NAME, c.CLIENT_PORT),
                _service_port(c.PEER_PORT_NAME, c.PEER_PORT),
            ],
        },
    }


def build_client_service(cluster: EtcdCluster) -> dict[str, Any]:
    """`<cluster>-client`: what applications use; only ready members receive traffic."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(cluster, client_service_name(cluster.name), cluster_labels(cluster.name)),
        "spec": {
            "type": "ClusterIP",
            "selector": client_service_selector(cluster.name),
            "ports": [_service_port(c.CLIENT_PORT_NAME, c.CLIENT_PORT)],
        },
    }


def build_service(cluster: EtcdCluster, name: str) -> dict[str, Any]:
    """The service of that name (one of `service_names`)."""
    if name == peer_service_name(cluster.name):
        return build_peer_service(cluster)
    if name == client_service_name(cluster.name):
        return build_client_service(cluster)
    raise ValueError(f"{name!r} is not a service of cluster {cluster.name!r}")


def build_disruption_budget(cluster: EtcdCluster, min_available: int) -> dict[str, Any]:
    """policy/v1 PodDisruptionBudget over the member pods: evictions (drains) may take members
    only while `min_available` (a quorum) stay ready. The default unhealthy-pod policy
    (`IfHealthyBudget`) is kept on purpose: with quorum lost every pod is unready, and evicting
    them then would throw away the members' data."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(cluster, disruption_budget_name(cluster.name), cluster_labels(cluster.name)),
        "spec": {
            "minAvailable": min_available,
            "selector": {"matchLabels": cluster_labels(cluster.name)},
        },
    }


# ---------------------------------------------------------------------------------------------
# Member PVC and pod


def build_member_pvc(cluster: EtcdCluster, member: str) -> dict[str, Any]:
    """PVC `<member>` from spec.pod.persistentVolumeClaimSpec; a pod recreated for the same
    member mounts it again and keeps its data."""
    pvc_spec = cluster.require_spec().pod.persistent_volume_claim_spec
    if pvc_spec is None:
        raise ValueError(f"cluster {cluster.name!r} does not use persistent volumes")
    claim = _plain(pvc_spec)
    claim.setdefault("accessModes", ["ReadWriteOnce"])
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _metadata(cluster, member, member_labels(cluster.name, member)),
        "spec": claim,
    }


def ip_family_of_services(services: Sequence[dict[str, Any]]) -> str:
    """"IPv6" when the cluster's Services are IPv6 first (single-stack IPv6, or dual stack with
    IPv6 primary, as the apiserver assigned them), else "IPv4": pods get their primary IP from
    the same family, and etcd needs an IPv6 listen address in brackets."""
    for service in services:
        families = (service.get("spec") or {}).get("ipFamilies") or []
        if families:
            return "IPv6" if families[0] == "IPv6" else "IPv4"
    return "IPv4"


def build_member_pod(
    cluster: EtcdCluster,
    member: str,
    *,
    state: InitialClusterState,
    initial_cluster: Sequence[tuple[str, str]],
    ipv6: bool = False,
    serving: bool = True,
) -> dict[str, Any]:
    """Pod `<member>` running etcd at spec.version. `initial_cluster` is (name, peer URL) pairs:
    just this member for the seed (`state="new"`), every member for a joining one. `serving`:
    labelled for the client service; a learner's pod is not (etcd refuses its clients' writes,
    "rpc not supported for learner", yet its /health passes), and gets the label once promoted."""
    spec = cluster.require_spec()
    container = _member_container(cluster, member, state=state, initial_cluster=initial_cluster, ipv6=ipv6)
    volumes = _member_volumes(spec, member, container)
    pod_spec: dict[str, Any] = {
        "hostname": member,
        "subdomain": peer_service_name(cluster.name),
        "restartPolicy": "Always",
        # Service env vars would include ETCD_* names for a cluster called "etcd", which etcd
        # reads as flags; and etcd needs no API token.
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "securityContext": member_pod_security_context(spec),
        "containers": [container],
        "volumes": volumes,
        **_member_placement(cluster),
    }
    if state == c.INITIAL_CLUSTER_STATE_NEW and spec.restore is not None:
        # spec.restore: the seed starts from the snapshot (etcd_common.seed.pod).
        pod_spec["initContainers"] = seed_restore_init_containers(
            spec.restore, etcd_image=spec.image, etcd_version=spec.version, member=member,
            initial_cluster=initial_cluster, cluster_token=cluster_token(cluster),
            security_context=etcd_container_security_context(),
        )
        volumes.extend(seed_restore_volumes(spec.restore))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _member_pod_metadata(cluster, member, state, serving),
            "spec": pod_spec}


def build_recovery_seed_pod(cluster: EtcdCluster, member: str, *, survivor_client_url: str, token: str,
                            ipv6: bool = False, backup: RestoreSource | None = None) -> dict[str, Any]:
    """The seed pod of a quorum-loss recovery: a new one-member cluster (`token`) whose init
    containers restore a snapshot of the survivor at `survivor_client_url` (etcd_common.seed.pod),
    or, with `backup` (the survivor is behind it), that backup's snapshot, by the init containers
    of spec.restore."""
    spec = cluster.require_spec()
    initial_cluster = ((member, member_peer_url(cluster, member)),)
    # Not from spec.restore (whose secret may be long gone): from the survivor, or the backup.
    # With `backup`, build_member_pod adds spec.restore's secret volumes (storage, encryption key).
    cluster = dataclasses.replace(cluster, spec=dataclasses.replace(spec, restore=backup))
    pod = build_member_pod(cluster, member, state=c.INITIAL_CLUSTER_STATE_NEW, initial_cluster=initial_cluster,
                           ipv6=ipv6)
    if backup is not None:
        pod["spec"]["initContainers"] = seed_restore_init_containers(
            backup, etcd_image=spec.image, etcd_version=spec.version, member=member,
            initial_cluster=initial_cluster, cluster_token=token, security_context=etcd_container_security_context())
        return pod
    client_tls_volume = ""
    if spec.tls.client_tls:
        # The snapshot step dials the survivor with the operator's client certificate.
        client_tls_volume = c.OPERATOR_TLS_VOLUME
        volumes = pod["spec"]["volumes"]
        if not any(volume["name"] == client_tls_volume for volume in volumes):
            volumes.append(tls_secret_volume(spec, client_tls_volume, spec.tls.operator_secret))
    pod["spec"]["initContainers"] = recovery_seed_init_containers(
        etcd_image=spec.image, etcd_version=spec.version, member=member, initial_cluster=initial_cluster,
        cluster_token=token, survivor_client_url=survivor_client_url,
        security_context=etcd_container_security_context(), client_tls_volume=client_tls_volume,
    )
    return pod


def recovery_cluster_token(cluster: EtcdCluster, seed_member: str) -> str:
    """`--initial-cluster-token` of a recovery's seed: new (the seed's own name in it), so the
    rebuilt cluster's members can never be mistaken for the old cluster's."""
    return f"{cluster_token(cluster)}-{seed_member}"


def _member_pod_metadata(cluster: EtcdCluster, member: str, state: InitialClusterState,
                         serving: bool = True) -> dict[str, Any]:
    """The spec's pod labels and annotations, with ours (which win): member, serving (if), the etcd
    version, the initial cluster state and the pod policy hash. The Prometheus scrape annotations
    go under the spec's, so a user can turn scraping off."""
    spec = cluster.require_spec()
    policy = spec.pod
    labels = {**policy.labels, **member_labels(cluster.name, member)}
    if serving:
        labels[c.LABEL_SERVING] = c.LABEL_SERVING_VALUE
    else:
        labels.pop(c.LABEL_SERVING, None)
    metadata = _metadata(cluster, member, labels)
    metadata["annotations"] = {
        **prometheus_annotations(),
        **policy.annotations,
        c.ANNOTATION_ETCD_VERSION: str(spec.version),
        c.ANNOTATION_INITIAL_CLUSTER_STATE: state,
        c.ANNOTATION_POD_POLICY_HASH: pod_policy_hash(spec),
    }
    return metadata


def prometheus_annotations() -> dict[str, str]:
    """Prometheus's conventional annotations pointing at the member's metrics listener."""
    return {
        c.ANNOTATION_PROMETHEUS_SCRAPE: "true",
        c.ANNOTATION_PROMETHEUS_PORT: str(METRICS_PORT),
        c.ANNOTATION_PROMETHEUS_PATH: c.METRICS_PATH,
    }


def _member_container(cluster: EtcdCluster, member: str, *, state: InitialClusterState,
                      initial_cluster: Sequence[tuple[str, str]], ipv6: bool) -> dict[str, Any]:
    """The etcd container (its data volume mounted; TLS secrets are mounted by `_member_volumes`)."""
    spec = cluster.require_spec()
    policy = spec.pod
    container: dict[str, Any] = {
        "name": c.ETCD_CONTAINER_NAME,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": etcd_command(cluster, member, state=state, initial_cluster=initial_cluster, ipv6=ipv6),
        "env": [
            {"name": c.POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            *(_plain(variable) for variable in policy.etcd_env),
        ],
        "ports": [
            {"name": c.CLIENT_PORT_NAME, "containerPort": c.CLIENT_PORT, "protocol": "TCP"},
            {"name": c.PEER_PORT_NAME, "containerPort": c.PEER_PORT, "protocol": "TCP"},
            {"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"},
        ],
        "volumeMounts": [{"name": c.DATA_VOLUME_NAME, "mountPath": c.DATA_VOLUME_MOUNT_PATH}],
        "readinessProbe": _readiness_probe(cluster, member),
        "livenessProbe": _liveness_probe(),
        "securityContext": etcd_container_security_context(),
        # etcd writes no termination-message file: a failed run's last log lines say why it
        # exited (shown in the pod's lastState and the cluster's status).
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if policy.resources:
        container["resources"] = _plain(policy.resources)
    return container


def _member_volumes(spec: ClusterSpec, member: str, container: dict[str, Any]) -> list[dict[str, Any]]:
    """The data volume (the member's PVC, or an emptyDir) and one per TLS secret, each of those
    mounted read-only into `container`."""
    volumes: list[dict[str, Any]] = [
        {"name": c.DATA_VOLUME_NAME, "persistentVolumeClaim": {"claimName": member}}
        if spec.pod.uses_persistent_volumes
        else {"name": c.DATA_VOLUME_NAME, "emptyDir": {}}
    ]
    for volume_name, secret, mount_path in _tls_secrets(spec):
        volumes.append(tls_secret_volume(spec, volume_name, secret))
        container["volumeMounts"].append({"name": volume_name, "mountPath": mount_path, "readOnly": True})
    return volumes


def _member_placement(cluster: EtcdCluster) -> dict[str, Any]:
    """Where the pod may run: the spec's nodeSelector and tolerations, and the affinity."""
    policy = cluster.require_spec().pod
    placement: dict[str, Any] = {}
    if policy.node_selector:
        placement["nodeSelector"] = dict(policy.node_selector)
    if policy.tolerations:
        placement["tolerations"] = [_plain(toleration) for toleration in policy.tolerations]
    affinity = _affinity(cluster)
    if affinity:
        placement["affinity"] = affinity
    return placement


def cluster_token(cluster: EtcdCluster) -> str:
    """`--initial-cluster-token` of the seed: unique per cluster, so a seed can never join another
    cluster's members by mistake (and a restored cluster never takes the old one's token)."""
    return cluster.uid or cluster.name


def etcd_command(
    cluster: EtcdCluster,
    member: str,
    *,
    state: InitialClusterState,
    initial_cluster: Sequence[tuple[str, str]],
    ipv6: bool = False,
) -> list[str]:
    spec = cluster.require_spec()
    client_scheme = "https" if spec.tls.client_tls else "http"
    peer_scheme = "https" if spec.tls.peer_tls else "http"
    pod_ip = f"$({c.POD_IP_ENV})"  # expanded by the kubelet from the env var
    if ipv6:
        pod_ip = f"[{pod_ip}]"  # an IPv6 address in a URL goes in brackets
    listen_client = f"{client_scheme}://{pod_ip}:{c.CLIENT_PORT}"
    if spec.tls_bridge:
        # A bridge pod (tls/transition.py): its peers still on http (it dials https peers with
        # its peer certificate), its client port serving http and https alike (etcd tells them
        # apart on one listener), so every client keeps working whichever scheme it uses.
        peer_scheme = "http"
        listen_client = f"http://{pod_ip}:{c.CLIENT_PORT},https://{pod_ip}:{c.CLIENT_PORT}"
    command = [
        c.ETCD_BINARY,
        f"--name={member}",
        f"--data-dir={c.DATA_DIR}",
        f"--listen-client-urls={listen_client}",
        f"--listen-peer-urls={peer_scheme}://{pod_ip}:{c.PEER_PORT}",
        f"--advertise-client-urls={advertised_client_url(cluster, member)}",
        f"--initial-advertise-peer-urls={member_peer_url(cluster, member)}",
        "--initial-cluster=" + ",".join(f"{name}={url}" for name, url in initial_cluster),
        f"--initial-cluster-state={state}",
    ]
    if state == c.INITIAL_CLUSTER_STATE_NEW:
        command.append(f"--initial-cluster-token={cluster_token(cluster)}")
    if spec.tls.peer_tls:
        command += [
            "--peer-client-cert-auth=true",
            f"--peer-trusted-ca-file={c.PEER_TLS_DIR}/{c.PEER_CA_FILE}",
            f"--peer-cert-file={c.PEER_TLS_DIR}/{c.PEER_CERT_FILE}",
            f"--peer-key-file={c.PEER_TLS_DIR}/{c.PEER_KEY_FILE}",
        ]
    # Every member (etcd >= 3.3 has the flag): /metrics for Prometheus, /health for probes.
    command.append(f"--listen-metrics-urls=http://{pod_ip}:{METRICS_PORT}")
    if spec.tls.client_tls:
        command += [
            "--client-cert-auth=true",
            f"--trusted-ca-file={c.SERVER_TLS_DIR}/{c.SERVER_CA_FILE}",
            f"--cert-file={c.SERVER_TLS_DIR}/{c.SERVER_CERT_FILE}",
            f"--key-file={c.SERVER_TLS_DIR}/{c.SERVER_KEY_FILE}",
        ]
    # Members of a restored cluster bootstrapping all at once go without the initial corruption
    # check (`corruption_check_flags`): each restores the same checked snapshot, so their data
    # cannot differ at first start, and the check stalls etcd's start for its 7 s timeout when it
    # asks a peer that listens but does not answer yet (each member waits for the others).
    restored_together = (state == c.INITIAL_CLUSTER_STATE_NEW and spec.restore is not None
                         and len({name for name, _ in initial_cluster}) > 1)
    checks = [] if restored_together else corruption_check_flags(spec)
    return command + checks + maintenance_flags(spec)


def corruption_check_flags(spec: ClusterSpec) -> list[str]:
    """etcd's initial corruption check: before it serves, a restarting member compares the hash of
    its data with its peers' at the same revision and refuses to start when they differ, so a
    member with corrupt data never serves it (the operator sees it stuck and replaces it). etcd
    3.5: `--experimental-initial-corrupt-check`; 3.6: `--feature-gates=InitialCorruptCheck=true`;
    3.4 (here only an upgrade source) goes without. Left out when spec.pod.etcdEnv already sets
    either (`CORRUPT_CHECK_ENV`).

    Not in `pod_policy_hash` on purpose: adding it rolled no existing cluster. Members get it
    when their pods are next created (a replacement, a restart on a volume, a pod-policy change);
    an in-place image upgrade keeps the pod's command, and etcd 3.6 still takes 3.5's flag. The
    pods of a restored cluster's all-at-once bootstrap go without it (`etcd_command`)."""
    flag = INITIAL_CORRUPT_CHECK_FLAGS.get(spec.version.minor_version)
    if flag is None or etcd_env_sets(spec.pod, *CORRUPT_CHECK_ENV):
        return []
    return [flag]


def etcd_env_sets(pod: PodPolicy, *names: str) -> bool:
    """Whether spec.pod.etcdEnv sets any of the variables `names`."""
    return any(variable.get("name") in names for variable in pod.etcd_env)


def maintenance_flags(spec: ClusterSpec) -> list[str]:
    """etcd's compaction flags (spec.compaction) and `--quota-backend-bytes` (spec.backendQuota,
    when set), but those whose setting spec.pod.etcdEnv already makes (`COMPACTION_ENV`,
    `QUOTA_ENV`); flags etcd 3.4 has too."""
    flags: list[str] = []
    if not etcd_env_sets(spec.pod, *COMPACTION_ENV):
        flags += spec.compaction.etcd_flags()
    if spec.backend_quota_bytes is not None and not etcd_env_sets(spec.pod, *QUOTA_ENV):
        flags.append(f"--quota-backend-bytes={spec.backend_quota_bytes}")
    return flags


def _readiness_probe(cluster: EtcdCluster, member: str) -> dict[str, Any]:
    """Ready = etcd's own health check (has a leader, serves a linearizable read). A caught-up
    learner passes it too: its pod is kept out of the client service by the serving label instead
    (`build_member_pod`).

    etcd 3.4 answers `/health` with a v2 QGET that goes through the raft log; etcd 3.6 refuses to
    apply such entries ("detected disallowed v2 WAL") when it replays that log, so a 3.4 cluster
    probed on /health could not take 3.6 members later. Its members (and TLS members) are probed
    with `etcdctl endpoint health`, a v3 read that leaves nothing in the log (which, unlike
    /health?exclude=NOSPACE, fails on a member with the NOSPACE alarm: 3.4 has no `exclude`).
    The httpGet probes are of 3.5+ members only and leave NOSPACE out (`READINESS_HEALTH_PATH`)."""
    timing = {"initialDelaySeconds": 1, "periodSeconds": 5, "timeoutSeconds": 5, "failureThreshold": 3}
    spec = cluster.require_spec()
    if _probes_metrics_listener(spec):
        return {"httpGet": {"path": READINESS_HEALTH_PATH, "port": METRICS_PORT, "scheme": "HTTP"}, **timing}
    if spec.tls.client_tls or spec.version.minor_version in c.UPGRADE_SOURCE_MINOR_VERSIONS:
        return {"exec": {"command": _etcdctl_probe(cluster, member, ["endpoint", "health"])}, **timing}
    return {"httpGet": {"path": READINESS_HEALTH_PATH, "port": c.CLIENT_PORT, "scheme": "HTTP"}, **timing}


def _liveness_probe() -> dict[str, Any]:
    """Lenient: restart only a process that stops accepting connections for a minute. Not
    /health: it fails on every member when quorum is lost, and restarting them all then helps
    nobody (its `?serializable=true` variant needs etcd >= 3.5.3)."""
    return {
        "tcpSocket": {"port": c.CLIENT_PORT},
        "initialDelaySeconds": 10,
        "periodSeconds": 10,
        "timeoutSeconds": 5,
        "failureThreshold": 6,
    }


def _etcdctl_probe(cluster: EtcdCluster, member: str, arguments: list[str]) -> list[str]:
    """The image's etcdctl (with the operator's client certificate under TLS) against the member's
    advertised URL (probe commands get no $(VAR) expansion, so the pod IP is not available)."""
    tls = []
    if cluster.require_spec().tls.client_tls:
        tls = [
            f"--cacert={c.OPERATOR_TLS_DIR}/{c.OPERATOR_CA_FILE}",
            f"--cert={c.OPERATOR_TLS_DIR}/{c.OPERATOR_CERT_FILE}",
            f"--key={c.OPERATOR_TLS_DIR}/{c.OPERATOR_KEY_FILE}",
        ]
    return [
        c.ETCDCTL_BINARY,
        f"--endpoints={member_client_url(cluster, member)}",
        *tls,
        "--dial-timeout=3s",
        "--command-timeout=4s",
        *arguments,
    ]


def _probes_metrics_listener(spec: ClusterSpec) -> bool:
    """Client-TLS members (but those of an upgrade-source version, see `_readiness_probe`) are
    probed on the plain metrics listener (every member has one) instead of with etcdctl and a
    client certificate."""
    return spec.tls.client_tls and spec.version.minor_version not in c.UPGRADE_SOURCE_MINOR_VERSIONS


# The CoreOS (certificate, key, CA) file names each TLS volume holds.
_TLS_VOLUME_FILES: Final[Mapping[str, tuple[str, str, str]]] = {
    c.PEER_TLS_VOLUME: (c.PEER_CERT_FILE, c.PEER_KEY_FILE, c.PEER_CA_FILE),
    c.SERVER_TLS_VOLUME: (c.SERVER_CERT_FILE, c.SERVER_KEY_FILE, c.SERVER_CA_FILE),
    c.OPERATOR_TLS_VOLUME: (c.OPERATOR_CERT_FILE, c.OPERATOR_KEY_FILE, c.OPERATOR_CA_FILE),
}


def tls_secret_volume(spec: ClusterSpec, volume_name: str, secret: str) -> dict[str, Any]:
    """The volume of one TLS secret. Owner-and-group readable (the group is fsGroup, which etcd
    runs with), never world. With spec.TLS.certManager, cert-manager's keys (tls.crt, tls.key,
    ca.crt) become the CoreOS file names etcd is started with."""
    source: dict[str, Any] = {"secretName": secret, "defaultMode": SECRET_FILE_MODE}
    if spec.cert_manager_tls is not None:
        source["items"] = [{"key": CERT_MANAGER_KEY[name], "path": name} for name in _TLS_VOLUME_FILES[volume_name]]
    return {"name": volume_name, "secret": source}


def _tls_secrets(spec: ClusterSpec) -> list[tuple[str, str, str]]:
    """(volume name, secret name, mount path) for each TLS secret a member pod needs. The
    operator's client certificate is mounted only where etcdctl probes need it (client-TLS
    members of an upgrade-source version); everywhere else it stays out of member pods."""
    tls = spec.tls
    secrets = [
        (c.PEER_TLS_VOLUME, tls.member_peer_secret, c.PEER_TLS_DIR),
        (c.SERVER_TLS_VOLUME, tls.member_server_secret, c.SERVER_TLS_DIR),
    ]
    if tls.client_tls and not _probes_metrics_listener(spec):
        secrets.append((c.OPERATOR_TLS_VOLUME, tls.operator_secret, c.OPERATOR_TLS_DIR))
    return [entry for entry in secrets if entry[1]]


def _affinity(cluster: EtcdCluster) -> dict[str, Any]:
    policy = cluster.require_spec().pod
    affinity = _plain(policy.affinity) if policy.affinity else {}
    if policy.anti_affinity:
        # CoreOS antiAffinity: never two members of a cluster on one node.
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": cluster_labels(cluster.name)},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    return affinity


def _metadata(cluster: EtcdCluster, name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": cluster.namespace,
        "labels": labels,
        "ownerReferences": [owner_reference(cluster)],
    }


def _service_port(name: str, port: int) -> dict[str, Any]:
    return {"name": name, "port": port, "targetPort": port, "protocol": "TCP"}


def _plain(value: Any) -> Any:
    """A deep, mutable copy of an API sub-object from the spec (JSON round trip)."""
    return json.loads(json.dumps(value))
