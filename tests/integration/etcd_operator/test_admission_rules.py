"""The CEL rules of the EtcdCluster CRD against the real API server: what the operator would
refuse later as InvalidSpec (reserved labels and annotations, one TLS half, a bare-number or zero
compaction retention) is refused at `kubectl apply`, naming the field and the offending value;
the examples and a CoreOS manifest with every optional section still pass admission.
(Reserved etcdEnv names are left to the operator: see tests/unit/etcd_operator/test_crd_validation_rules.py.)"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_sandbox.config import CHECKOUT_DIR
from tests.integration.etcd_operator.operator_clusters import GROUP, VERSION, Clusters

KIND = "EtcdCluster"

# (spec, the field the refusal names, what else it names)
REFUSED_SPECS = [
    pytest.param({"pod": {"labels": {"team": "db", "app": "mine"}}}, "spec.pod.labels", "may not set app",
                 id="label-app"),
    pytest.param({"pod": {"labels": {"etcd.database.coreos.com/serving": "true"}}}, "spec.pod.labels",
                 "etcd.database.coreos.com/serving", id="label-serving"),
    pytest.param({"pod": {"annotations": {"etcd.version": "3.5.0"}}}, "spec.pod.annotations", "etcd.version",
                 id="annotation-version"),
    pytest.param({"TLS": {"static": {"operatorSecret": "client"}}}, "spec.TLS.static", "member.serverSecret",
                 id="tls-operator-secret-alone"),
    pytest.param({"TLS": {"static": {"member": {"peerSecret": "p", "serverSecret": "s"}}}}, "spec.TLS.static",
                 "operatorSecret", id="tls-server-secret-alone"),
    pytest.param({"compaction": {"retention": 24}}, "spec.compaction.retention", "24 has no unit",
                 id="periodic-integer"),
    pytest.param({"compaction": {"mode": "periodic", "retention": "24"}}, "spec.compaction.retention",
                 "24 has no unit", id="periodic-bare-number"),
    pytest.param({"compaction": {"retention": "0m"}}, "spec.compaction.retention", "0m is zero", id="periodic-zero"),
    pytest.param({"compaction": {"mode": "revision", "retention": "0"}}, "spec.compaction.retention", "0 is zero",
                 id="revision-zero"),
    pytest.param({"compaction": {"mode": "revision", "retention": "1h"}}, "spec.compaction.retention",
                 "not a number of revisions", id="revision-duration"),
]


def _manifest(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": name}, "spec": spec}


def _dry_run_apply(clusters: Clusters, manifest: dict[str, Any]) -> None:
    result = clusters.sandbox.kubectl("-n", clusters.namespace, "apply", "--dry-run=server", "-f", "-",
                                      input=json.dumps(manifest), check=False)
    assert result.returncode == 0, f"apiserver refused {manifest['metadata']['name']}:\n{result.stderr}"


@pytest.mark.parametrize(("spec", "field", "named"), REFUSED_SPECS)
def test_admission_refuses_what_the_operator_would_fail(
    clusters: Clusters, spec: dict[str, Any], field: str, named: str,
) -> None:
    manifest = _manifest("refused", {"size": 1, **spec})
    result = clusters.sandbox.kubectl("-n", clusters.namespace, "apply", "-f", "-", input=json.dumps(manifest),
                                      check=False)
    assert result.returncode != 0, f"apiserver accepted {spec}: {result.stdout}"
    assert f"{field}: Invalid value" in result.stderr, f"error does not name {field}: {result.stderr}"
    assert named in result.stderr, f"error does not say {named!r}: {result.stderr}"
    missing = clusters.sandbox.kubectl("-n", clusters.namespace, "get", "etcd", "refused", check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr, missing.stdout


def _example_clusters() -> list[Any]:
    found = []
    for path in sorted((Path(CHECKOUT_DIR) / "examples").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document and document.get("kind") == KIND:
                found.append(pytest.param(document, id=path.name))
    return found


@pytest.mark.parametrize("manifest", _example_clusters())
def test_examples_pass_admission(clusters: Clusters, manifest: dict[str, Any]) -> None:
    _dry_run_apply(clusters, manifest)


def test_coreos_manifest_with_every_optional_section_passes_admission(clusters: Clusters) -> None:
    spec = {
        "size": 3, "version": "3.5.21", "repository": "quay.io/coreos/etcd", "paused": False,
        "pod": {
            "labels": {"team": "db", "app.kubernetes.io/name": "etcd"},
            "annotations": {"prometheus.io/scrape": "false", "etcd.database.coreos.com/note": "mine"},
            "nodeSelector": {"disk": "ssd"}, "antiAffinity": True,
            "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": 1}},
            "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute",
                             "tolerationSeconds": 30}],
            "etcdEnv": [{"name": "ETCD_AUTO_COMPACTION_RETENTION", "value": "1"},
                        {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            "persistentVolumeClaimSpec": {"accessModes": ["ReadWriteOnce"],
                                          "resources": {"requests": {"storage": "8Gi"}}},
            "busyboxImage": "busybox:1.28.0-glibc", "securityContext": {"runAsNonRoot": True},
            "DNSTimeoutInSecond": 60, "ClusterDomain": ".cluster.local",
        },
        "TLS": {"static": {"member": {"peerSecret": "peer", "serverSecret": "server"}, "operatorSecret": "client"}},
    }
    _dry_run_apply(clusters, _manifest("coreos-full", spec))
    for compaction in ({"mode": "revision", "retention": 1000}, {"mode": "disabled", "retention": "0"},
                       {"retention": "90m"}):
        _dry_run_apply(clusters, _manifest("compaction", {"size": 1, "compaction": compaction}))
