"""Each pod in its own cgroups: memory limits end in OOMKilled, CPU limits are applied, pods can be
cut off from each other (both ways, one way, with their open connections reset) and healed, and a
pod's disk writes can be slowed. Against the real control plane and the process kubelet."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kube_sandbox.kubelet.cgroups import machine_layout
from kube_sandbox.kubelet.settings import instance_of
from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.sandbox.sandbox_objects import (
    Obj,
    apply,
    container_status,
    get,
    logs,
    running_and_ready,
    wait_for_object,
)

pytestmark = pytest.mark.sandbox

if machine_layout() is None:  # the machines CI runs on have it; say so rather than skip quietly
    pytest.fail("this machine has no hybrid cgroup layout writable by root: pods would run without cgroups",
                pytrace=False)

# Serves GET / over HTTP/1.1 keep-alive and asks the other pod every 0.2 s over one persistent
# connection, printing "<n> ok" or "<n> fail <error>" (a failed connection is dropped and reopened).
PEER_SCRIPT = r"""
import http.client, http.server, os, threading, time

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer((os.environ["POD_IP"], 8080), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
connection, n = None, 0
while True:
    n += 1
    try:
        if connection is None:
            connection = http.client.HTTPConnection(os.environ["PEER"], 8080, timeout=1)
        connection.request("GET", "/")
        connection.getresponse().read()
        print(n, "ok", flush=True)
    except Exception as e:
        print(n, "fail", type(e).__name__, flush=True)
        connection.close()
        connection = None
    time.sleep(0.2)
"""


def peer_pod(name: str, peer: str, namespace: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"hostname": name, "subdomain": "peers", "terminationGracePeriodSeconds": 1, "containers": [{
                "name": "main", "image": "python:3.11", "command": ["python", "-c", PEER_SCRIPT],
                "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                        {"name": "PEER", "value": f"{peer}.peers.{namespace}.svc.cluster.local"}],
                "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1}}]}}


def answers(sandbox: Sandbox, namespace: str, pod: str) -> list[tuple[int, str]]:
    """(request number, "ok" or the error name) of every request the pod made so far."""
    found = []
    for line in logs(sandbox, namespace, pod).splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0].isdigit():
            found.append((int(fields[0]), fields[1] if fields[1] == "ok" else " ".join(fields[2:])))
    return found


def after(sandbox: Sandbox, namespace: str, pod: str, start: int) -> list[str]:
    return [result for n, result in answers(sandbox, namespace, pod) if n > start]


def last_request(sandbox: Sandbox, namespace: str, pod: str) -> int:
    found = answers(sandbox, namespace, pod)
    return found[-1][0] if found else 0


def wait_until_answered(sandbox: Sandbox, namespace: str, pod: str, start: int, what: str) -> None:
    wait_for(lambda: after(sandbox, namespace, pod, start)[-3:] == ["ok"] * 3, timeout=30,
             what=f"{pod}: three answers in a row {what}")


def wait_until_cut(sandbox: Sandbox, namespace: str, pod: str, start: int) -> list[str]:
    failures = wait_for(lambda: (lambda r: r if len(r) >= 3 and "ok" not in r[-3:] else None)(
        after(sandbox, namespace, pod, start)), timeout=30, what=f"{pod}: three failures in a row")
    return failures or []


def test_pods_are_cut_off_from_each_other_and_healed(sandbox: Sandbox, namespace: str) -> None:
    for name, peer in (("alpha", "beta"), ("beta", "alpha"), ("gamma", "alpha")):
        apply(sandbox, namespace, peer_pod(name, peer, namespace))
    for name in ("alpha", "beta", "gamma"):
        wait_for_object(lambda name=name: running_and_ready(sandbox, namespace, name), timeout=60,
                        what=f"{name} ready")
        wait_until_answered(sandbox, namespace, name, 0, "before any cut")

    # Both ways: alpha and beta cannot reach each other; the connection each holds is reset at once
    # (not left to time out); gamma still reaches alpha; the kubelet's probes still reach both.
    start = {name: last_request(sandbox, namespace, name) for name in ("alpha", "beta", "gamma")}
    cut = sandbox.faults.partition([(namespace, "alpha")], [(namespace, "beta")])
    for name in ("alpha", "beta"):
        failures = wait_until_cut(sandbox, namespace, name, start[name])
        first = next(f for f in failures if f != "ok")
        assert first != "TimeoutError" and first != "timeout", (
            f"{name}'s open connection was not reset by the cut: {failures}")
    assert after(sandbox, namespace, "gamma", start["gamma"]) and "ok" in after(sandbox, namespace, "gamma",
                                                                                  start["gamma"])[-3:]
    assert running_and_ready(sandbox, namespace, "alpha") and running_and_ready(sandbox, namespace, "beta"), (
        "the kubelet must keep seeing cut-off pods (its probes are not cut)")
    assert sandbox.faults.heal(cut) == [cut]
    for name in ("alpha", "beta"):
        wait_until_answered(sandbox, namespace, name, last_request(sandbox, namespace, name), "after healing")

    # One way, gamma -> alpha: gamma's packets to alpha are dropped, so gamma's requests fail; the
    # cut names only that pair, so beta (not in it) keeps reaching alpha.
    start = {name: last_request(sandbox, namespace, name) for name in ("beta", "gamma")}
    cut = sandbox.faults.partition([(namespace, "gamma")], [(namespace, "alpha")], one_way=True)
    wait_until_cut(sandbox, namespace, "gamma", start["gamma"])
    wait_until_answered(sandbox, namespace, "beta", last_request(sandbox, namespace, "beta"), "during gamma's cut")
    sandbox.faults.heal(cut)
    wait_until_answered(sandbox, namespace, "gamma", last_request(sandbox, namespace, "gamma"), "after healing")


def test_memory_limit_ends_in_oomkilled_and_cpu_limit_is_applied(sandbox: Sandbox, namespace: str) -> None:
    # Holds 40 MiB, then asks for 200 MiB more under a 64 MiB limit: the kernel ends it.
    apply(sandbox, namespace, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hungry"},
        "spec": {"restartPolicy": "Always", "containers": [{
            "name": "main", "image": "python:3.11",
            "command": ["python", "-c", "import time; a = bytearray(40 << 20); print('holding', flush=True); "
                        "time.sleep(1); b = bytearray(200 << 20); print('not reached', flush=True)"],
            "resources": {"limits": {"memory": "64Mi", "cpu": "250m"}, "requests": {"memory": "64Mi", "cpu": "100m"}},
        }]}})

    def oom_killed_twice() -> Obj | None:
        pod = get(sandbox, namespace, "pod", "hungry")
        status = container_status(pod) if pod else {}
        last = ((status.get("lastState") or {}).get("terminated") or {})
        return pod if status.get("restartCount", 0) >= 2 and last.get("reason") == "OOMKilled" else None

    pod = wait_for_object(oom_killed_twice, timeout=90, what="hungry OOMKilled and restarted twice")
    terminated = container_status(pod)["lastState"]["terminated"]
    assert terminated["exitCode"] == 137 and terminated.get("signal", 9) == 9

    uid = pod["metadata"]["uid"]
    layout = machine_layout()
    assert layout is not None
    group = f"kube-sandbox-{instance_of(sandbox.config.kubelet_dir)}"
    memory_group = layout.memory / group / f"pod{uid}" / "main"
    cpu_group = layout.cpu / group / f"pod{uid}" / "main"
    assert int((memory_group / "memory.limit_in_bytes").read_text()) == 64 << 20
    assert int((cpu_group / "cpu.cfs_quota_us").read_text()) == 25_000  # 250m of a 100 ms period
    assert int((cpu_group / "cpu.shares").read_text()) == 103  # 100m * 1024, rounded up

    # Its processes are in the pod's groups from the first one on (read from /proc while it runs).
    pid = wait_for(lambda: sandbox.faults.pod_pid(namespace, "hungry", "main"), timeout=60,
                   what="hungry running again")
    groups = Path(f"/proc/{pid}/cgroup").read_text()
    assert re.search(rf"^0::/{group}/pod{uid}$", groups, re.M), groups
    assert re.search(rf":memory:/{group}/pod{uid}/main$", groups, re.M), groups


def test_a_slowed_disk_slows_the_pods_synced_writes(sandbox: Sandbox, namespace: str) -> None:
    # Every round: 20 synced 4 KiB writes into its emptyDir, then "<round> <seconds>".
    script = ("i=0; while true; do i=$((i+1)); s=$(date +%s%N); "
              "dd if=/dev/zero of=/data/f bs=4k count=20 oflag=dsync 2>/dev/null; "
              "echo $i $(( ($(date +%s%N) - s) / 1000000 )); done")
    apply(sandbox, namespace, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "writer"},
        "spec": {"terminationGracePeriodSeconds": 1, "volumes": [{"name": "data", "emptyDir": {}}],
                 "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", script],
                                 "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}})

    def rounds() -> list[tuple[int, int]]:
        return [(int(a), int(b)) for a, b in re.findall(r"^(\d+) (\d+)$", logs(sandbox, namespace, "writer"), re.M)]

    wait_for(lambda: len(rounds()) >= 3, timeout=60, what="writer's first rounds")
    sandbox.faults.slow_disk(namespace, "writer", write_iops=10)
    throttled_from = rounds()[-1][0] + 1  # a round under way may have begun before the throttle
    slow = wait_for(lambda: [ms for n, ms in rounds() if n > throttled_from][:2] or None, timeout=60,
                    what="two rounds under the throttle")
    # 20 synced writes at 10 writes/s take at least 2 s whatever else the machine does.
    assert slow is not None and min(slow) >= 1900, slow
    sandbox.faults.slow_disk(namespace, "writer")
    lifted_from = rounds()[-1][0] + 1
    fast = wait_for(lambda: [ms for n, ms in rounds() if n > lifted_from][:3] or None, timeout=60,
                    what="rounds after the throttle is lifted")
    assert fast is not None and min(fast) < min(slow) / 2, (fast, slow)
