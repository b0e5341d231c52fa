"""Every pod the operator makes, and the operator's own pod, meets the `restricted` Pod Security
Standard (Kubernetes 1.37, policy version `latest`), checked by a small pure implementation of
its rules; and the security defaults do not roll existing members in a loop."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from etcd_common.api import constants as c
from etcd_operator.manifests import build_member_pod, member_peer_url, pod_policy_hash
from tests.unit.etcd_operator.etcd_cluster_builders import PVC_SPEC, make_cluster

REPO = Path(__file__).resolve().parents[3]
MEMBER = "example-abcde"

# https://kubernetes.io/docs/concepts/security/pod-security-standards/
RESTRICTED_VOLUME_TYPES = frozenset({
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret",
})
SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
})
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})


def _containers(spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(field) or ():
            yield f"{field}[{container.get('name')}]", container


def restricted_violations(pod_spec: dict[str, Any], annotations: dict[str, str] | None = None) -> list[str]:
    """The rules of the baseline and restricted profiles that `pod_spec` breaks (empty: admitted)."""
    problems: list[str] = []
    pod_context = pod_spec.get("securityContext") or {}
    containers = list(_containers(pod_spec))
    # --- baseline
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod_spec.get(field):
            problems.append(f"{field} is set")
    if pod_context.get("windowsOptions", {}).get("hostProcess"):
        problems.append("pod hostProcess")
    for sysctl in pod_context.get("sysctls") or ():
        if sysctl.get("name") not in SAFE_SYSCTLS:
            problems.append(f"unsafe sysctl {sysctl.get('name')}")
    for key, value in (annotations or {}).items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and value not in ("runtime/default",) \
                and not value.startswith("localhost/"):
            problems.append(f"AppArmor {key}={value}")
    contexts = [("pod", pod_context)] + [(where, ctr.get("securityContext") or {}) for where, ctr in containers]
    for where, context in contexts:
        selinux = context.get("seLinuxOptions") or {}
        if selinux.get("type", "") not in SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
            problems.append(f"{where}: seLinuxOptions {selinux}")
        if (context.get("appArmorProfile") or {}).get("type") == "Unconfined":
            problems.append(f"{where}: AppArmor Unconfined")
        if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
            problems.append(f"{where}: seccomp Unconfined")
        if context.get("runAsUser") == 0:
            problems.append(f"{where}: runAsUser 0")
    for where, container in containers:
        context = container.get("securityContext") or {}
        if context.get("privileged"):
            problems.append(f"{where}: privileged")
        if context.get("windowsOptions", {}).get("hostProcess"):
            problems.append(f"{where}: hostProcess")
        if context.get("procMount") not in (None, "Default"):
            problems.append(f"{where}: procMount {context.get('procMount')}")
        for port in container.get("ports") or ():
            if port.get("hostPort"):
                problems.append(f"{where}: hostPort {port['hostPort']}")
        # --- restricted
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{where}: allowPrivilegeEscalation must be false")
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or ()):
            problems.append(f"{where}: capabilities must drop ALL")
        extra = set(capabilities.get("add") or ()) - {"NET_BIND_SERVICE"}
        if extra:
            problems.append(f"{where}: capabilities add {sorted(extra)}")
        non_root = context.get("runAsNonRoot", pod_context.get("runAsNonRoot"))
        if non_root is not True:
            problems.append(f"{where}: runAsNonRoot must be true (pod or container)")
        seccomp = (context.get("seccompProfile") or pod_context.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{where}: seccompProfile must be RuntimeDefault or Localhost")
    for volume in pod_spec.get("volumes") or ():
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUME_TYPES:
            problems.append(f"volume {volume.get('name')}: {sorted(kinds - RESTRICTED_VOLUME_TYPES)} not allowed")
    return problems


def test_the_checker_catches_what_restricted_forbids() -> None:
    bare = {"containers": [{"name": "c", "image": "i"}], "volumes": [{"name": "h", "hostPath": {"path": "/"}}]}
    problems = restricted_violations(bare)
    for rule in ("allowPrivilegeEscalation", "drop ALL", "runAsNonRoot", "seccompProfile", "hostPath"):
        assert any(rule in problem for problem in problems), (rule, problems)
    root = {"securityContext": {"runAsNonRoot": True, "runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "securityContext": {
                "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}}]}
    assert restricted_violations(root) == ["pod: runAsUser 0", "containers[c]: capabilities add ['SYS_ADMIN']"]


def _member_pod(spec: dict[str, Any] | None = None, *, state: str = "new") -> dict[str, Any]:
    cluster = make_cluster(spec)
    return build_member_pod(cluster, MEMBER, state=state,
                            initial_cluster=[(MEMBER, member_peer_url(cluster, MEMBER))])


TLS = {"static": {"member": {"peerSecret": "p", "serverSecret": "s"}, "operatorSecret": "o"}}


@pytest.mark.parametrize("spec, state", [
    pytest.param(None, "new", id="seed"),
    pytest.param(None, "existing", id="joining"),
    pytest.param({"version": "3.4.23"}, "existing", id="upgrade-source-3.4"),
    pytest.param({"version": "3.5.35"}, "existing", id="3.5"),
    pytest.param({"pod": {"persistentVolumeClaimSpec": PVC_SPEC}}, "new", id="on-pvc"),
    pytest.param({"TLS": TLS}, "new", id="tls"),
    pytest.param({"pod": {"securityContext": {"runAsUser": 9000, "fsGroup": 9000}}}, "new",
                 id="coreos-style-user-context"),
    pytest.param({"pod": {"securityContext": {"runAsNonRoot": True, "runAsUser": 9000, "runAsGroup": 9000,
                                              "fsGroup": 9000, "supplementalGroups": [5555]}}}, "new",
                 id="full-user-context"),
    pytest.param({"pod": {"antiAffinity": True, "resources": {"limits": {"memory": "1Gi"}},
                          "etcdEnv": [{"name": "ETCD_QUOTA_BACKEND_BYTES", "value": "1"}],
                          "tolerations": [{"key": "k", "operator": "Exists"}]}}, "new", id="full-pod-policy"),
])
def test_member_pods_are_restricted(spec: dict[str, Any] | None, state: str) -> None:
    pod = _member_pod(spec, state=state)
    assert restricted_violations(pod["spec"], pod["metadata"].get("annotations")) == []


def test_member_pod_security_defaults() -> None:
    pod = _member_pod()
    assert pod["spec"]["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": c.MEMBER_RUN_AS_USER, "runAsGroup": c.MEMBER_RUN_AS_GROUP,
        "fsGroup": c.MEMBER_FS_GROUP, "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert c.MEMBER_RUN_AS_USER != 0 and c.MEMBER_RUN_AS_GROUP != 0
    [container] = pod["spec"]["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": True,
    }
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert "initContainers" not in pod["spec"]


def test_user_security_context_wins_even_when_it_breaks_restricted() -> None:
    """Documented: spec.pod.securityContext fields win; running as root is the user's call, and a
    restricted namespace then refuses the pod."""
    pod = _member_pod({"pod": {"securityContext": {"runAsNonRoot": False, "runAsUser": 0}}})
    context = pod["spec"]["securityContext"]
    assert (context["runAsNonRoot"], context["runAsUser"], context["fsGroup"]) == (False, 0, c.MEMBER_FS_GROUP)
    assert restricted_violations(pod["spec"]) != []


def _deployment_pod_template() -> dict[str, Any]:
    documents = list(yaml.safe_load_all((REPO / "deploy" / "operator.yaml").read_text()))
    [deployment] = [doc for doc in documents if doc and doc.get("kind") == "Deployment"]
    template: dict[str, Any] = deployment["spec"]["template"]
    return template


def test_operator_pod_is_restricted() -> None:
    template = _deployment_pod_template()
    assert restricted_violations(template["spec"], template["metadata"].get("annotations")) == []
    context = template["spec"]["securityContext"]
    assert context["runAsUser"] == 10001, "the uid the Dockerfile creates"


def test_operator_pod_has_a_writable_tmp_for_client_certificates() -> None:
    """The root filesystem is read-only; TLS client certificates are written under $TMPDIR (/tmp)."""
    spec = _deployment_pod_template()["spec"]
    [container] = spec["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    assert {"name": "TMPDIR", "value": "/tmp"} in container["env"]


# --- the pod-policy hash: stable, so members are not rolled in a loop


def test_pod_policy_hash_is_pinned() -> None:
    """Changing this value rolls every member of every cluster once when the operator is upgraded:
    only on purpose (and say so in the release notes)."""
    # Changed on purpose (issue 21): the default compaction flags and the metrics listener.
    assert pod_policy_hash(make_cluster().require_spec()) == "99b96668afb7a678"


@pytest.mark.parametrize("change, rolls", [
    pytest.param({"pod": {"securityContext": {}}}, False, id="empty-context-is-the-default"),
    pytest.param({"pod": {"securityContext": {"runAsUser": c.MEMBER_RUN_AS_USER}}}, False,
                 id="restating-a-default-is-no-change"),
    pytest.param({"pod": {"securityContext": {"runAsUser": 9000}}}, True, id="user-context-rolls"),
    pytest.param({"version": "3.5.35"}, False, id="version-rolls-through-the-image-not-the-hash"),
])
def test_security_context_in_the_hash(change: dict[str, Any], rolls: bool) -> None:
    base = pod_policy_hash(make_cluster().require_spec())
    assert (pod_policy_hash(make_cluster(change).require_spec()) != base) is rolls


def test_pod_built_today_is_not_outdated_tomorrow() -> None:
    """The hash a pod carries is recomputed identically from the same spec (dict order aside)."""
    spec = {"pod": {"securityContext": {"fsGroup": 9000, "runAsUser": 9000},
                    "labels": {"b": "2", "a": "1"}}}
    reordered = {"pod": {"labels": {"a": "1", "b": "2"},
                         "securityContext": {"runAsUser": 9000, "fsGroup": 9000}}}
    pod = _member_pod(spec)
    assert pod["metadata"]["annotations"][c.ANNOTATION_POD_POLICY_HASH] == pod_policy_hash(
        make_cluster(reordered).require_spec())
