"""Bad specs get a clear answer: the CRD schema refuses what it can describe; what it cannot (an
etcd version we do not support) fails the cluster with a reason and a Warning event, changes
nothing, and recovers once fixed. Other clusters are unaffected throughout."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kube_sandbox.config import CHECKOUT_DIR
from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.operator_clusters import DEFAULT_VERSION, GROUP, VERSION, Clusters, etcd_cluster
from tests.integration.etcd_operator.status_history import conditions

REFUSED_SPECS = [
    pytest.param({"size": 0}, "spec.size", id="size-0"),
    pytest.param({"size": "three"}, "spec.size", id="size-three"),
    pytest.param({"size": 8}, "spec.size", id="size-8"),
    pytest.param({"size": 1, "version": "banana"}, "spec.version", id="version-banana"),
    pytest.param({"size": 1, "paused": "yes"}, "spec.paused", id="paused-yes"),
]


@pytest.mark.parametrize(("spec", "field"), REFUSED_SPECS)
def test_schema_refuses_invalid_spec(clusters: Clusters, spec: dict[str, Any], field: str) -> None:
    manifest = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "EtcdCluster", "metadata": {"name": "refused"}, "spec": spec}
    result = clusters.sandbox.kubectl("-n", clusters.namespace, "apply", "-f", "-", input=json.dumps(manifest), check=False)
    assert result.returncode != 0, f"apiserver accepted {spec}: {result.stdout}"
    assert field in result.stderr, f"error does not name {field}: {result.stderr}"
    missing = clusters.sandbox.kubectl("-n", clusters.namespace, "get", "etcd", "refused", check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr, missing.stdout


def _pod_uid(clusters: Clusters, name: str) -> list[str]:
    return sorted(p.metadata.uid for p in clusters.live_pods(name))


def test_unsupported_version_fails_clearly_and_recovers_when_fixed(clusters: Clusters) -> None:
    clusters.create(etcd_cluster("steady", size=1))
    clusters.wait_running("steady", ready=1, timeout=120)
    steady_pods = _pod_uid(clusters, "steady")

    clusters.create(etcd_cluster("future", size=1, version="9.9.9"))
    status = clusters.wait_status("future", lambda s: s.get("phase") == "Failed", "phase Failed", timeout=60)
    assert status.get("reason") == "InvalidSpec", status
    assert "9.9.9" in status["message"] and "supported" in status["message"], status["message"]
    assert conditions(status)["Degraded"] == ("True", "InvalidSpec"), status["conditions"]
    event = wait_for(
        lambda: next((e for e in clusters.events("future") if e.reason == "InvalidSpec"), None),
        timeout=30, what="an InvalidSpec event",
    )
    assert event.type == "Warning" and "9.9.9" in event.message, (event.type, event.message)
    printed = clusters.sandbox.kubectl("-n", clusters.namespace, "get", "etcd", "future").stdout
    assert "Failed" in printed, printed
    # nothing was created for it, and the neighbour did not notice
    assert clusters.pods("future") == []
    assert _pod_uid(clusters, "steady") == steady_pods
    assert clusters.status("steady")["phase"] == "Running"

    clusters.patch_spec("future", {"version": DEFAULT_VERSION})
    status = clusters.wait_running("future", ready=1, timeout=120)
    assert status["currentVersion"] == DEFAULT_VERSION and status.get("reason") != "InvalidSpec", status
    clusters.put("future", "fixed", "yes")
    assert clusters.get_value("future", "fixed") == "yes"
    steady = clusters.wait_running("steady", ready=1, timeout=10)
    assert steady["phase"] == "Running" and _pod_uid(clusters, "steady") == steady_pods


def test_coreos_example_manifest_applies_unchanged_and_runs(clusters: Clusters) -> None:
    example = Path(CHECKOUT_DIR) / "examples" / "example-etcd-cluster.yaml"
    clusters.sandbox.kubectl("-n", clusters.namespace, "apply", "-f", str(example))
    status = clusters.wait_running("example-etcd-cluster", ready=3, timeout=180)
    assert status["currentVersion"] == DEFAULT_VERSION
    spec = clusters.get("example-etcd-cluster")["spec"]
    assert spec["size"] == 3 and spec["repository"] == "quay.io/coreos/etcd", spec
