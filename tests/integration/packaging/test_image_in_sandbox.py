"""A pod of the built image (`localhost/etcd-operator-py:<version>`) in the sandbox runs in a real
container (runc): its own root filesystem, the pod's user and read-only root, volumes at their
mountPaths, the apiserver and its own pod IP on loopback; probes, logs, restarts and graceful
deletion as for process containers (kube_sandbox/kubelet/runc.py)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from kube_sandbox.binaries import newest_etcd_version
from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.packaging.built_image import local_image_reference, runc_evidence

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="builds with buildah's root storage and runs runc: needs root")

UID = 10001
GRACE_SECONDS = 30
PROGRAM = r"""
import os, signal, ssl, sys, urllib.request, http.server, threading
print("uid", os.getuid(), os.getgid(), os.getgroups(), flush=True)
print("config", open("/etc/probe/greeting").read(), flush=True)
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
request = urllib.request.Request(
    f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT']}/version",
    headers={"Authorization": "Bearer " + open(sa + "/token").read()})
version = urllib.request.urlopen(request, context=ssl.create_default_context(cafile=sa + "/ca.crt"), timeout=10)
print("apiserver", __import__("json").load(version)["gitVersion"], flush=True)
open("/tmp/written", "w").write("ok")
try:
    open("/app/written", "w")
except OSError as e:
    print("root-fs", e, flush=True)
signal.signal(signal.SIGTERM, lambda *_: (print("sigterm", flush=True), sys.exit(0)))
http.server.HTTPServer((os.environ["POD_IP"], 8080), http.server.SimpleHTTPRequestHandler).serve_forever()
"""


def probe_pod(image: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "in-runc"},
        "spec": {
            "terminationGracePeriodSeconds": GRACE_SECONDS,
            "securityContext": {"runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID, "fsGroup": UID},
            "containers": [{
                "name": "probe", "image": image, "command": ["python3", "-c", PROGRAM],
                "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                "ports": [{"name": "http", "containerPort": 8080}],
                "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
                # Runs in the container (runc exec), as its user: the file lands in the pod's /tmp.
                "livenessProbe": {"exec": {"command": ["sh", "-c", "id -u > /tmp/probed"]}, "periodSeconds": 1},
                "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]}},
                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"},
                                 {"name": "greeting", "mountPath": "/etc/probe", "readOnly": True}],
            }],
            "volumes": [{"name": "tmp", "emptyDir": {"medium": "Memory"}},
                        {"name": "greeting", "configMap": {"name": "greeting"}}],
        },
    }


def container_status(core: k8s.CoreV1Api, namespace: str) -> Any:
    statuses = core.read_namespaced_pod("in-runc", namespace).status.container_statuses or []
    return statuses[0] if statuses else None


def test_a_pod_of_the_built_image_runs_in_runc(sandbox: Sandbox, namespace: str) -> None:
    repository, tag = local_image_reference()
    core = k8s.CoreV1Api(sandbox.api_client())
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "greeting"}, "data": {"greeting": "hello"}})
    core.create_namespaced_pod(namespace, probe_pod(f"{repository}:{tag}"))
    status = wait_for(lambda: (s := container_status(core, namespace)) is not None and s.ready and s,
                      timeout=90, what="the pod of the built image Ready")
    assert status.container_id.startswith("runc://"), status
    assert status.image_id.startswith(f"{repository}@sha256:"), status

    logs = sandbox.kubectl("-n", namespace, "logs", "in-runc").stdout
    assert f"uid {UID} {UID} [{UID}]" in logs, logs  # the pod's user, fsGroup as a supplementary group
    assert "config hello" in logs and "apiserver v1." in logs, logs  # volume at its mountPath; apiserver on loopback
    assert "root-fs [Errno 30] Read-only file system: '/app/written'" in logs, logs

    # A real container: runc's child in PID and mount namespaces of its own, on the image's files.
    pid = sandbox.faults.pod_pid(namespace, "in-runc", "probe")
    assert pid is not None
    assert runc_evidence(pid) == []
    proc = Path(f"/proc/{pid}")
    uid_line = next(line for line in (proc / "status").read_text().splitlines() if line.startswith("Uid:"))
    assert uid_line.split()[1] == str(UID), uid_line
    assert (proc / "root" / "app").is_dir() and (proc / "root" / "tmp" / "written").read_text() == "ok"
    probed = wait_for(lambda: (proc / "root" / "tmp" / "probed").read_text().strip() if
                      (proc / "root" / "tmp" / "probed").exists() else "", timeout=30, what="the exec probe's file")
    assert probed == str(UID)

    sandbox.faults.crash_container(namespace, "in-runc", "probe")
    wait_for(lambda: (s := container_status(core, namespace)) is not None and s.restart_count == 1 and s.ready,
             timeout=60, what="the crashed container restarted and Ready")
    restarted = sandbox.faults.pod_pid(namespace, "in-runc", "probe")
    assert restarted not in (None, pid)
    assert "sigterm" not in sandbox.kubectl("-n", namespace, "logs", "in-runc", "--previous").stdout

    # Deletion: SIGTERM reaches the container's program, which ends long before the grace period.
    core.delete_namespaced_pod("in-runc", namespace)
    wait_for(lambda: not core.list_namespaced_pod(namespace).items, timeout=GRACE_SECONDS / 2,
             what="the pod gone before its grace period ends (SIGTERM delivered)")
    assert not Path(f"/proc/{restarted}").exists()


# The seed pod of a restore, when the operators run from the image: etcd's tools (a process here)
# stage a private data directory; the image's container (in runc, as the pod's user) moves it.
STAGE = "set -e; id -u > /var/etcd/staged-by; etcdutl version > /dev/null; mkdir -m 700 -p /var/etcd/restore/data; " \
        "echo member > /var/etcd/restore/data/db"
INSTALL = "import os; os.rename('/var/etcd/restore/data', '/var/etcd/data'); " \
          "print('installed by', os.getuid(), 'staged by', open('/var/etcd/staged-by').read().strip(), " \
          "open('/var/etcd/data/db').read().strip(), flush=True)"


def test_a_process_container_beside_a_runc_one_runs_as_the_pods_user(sandbox: Sandbox, namespace: str) -> None:
    """A pod mixing an etcd image (a host process here) and the built image (runc): the process
    runs as the pod's user too, so the runc container may move what it wrote, as on a node where
    both run as that user. (As root, the private directory it staged could not be moved.)"""
    repository, tag = local_image_reference()
    user = 65532
    core = k8s.CoreV1Api(sandbox.api_client())
    core.create_namespaced_pod(namespace, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "mixed"},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "runAsUser": user, "runAsGroup": user, "fsGroup": user},
            "initContainers": [{"name": "stage", "image": f"gcr.io/etcd-development/etcd:v{newest_etcd_version()}",
                                "command": ["sh", "-c", STAGE],
                                "volumeMounts": [{"name": "data", "mountPath": "/var/etcd"}]}],
            "containers": [{"name": "install", "image": f"{repository}:{tag}", "command": ["python3", "-c", INSTALL],
                            "volumeMounts": [{"name": "data", "mountPath": "/var/etcd"}]}],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
    })
    phase = wait_for(lambda: (p := core.read_namespaced_pod("mixed", namespace).status.phase) in ("Succeeded", "Failed")
                     and p, timeout=90, what="the mixed pod finished")
    logs = sandbox.kubectl("-n", namespace, "logs", "mixed", "-c", "install").stdout
    stage_logs = sandbox.kubectl("-n", namespace, "logs", "mixed", "-c", "stage").stdout
    assert phase == "Succeeded", f"{logs}\n{stage_logs}"
    assert f"installed by {user} staged by {user} member" in logs, logs
