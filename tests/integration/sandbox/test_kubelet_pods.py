"""The process kubelet against the real control plane: workloads, restarts, deletion, volumes, RBAC."""
from __future__ import annotations

import ipaddress
import json
import time
from pathlib import Path

import pytest

from kube_sandbox.config import HOST_IP, NODE_NAMES
from kube_sandbox.kubelet.sized_volumes import SIZED_STORAGE_CLASS
from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.sandbox.sandbox_objects import (
    Obj,
    apply,
    busybox_pod,
    container_status,
    get,
    is_ready,
    logs,
    phase_is,
    process_alive,
    running_and_ready,
    wait_for_object,
)

pytestmark = pytest.mark.sandbox


def pod_dir(sandbox: Sandbox, uid: str) -> Path:
    return sandbox.config.kubelet_dir / "pods" / uid


def test_deployment_pod_runs_through_the_replicaset_controller(sandbox: Sandbox, namespace: str) -> None:
    apply(sandbox, namespace, """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web}
        spec:
          replicas: 2
          selector: {matchLabels: {app: web}}
          template:
            metadata: {labels: {app: web}}
            spec:
              containers:
              - name: web
                image: python:3.11
                command: ["python", "-m", "http.server", "8080", "--bind", "$(POD_IP)"]
                env: [{name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}]
                readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 1}
        """)

    def ready_pods() -> list[Obj] | None:
        pods = get(sandbox, namespace, "pods", selector="app=web")["items"]
        ready = [p for p in pods if p["status"].get("phase") == "Running" and is_ready(p)]
        return ready if len(ready) == 2 else None

    found = wait_for(ready_pods, timeout=60, what="2 ready web pods")
    pods = found or []
    assert len({p["status"]["podIP"] for p in pods}) == 2
    for pod in pods:
        assert pod["spec"]["nodeName"] in NODE_NAMES
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
        assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network("127.0.0.0/8")
        assert pod["status"]["podIP"] != HOST_IP and pod["status"]["hostIP"] == HOST_IP
    wait_for(lambda: get(sandbox, namespace, "deployment", "web")["status"].get("readyReplicas") == 2,
             timeout=30, what="deployment readyReplicas=2")


def test_init_containers_env_and_config_volumes(sandbox: Sandbox, namespace: str) -> None:
    apply(sandbox, namespace, """
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: settings}
        data: {greeting: hello, mode: fast}
        ---
        apiVersion: v1
        kind: Secret
        metadata: {name: creds}
        stringData: {password: s3cret}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: configured, labels: {tier: backend}}
        spec:
          restartPolicy: Never
          initContainers:
          - name: first
            image: busybox
            command: ["sh", "-c", "echo from-init > /work/init.txt"]
            volumeMounts: [{name: work, mountPath: /work}]
          containers:
          - name: main
            image: debian:bookworm
            command: ["sh", "-c"]
            args:
            - >-
              cat /work/init.txt;
              echo "greeting=$(cat /etc/settings/greeting)";
              echo "password=$PASSWORD tier=$TIER";
              echo 'expanded=$(GREETING)-$(MISSING) escaped=$$(GREETING)';
              echo "mode=$CFG_mode"
            env:
            - {name: PASSWORD, valueFrom: {secretKeyRef: {name: creds, key: password}}}
            - {name: TIER, valueFrom: {fieldRef: {fieldPath: "metadata.labels['tier']"}}}
            - {name: GREETING, valueFrom: {configMapKeyRef: {name: settings, key: greeting}}}
            envFrom: [{prefix: CFG_, configMapRef: {name: settings}}]
            volumeMounts:
            - {name: work, mountPath: /work}
            - {name: settings, mountPath: /etc/settings}
          volumes:
          - {name: work, emptyDir: {}}
          - {name: settings, configMap: {name: settings, items: [{key: greeting, path: greeting}]}}
        """)
    finished = wait_for_object(lambda: phase_is(sandbox, namespace, "configured", "Succeeded"), timeout=60,
                        what="pod configured Succeeded")
    assert finished["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    output = logs(sandbox, namespace, "configured")
    assert "from-init" in output
    assert "greeting=hello" in output
    assert "password=s3cret tier=backend" in output
    assert "expanded=hello-$(MISSING) escaped=$(GREETING)" in output
    assert "mode=fast" in output


def test_crashed_container_restarts_and_keeps_its_empty_dir(sandbox: Sandbox, namespace: str) -> None:
    apply(sandbox, namespace, busybox_pod(
        "crashy", "echo run >> /data/runs; echo runs=$$(wc -l < /data/runs); exec sleep 3600",
        volumes=[{"name": "data", "emptyDir": {}}], mounts=[{"name": "data", "mountPath": "/data"}]))
    first = wait_for_object(lambda: running_and_ready(sandbox, namespace, "crashy"), timeout=30, what="crashy running")
    first_pid = sandbox.faults.pod_pid(namespace, "crashy", "main")
    assert first_pid is not None

    sandbox.faults.crash_container(namespace, "crashy", "main")

    def restarted() -> Obj | None:
        pod = running_and_ready(sandbox, namespace, "crashy")
        return pod if pod and container_status(pod)["restartCount"] >= 1 else None

    second = container_status(wait_for_object(restarted, timeout=30, what="crashy restarted once"))
    assert second["lastState"]["terminated"]["exitCode"] == 137
    assert second["containerID"] != container_status(first)["containerID"]
    assert sandbox.faults.pod_pid(namespace, "crashy", "main") not in (None, first_pid)
    assert "runs=2" in wait_for(lambda: logs(sandbox, namespace, "crashy"), timeout=10, what="crashy logs")
    # Polled like the current run's logs: under load one `kubectl logs` may fail (empty stdout).
    assert "runs=1" in wait_for(lambda: logs(sandbox, namespace, "crashy", "--previous"), timeout=10,
                                what="crashy's previous logs")


def test_a_pod_marked_unready_by_the_node_lifecycle_controller_is_reported_ready_again(
        sandbox: Sandbox, namespace: str) -> None:
    """What the node-lifecycle controller does to every pod of a node whose heartbeat lapsed (an
    apiserver restart can make it lapse): Ready=False, reason NodeNotReady. The kubelet, whose own
    view did not change, publishes Ready=True again (it once never did: the pod stayed unready)."""
    apply(sandbox, namespace, busybox_pod("steady", "exec sleep 3600"))
    wait_for(lambda: running_and_ready(sandbox, namespace, "steady"), timeout=60, what="pod steady ready")
    overwrite = {"status": {"conditions": [
        {"type": "Ready", "status": "False", "reason": "NodeNotReady", "message": "Node is not ready"}]}}
    sandbox.kubectl("-n", namespace, "patch", "pod", "steady", "--subresource=status", "--type=strategic",
                    "-p", json.dumps(overwrite))
    wait_for(lambda: running_and_ready(sandbox, namespace, "steady"), timeout=30,
             what="pod steady ready again after Ready=False was written over its status")


def test_failing_liveness_probe_restarts_the_container(sandbox: Sandbox, namespace: str) -> None:
    apply(sandbox, namespace, busybox_pod(
        "unhealthy", "exec sleep 3600",
        livenessProbe={"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 2}))
    wait_for(lambda: container_status(get(sandbox, namespace, "pod", "unhealthy")).get("restartCount", 0) >= 2,
             timeout=60, what="two liveness restarts")
    events = get(sandbox, namespace, "events")["items"]
    assert any(e["reason"] == "Unhealthy" and "Liveness" in e["message"] for e in events)


def test_deleted_pod_gets_sigterm_then_sigkill_after_the_grace_period(sandbox: Sandbox, namespace: str) -> None:
    apply(sandbox, namespace, busybox_pod(
        "stubborn", "trap '' TERM; echo started; while true; do sleep 1; done", grace=3,
        volumes=[{"name": "scratch", "emptyDir": {}}], mounts=[{"name": "scratch", "mountPath": "/scratch"}]))
    running = wait_for_object(lambda: running_and_ready(sandbox, namespace, "stubborn"), timeout=30, what="stubborn running")
    uid = running["metadata"]["uid"]
    pid = sandbox.faults.pod_pid(namespace, "stubborn", "main")
    assert pid is not None and pod_dir(sandbox, uid).is_dir()

    deleted_at = time.monotonic()
    sandbox.kubectl("delete", "-n", namespace, "pod", "stubborn", "--wait=false")
    wait_for(lambda: not process_alive(pid), timeout=30, what="the TERM-ignoring process to be killed")
    lived = time.monotonic() - deleted_at
    wait_for(lambda: get(sandbox, namespace, "pod", "stubborn") is None, timeout=30, what="pod object deleted")

    assert lived >= 2.5, f"killed after {lived:.1f}s, before its 3s grace period ended"
    assert not pod_dir(sandbox, uid).exists(), "emptyDir and pod directory should be removed"


def test_deleted_pod_that_handles_sigterm_stops_early(sandbox: Sandbox, namespace: str) -> None:
    apply(sandbox, namespace, busybox_pod(
        "polite", "trap 'echo bye; exit 0' TERM; while true; do sleep 0.2; done", grace=60))
    wait_for(lambda: running_and_ready(sandbox, namespace, "polite"), timeout=30, what="polite running")
    pid = sandbox.faults.pod_pid(namespace, "polite", "main")
    assert pid is not None
    sandbox.kubectl("delete", "-n", namespace, "pod", "polite", "--wait=false")
    # The grace period is 60s; a pod that exits on SIGTERM is gone long before.
    wait_for(lambda: get(sandbox, namespace, "pod", "polite") is None, timeout=20,
             what="pod deleted well within its grace period")
    assert not process_alive(pid)


def test_persistent_volume_claim_outlives_the_pod(sandbox: Sandbox, namespace: str) -> None:
    apply(sandbox, namespace, """
        apiVersion: v1
        kind: PersistentVolumeClaim
        metadata: {name: data}
        spec:
          accessModes: [ReadWriteOnce]
          resources: {requests: {storage: 1Gi}}
        """)
    claim_volume = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    mount = [{"name": "data", "mountPath": "/var/lib/data"}]
    apply(sandbox, namespace, busybox_pod("writer", "echo kept > /var/lib/data/file; exec sleep 3600",
                                          volumes=claim_volume, mounts=mount))
    wait_for(lambda: running_and_ready(sandbox, namespace, "writer"), timeout=30, what="writer running")
    claim = wait_for_object(lambda: (c := get(sandbox, namespace, "pvc", "data")) and c["status"].get("phase") == "Bound"
                     and c, timeout=15, what="claim Bound")
    assert claim["status"]["capacity"] == {"storage": "1Gi"}
    directory = sandbox.config.kubelet_dir / "pvc" / namespace / f"data-{claim['metadata']['uid']}"
    wait_for(lambda: (directory / "file").exists(), timeout=10, what=f"{directory}/file")

    sandbox.kubectl("delete", "-n", namespace, "pod", "writer", "--grace-period=1")
    assert get(sandbox, namespace, "pod", "writer") is None
    assert (directory / "file").read_text() == "kept\n"

    apply(sandbox, namespace, busybox_pod("reader", "cat /var/lib/data/file; exec sleep 3600",
                                          volumes=claim_volume, mounts=mount))
    wait_for(lambda: running_and_ready(sandbox, namespace, "reader"), timeout=30, what="reader running")
    assert "kept" in wait_for(lambda: logs(sandbox, namespace, "reader"), timeout=10, what="reader output")

    volume = claim["spec"]["volumeName"]
    assert get(sandbox, "", "pv", volume)["spec"]["hostPath"]["path"] == str(directory)
    sandbox.kubectl("delete", "-n", namespace, "pod", "reader", "--grace-period=1")
    sandbox.kubectl("delete", "-n", namespace, "pvc", "data", "--wait=false")
    wait_for(lambda: get(sandbox, "", "pv", volume) is None, timeout=30, what=f"volume {volume} of the deleted claim gone")


def test_a_sized_claim_has_no_space_beyond_its_request_and_the_fault_takes_the_rest(sandbox: Sandbox,
                                                                                   namespace: str) -> None:
    """A claim of the StorageClass kube-sandbox-sized is a tmpfs of its request: writes beyond it
    fail with ENOSPC; fill_volume leaves it no room and keeps what it holds; None gives it back."""
    assert get(sandbox, "", "storageclass", SIZED_STORAGE_CLASS) is not None
    apply(sandbox, namespace, {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "sized"},
                               "spec": {"storageClassName": SIZED_STORAGE_CLASS, "accessModes": ["ReadWriteOnce"],
                                        "resources": {"requests": {"storage": "1Mi"}}}})
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "sized"}}]
    mounts = [{"name": "data", "mountPath": "/data"}]
    apply(sandbox, namespace, busybox_pod(
        "writer", "head -c 524288 /dev/zero > /data/half && echo wrote-half; "
                  "head -c 1048576 /dev/zero > /data/more || echo refused-more; rm -f /data/more; exec sleep 3600",
        volumes=volumes, mounts=mounts))
    said = wait_for(lambda: "refused-more" in (out := logs(sandbox, namespace, "writer")) and out, timeout=30,
                    what="the writer's second write refused")
    assert "wrote-half" in said and "No space left on device" in said, said
    sandbox.kubectl("delete", "-n", namespace, "pod", "writer", "--grace-period=1")

    assert sandbox.faults.fill_volume(namespace, "sized", leave_bytes=0).startswith("filled")
    apply(sandbox, namespace, busybox_pod(
        "filled", "wc -c < /data/half; head -c 1 /dev/zero > /data/one || echo refused-one; exec sleep 3600",
        volumes=volumes, mounts=mounts))
    said = wait_for(lambda: "refused-one" in (out := logs(sandbox, namespace, "filled")) and out, timeout=30,
                    what="a byte refused on the filled volume")
    assert "524288" in said and "No space left on device" in said, said
    sandbox.kubectl("delete", "-n", namespace, "pod", "filled", "--grace-period=1")

    assert sandbox.faults.fill_volume(namespace, "sized", leave_bytes=None).startswith("lifted")
    apply(sandbox, namespace, busybox_pod("lifted", "echo x > /data/one && echo wrote-one; exec sleep 3600",
                                          volumes=volumes, mounts=mounts))
    wait_for(lambda: "wrote-one" in logs(sandbox, namespace, "lifted"), timeout=30, what="a byte written once lifted")


def test_cronjob_spawns_a_job_whose_pod_succeeds(sandbox: Sandbox, namespace: str) -> None:
    apply(sandbox, namespace, """
        apiVersion: batch/v1
        kind: CronJob
        metadata: {name: tick}
        spec:
          schedule: "*/1 * * * *"
          jobTemplate:
            spec:
              backoffLimit: 0
              template:
                spec:
                  restartPolicy: Never
                  containers:
                  - name: tick
                    image: busybox
                    command: ["sh", "-c", "echo tick from $HOSTNAME"]
        """)

    def succeeded_pod() -> Obj | None:
        pods = get(sandbox, namespace, "pods")["items"]
        return next((p for p in pods if p["status"].get("phase") == "Succeeded"), None)

    # The schedule fires at the next full minute; the controller checks every 10s.
    done = wait_for_object(succeeded_pod, timeout=150, what="a CronJob pod in phase Succeeded")
    owner = done["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "Job"
    wait_for(lambda: get(sandbox, namespace, "job", owner["name"])["status"].get("succeeded") == 1,
             timeout=30, what=f"job {owner['name']} succeeded=1")
    assert f"tick from {done['metadata']['name']}" in logs(sandbox, namespace, done["metadata"]["name"])


IN_CLUSTER_CLIENT = """
import base64, json, os, pathlib
from kubernetes import client
sa = pathlib.Path(os.environ["KUBERNETES_SERVICE_ACCOUNT_DIR"])
payload = (sa / "token").read_text().split(".")[1]
claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
print("bound to pod:", claims["kubernetes.io"]["pod"]["name"], claims["kubernetes.io"]["pod"]["uid"])
print("files:", sorted(p.name for p in sa.iterdir() if not p.name.startswith("..")))  # ..data: the atomic writer's
c = client.Configuration()
c.host = f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT']}"
c.ssl_ca_cert = str(sa / "ca.crt")
c.api_key = {"authorization": "Bearer " + (sa / "token").read_text()}
api = client.CoreV1Api(client.ApiClient(c))
ns = (sa / "namespace").read_text()
print("pods:", len(api.list_namespaced_pod(ns).items))
try:
    api.list_namespaced_secret(ns)
    print("secrets: allowed")
except client.ApiException as e:
    print("secrets:", e.status)
"""


def test_service_account_token_gives_in_cluster_access_limited_by_rbac(sandbox: Sandbox, namespace: str) -> None:
    apply(sandbox, namespace, f"""
        apiVersion: v1
        kind: ServiceAccount
        metadata: {{name: reader}}
        ---
        apiVersion: rbac.authorization.k8s.io/v1
        kind: Role
        metadata: {{name: pod-reader}}
        rules: [{{apiGroups: [""], resources: [pods], verbs: [get, list]}}]
        ---
        apiVersion: rbac.authorization.k8s.io/v1
        kind: RoleBinding
        metadata: {{name: reader-reads-pods}}
        roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}}
        subjects: [{{kind: ServiceAccount, name: reader, namespace: {namespace}}}]
        """)
    manifest = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "in-cluster"},
        "spec": {"serviceAccountName": "reader", "restartPolicy": "Never", "containers": [
            {"name": "client", "image": "python:3.11", "command": ["python", "-c", IN_CLUSTER_CLIENT]}]},
    }
    apply(sandbox, namespace, manifest)
    done = wait_for_object(lambda: phase_is(sandbox, namespace, "in-cluster", "Succeeded"), timeout=60,
                           what="in-cluster pod done")
    output = logs(sandbox, namespace, "in-cluster")
    assert "pods: 1" in output
    assert "secrets: 403" in output
    # A bound token from the TokenRequest API, in the volume the apiserver injected (no token Secret).
    assert f"bound to pod: in-cluster {done['metadata']['uid']}" in output
    assert "files: ['ca.crt', 'namespace', 'token']" in output
    assert any(v["name"].startswith("kube-api-access-") for v in done["spec"]["volumes"])
    secrets = get(sandbox, namespace, "secrets")["items"]
    assert not [s for s in secrets if s["type"] == "kubernetes.io/service-account-token"]


def test_unknown_image_is_reported_like_a_failed_pull(sandbox: Sandbox, namespace: str) -> None:
    apply(sandbox, namespace, """
        apiVersion: v1
        kind: Pod
        metadata: {name: future}
        spec:
          containers: [{name: etcd, image: "quay.io/coreos/etcd:v9.9.9"}]
        """)

    def waiting() -> Obj | None:
        state = container_status(get(sandbox, namespace, "pod", "future")).get("state", {}).get("waiting") or {}
        return state if state.get("reason") in ("ErrImagePull", "ImagePullBackOff") else None

    state = wait_for_object(waiting, timeout=30, what="container waiting with ErrImagePull")
    assert "quay.io/coreos/etcd:v9.9.9" in state["message"]
    assert get(sandbox, namespace, "pod", "future")["status"]["phase"] == "Pending"
    events = get(sandbox, namespace, "events")["items"]
    assert any(e["reason"] == "Failed" and "ErrImagePull" in e["message"] for e in events)


RESTRICTED_SECURITY_CONTEXT = {
    "runAsNonRoot": True, "runAsUser": 1000, "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
}


def test_pods_of_the_restricted_pod_security_profile_run(sandbox: Sandbox, namespace: str) -> None:
    """Pod Security admission enforces `restricted`; the kubelet accepts (and does not enforce) the fields."""
    sandbox.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    refused = sandbox.kubectl("apply", "-n", namespace, "-f", "-", check=False,
                              input=json.dumps(busybox_pod("loose", "exec sleep 3600")))
    assert refused.returncode != 0 and "restricted" in refused.stderr, refused.stderr
    pod = busybox_pod("strict", "echo running; exec sleep 3600", securityContext=RESTRICTED_SECURITY_CONTEXT)
    pod["spec"]["securityContext"] = {"runAsNonRoot": True, "runAsUser": 1000, "fsGroup": 2000,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    apply(sandbox, namespace, pod)
    wait_for(lambda: running_and_ready(sandbox, namespace, "strict"), timeout=30, what="restricted pod running")
    assert "running" in wait_for(lambda: logs(sandbox, namespace, "strict"), timeout=10, what="strict output")
