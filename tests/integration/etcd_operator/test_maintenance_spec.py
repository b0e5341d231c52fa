"""The day-two fields (issue 21, items 1-2) against the real API server and etcd: bad values are
refused by the CRD schema naming the field; a backend quota the PVC cannot hold is refused by the
operator (status and a Warning event say why) and changes nothing in the running cluster; a good
one reaches etcd, whose metrics listener answers on every member."""
from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.operator_clusters import GROUP, VERSION, Clusters, etcd_cluster
from tests.integration.etcd_operator.status_history import conditions

POD_POLICY_HASH = "etcd.database.coreos.com/pod-policy-hash"
PVC_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
METRICS_PORT = 2381

REFUSED_SPECS = [
    pytest.param({"compaction": {"retention": "-1h"}}, "spec.compaction.retention", id="retention-negative"),
    pytest.param({"compaction": {"retention": "abc"}}, "spec.compaction.retention", id="retention-unparsable"),
    pytest.param({"compaction": {"mode": "hourly"}}, "spec.compaction.mode", id="mode-unknown"),
    pytest.param({"defragmentation": {"thresholdPercent": 0}}, "spec.defragmentation.thresholdPercent",
                 id="threshold-0"),
    pytest.param({"defragmentation": {"thresholdPercent": 101}}, "spec.defragmentation.thresholdPercent",
                 id="threshold-101"),
    pytest.param({"backendQuota": "8GB"}, "spec.backendQuota", id="quota-bad-unit"),
    pytest.param({"backendQuota": "-1Gi"}, "spec.backendQuota", id="quota-negative"),
    pytest.param({"defragmentation": {"minimumFreeSize": "lots"}}, "spec.defragmentation.minimumFreeSize",
                 id="minimum-free-bad"),
    pytest.param({"defragmentation": {"window": {"start": "2:00", "duration": "4h"}}},
                 "spec.defragmentation.window.start", id="window-start"),
]


@pytest.mark.parametrize(("spec", "field"), REFUSED_SPECS)
def test_schema_refuses_bad_maintenance_fields(clusters: Clusters, spec: dict[str, Any], field: str) -> None:
    manifest = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "EtcdCluster", "metadata": {"name": "refused"},
                "spec": {"size": 1, **spec}}
    result = clusters.sandbox.kubectl("-n", clusters.namespace, "apply", "-f", "-", input=json.dumps(manifest), check=False)
    assert result.returncode != 0, f"apiserver accepted {spec}: {result.stdout}"
    assert field in result.stderr, f"error does not name {field}: {result.stderr}"
    missing = clusters.sandbox.kubectl("-n", clusters.namespace, "get", "etcd", "refused", check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr, missing.stdout


def _pods(clusters: Clusters, name: str) -> list[tuple[str, str, str]]:
    """(name, uid, pod-policy hash) of each live member pod."""
    return sorted(
        (p.metadata.name, p.metadata.uid, (p.metadata.annotations or {}).get(POD_POLICY_HASH, ""))
        for p in clusters.live_pods(name)
    )


def test_quota_too_big_for_the_volume_is_refused_and_changes_nothing(clusters: Clusters) -> None:
    clusters.create(etcd_cluster("quota", size=1, backendQuota="256Mi", pod={"persistentVolumeClaimSpec": PVC_SPEC}))
    clusters.wait_running("quota", ready=1, timeout=120)
    before = _pods(clusters, "quota")
    clusters.put("quota", "kept", "yes")

    clusters.patch_spec("quota", {"backendQuota": "1Gi"})
    status = clusters.wait_status("quota", lambda s: s.get("reason") == "InvalidSpec", "reason InvalidSpec", timeout=60)
    assert status["phase"] == "Failed", status
    message = status["message"]
    assert "spec.backendQuota 1Gi does not fit" in message and "1Gi" in message and "2304Mi" in message, message
    assert conditions(status)["Degraded"] == ("True", "InvalidSpec"), status["conditions"]
    event = wait_for(
        lambda: next((e for e in clusters.events("quota") if e.reason == "InvalidSpec"), None),
        timeout=30, what="an InvalidSpec event",
    )
    assert event.type == "Warning" and "backendQuota" in event.message, (event.type, event.message)
    # The refused spec did not reach the member: same pod, same pod policy, data still served.
    assert _pods(clusters, "quota") == before
    assert clusters.get_value("quota", "kept") == "yes"

    clusters.patch_spec("quota", {"backendQuota": "256Mi"})
    status = clusters.wait_running("quota", ready=1, timeout=60)
    assert status.get("reason") != "InvalidSpec", status
    assert _pods(clusters, "quota") == before


def _scrape(pod_ip: str, path: str) -> tuple[int, str]:
    with urllib.request.urlopen(f"http://{pod_ip}:{METRICS_PORT}{path}", timeout=10) as response:
        return response.status, response.read().decode()


def _metric(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def test_quota_and_compaction_reach_etcd_and_every_member_serves_metrics(clusters: Clusters) -> None:
    spec = {"backendQuota": "16Mi", "compaction": {"mode": "revision", "retention": "1000"}}
    clusters.create(etcd_cluster("tuned", size=1, **spec))
    clusters.wait_running("tuned", ready=1, timeout=120)
    [pod] = clusters.live_pods("tuned")
    command = pod.spec.containers[0].command
    assert "--quota-backend-bytes=16777216" in command, command
    assert "--auto-compaction-mode=revision" in command and "--auto-compaction-retention=1000" in command, command
    annotations = pod.metadata.annotations or {}
    assert annotations.get("prometheus.io/scrape") == "true" and annotations.get("prometheus.io/port") == "2381"
    status, body = _scrape(pod.status.pod_ip, "/health?exclude=NOSPACE")
    assert status == 200 and json.loads(body)["health"] == "true", body
    _, metrics = _scrape(pod.status.pod_ip, "/metrics")
    assert _metric(metrics, "etcd_server_quota_backend_bytes") == 16777216, \
        [line for line in metrics.splitlines() if "quota" in line]
