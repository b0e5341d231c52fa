"""crds/etcdclusters.yaml: a structural v1 schema with CoreOS v1beta2 field names that accepts
CoreOS manifests, refuses bad ones, and keeps (does not prune) every status field we write.

The validator of tests/support/openapi_schema.py stands in for the apiserver's (same rules for the
subset used here).
"""
from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from etcd_common.api import constants as c
from etcd_common.api import maintenance
from etcd_common.api.fields import SpecError
from etcd_operator.planning import plan_next_action
from etcd_operator.spec import parse_cluster_spec
from etcd_operator.status import compute_status
from tests.support.openapi_schema import CLUSTER_SCHEMA, apply_defaults, crd, validate, walk
from tests.unit.etcd_operator.etcd_cluster_builders import (
    healthy_cluster,
    member_list_unavailable,
    nothing_yet,
    unhealthy,
    with_issued_certificates,
    with_spec,
)

REPO = Path(__file__).resolve().parents[3]
CRD = crd("etcdclusters.yaml")
[VERSION] = CRD["spec"]["versions"]
SCHEMA = CLUSTER_SCHEMA


def admit(manifest: dict[str, Any]) -> tuple[list[str], list[str]]:
    return validate(SCHEMA, apply_defaults(SCHEMA, manifest))


def manifest(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": c.API_GROUP_VERSION, "kind": c.KIND, "metadata": {"name": "example-etcd-cluster"},
            "spec": spec}


# ---------------------------------------------------------------------------------------------
# The CRD's shape


def test_names_and_version() -> None:
    assert CRD["apiVersion"] == "apiextensions.k8s.io/v1" and CRD["kind"] == "CustomResourceDefinition"
    assert CRD["metadata"]["name"] == c.CRD_NAME
    spec = CRD["spec"]
    assert spec["group"] == c.API_GROUP and spec["scope"] == "Namespaced"
    assert spec["names"] == {"kind": c.KIND, "listKind": c.LIST_KIND, "plural": c.PLURAL, "singular": c.SINGULAR,
                             "shortNames": list(c.SHORT_NAMES)}
    assert VERSION["name"] == c.API_VERSION and VERSION["served"] and VERSION["storage"]
    assert VERSION["subresources"] == {"status": {}}


def test_schema_is_structural() -> None:
    for path, node in walk(SCHEMA):
        if node.get("x-kubernetes-int-or-string"):
            assert node.get("anyOf") == [{"type": "integer"}, {"type": "string"}], path
            continue
        assert node.get("type") in ("object", "array", "string", "integer", "number", "boolean"), path
        assert "anyOf" not in node and "oneOf" not in node, path
        assert not ("properties" in node and "additionalProperties" in node), path
        if node.get("x-kubernetes-preserve-unknown-fields"):
            assert node["type"] == "object", path
        if node["type"] == "array":
            assert "items" in node, path
        if "default" in node:
            assert validate(node, node["default"], path) == ([], []), path


def test_coreos_v1beta2_field_names() -> None:
    paths = {path for path, _ in walk(SCHEMA)}
    for field in (
        ".spec.size", ".spec.repository", ".spec.version", ".spec.paused", ".spec.baseImage",
        ".spec.pod.labels", ".spec.pod.nodeSelector", ".spec.pod.antiAffinity", ".spec.pod.affinity",
        ".spec.pod.resources", ".spec.pod.tolerations", ".spec.pod.etcdEnv", ".spec.pod.persistentVolumeClaimSpec",
        ".spec.pod.annotations", ".spec.pod.busyboxImage", ".spec.pod.securityContext",
        ".spec.pod.DNSTimeoutInSecond", ".spec.pod.ClusterDomain",
        ".spec.TLS.static.member.peerSecret", ".spec.TLS.static.member.serverSecret", ".spec.TLS.static.operatorSecret",
        ".status.phase", ".status.reason", ".status.controlPaused", ".status.conditions", ".status.size",
        ".status.serviceName", ".status.clientPort", ".status.members.ready", ".status.members.unready",
        ".status.currentVersion", ".status.targetVersion",
    ):
        assert field in paths, field


def test_defaults_and_bounds() -> None:
    spec = SCHEMA["properties"]["spec"]
    assert spec["required"] == ["size"]
    size = spec["properties"]["size"]
    assert (size["type"], size["minimum"], size["maximum"]) == ("integer", 1, 7)
    assert spec["properties"]["repository"]["default"] == c.DEFAULT_REPOSITORY
    assert spec["properties"]["version"]["default"] == c.DEFAULT_VERSION


def test_printer_columns_point_at_schema_fields() -> None:
    columns = {col["name"]: col for col in VERSION["additionalPrinterColumns"]}
    assert list(columns) == ["Size", "Ready", "Version", "Phase", "Reason", "Message", "Age"]
    nodes = dict(walk(SCHEMA))
    for column in columns.values():
        if column["jsonPath"] == ".metadata.creationTimestamp":
            assert column["type"] == "date"
            continue
        assert nodes[column["jsonPath"]]["type"] == column["type"], column


# ---------------------------------------------------------------------------------------------
# Admission of manifests


def test_coreos_example_is_admitted_with_defaults() -> None:
    example = yaml.safe_load((REPO / "examples" / "example-etcd-cluster.yaml").read_text())
    assert example == manifest({"size": 3, "version": c.DEFAULT_VERSION})
    assert admit(example) == ([], [])
    assert example["spec"]["repository"] == "quay.io/coreos/etcd"


def test_full_coreos_manifest_keeps_every_field() -> None:
    full = manifest({
        "size": 5, "version": "3.4.23", "repository": "quay.io/coreos/etcd", "paused": False,
        "pod": {
            "labels": {"team": "db"}, "annotations": {"a": "b"}, "nodeSelector": {"disk": "ssd"},
            "antiAffinity": False,
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
            "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": 1}},
            "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute",
                             "tolerationSeconds": 30}],
            "etcdEnv": [{"name": "ETCD_AUTO_COMPACTION_RETENTION", "value": "1"},
                        {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            "persistentVolumeClaimSpec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"],
                                          "resources": {"requests": {"storage": "1Gi"}}},
            "busyboxImage": "busybox:1.28.0-glibc", "securityContext": {"runAsNonRoot": True, "fsGroup": 1000},
            "DNSTimeoutInSecond": 60, "ClusterDomain": ".cluster.local",
        },
        "TLS": {"static": {"member": {"peerSecret": "etcd-peer-tls", "serverSecret": "etcd-server-tls"},
                           "operatorSecret": "etcd-client-tls"}},
    })
    assert admit(full) == ([], [])


@pytest.mark.parametrize("spec, complaint", [
    pytest.param({"size": "three"}, ".spec.size: must be of type integer", id="size-string"),
    pytest.param({"size": 0}, ".spec.size: 0 < 1", id="size-zero"),
    pytest.param({"size": 8}, ".spec.size: 8 > 7", id="size-eight"),
    pytest.param({"version": "3.5.1"}, "size is required", id="size-missing"),
    pytest.param({"size": 3, "version": "latest"}, ".spec.version", id="version-latest"),
    pytest.param({"size": 3, "version": 3.5}, ".spec.version: must be of type string", id="version-number"),
    pytest.param({"size": 3, "paused": "yes"}, ".spec.paused", id="paused-string"),
    pytest.param({"size": 3, "pod": {"labels": {"a": 1}}}, ".spec.pod.labels.a", id="label-not-string"),
    pytest.param({"size": 3, "pod": {"etcdEnv": [{"value": "x"}]}}, "name is required", id="env-without-name"),
    pytest.param({"size": 3, "pod": {"resources": {"limits": {"cpu": True}}}}, "integer or a string",
                 id="quantity-bool"),
])
def test_bad_manifests_are_refused(spec: dict[str, Any], complaint: str) -> None:
    errors, _ = admit(manifest(spec))
    assert any(complaint in error for error in errors), errors


@pytest.mark.parametrize("spec, complaint", [
    pytest.param({"compaction": {"retention": "-1h"}}, ".spec.compaction.retention", id="retention-negative"),
    pytest.param({"compaction": {"retention": -5}}, ".spec.compaction.retention", id="retention-negative-integer"),
    pytest.param({"compaction": {"retention": "abc"}}, ".spec.compaction.retention", id="retention-unparsable"),
    pytest.param({"compaction": {"mode": "hourly"}}, ".spec.compaction.mode", id="mode"),
    pytest.param({"defragmentation": {"thresholdPercent": 0}}, ".spec.defragmentation.thresholdPercent: 0 < 1",
                 id="threshold-0"),
    pytest.param({"defragmentation": {"thresholdPercent": 101}}, ".spec.defragmentation.thresholdPercent: 101 > 100",
                 id="threshold-101"),
    pytest.param({"backendQuota": "8GB"}, ".spec.backendQuota", id="quota-unit"),
    pytest.param({"backendQuota": "-1Gi"}, ".spec.backendQuota", id="quota-negative"),
    pytest.param({"backendQuota": 0}, ".spec.backendQuota", id="quota-zero"),
    pytest.param({"backendQuota": 107374182401}, ".spec.backendQuota", id="quota-over-100Gi"),
    pytest.param({"defragmentation": {"minimumFreeSize": "64MB"}}, ".spec.defragmentation.minimumFreeSize",
                 id="minimum-free-unit"),
    pytest.param({"defragmentation": {"window": {"start": "2:00", "duration": "4h"}}},
                 ".spec.defragmentation.window.start", id="window-start"),
    pytest.param({"defragmentation": {"window": {"start": "02:00", "duration": "4"}}},
                 ".spec.defragmentation.window.duration", id="window-duration"),
    pytest.param({"defragmentation": {"window": {"start": "02:00"}}}, "duration is required", id="window-open-ended"),
    pytest.param({"alarms": {"recoverNoSpace": "yes"}}, ".spec.alarms.recoverNoSpace", id="alarm-string"),
])
def test_bad_maintenance_fields_are_refused(spec: dict[str, Any], complaint: str) -> None:
    errors, _ = admit(manifest({"size": 3, **spec}))
    assert any(complaint in error for error in errors), errors


def test_maintenance_patterns_are_the_parsers() -> None:
    properties = SCHEMA["properties"]["spec"]["properties"]
    defragmentation = properties["defragmentation"]["properties"]
    assert properties["compaction"]["properties"]["retention"]["pattern"] == maintenance.RETENTION_PATTERN
    assert properties["backendQuota"]["pattern"] == maintenance.QUANTITY_PATTERN
    assert defragmentation["minimumFreeSize"]["pattern"] == maintenance.QUANTITY_PATTERN
    assert defragmentation["window"]["properties"]["duration"]["pattern"] == maintenance.DURATION_PATTERN
    assert defragmentation["window"]["properties"]["start"]["pattern"] == maintenance.WINDOW_START_PATTERN
    assert properties["backendQuota"]["maximum"] == c.MAX_QUOTA_BACKEND_BYTES
    assert properties["compaction"]["properties"]["mode"]["enum"] == list(maintenance.COMPACTION_MODES)


# Inputs the schema admits and the parser refuses: what depends on the mode (a bare number is a
# revision count, a duration is not) and zero (etcd's "off": the parser says to use disabled).
_ONLY_THE_PARSER_REFUSES = {
    ("compaction", "periodic-bare-number"), ("compaction", "zero-duration"), ("compaction", "revision-duration"),
    ("compaction", "revision-zero"), ("backendQuota", "over-100Gi-string"), ("window", "over-a-day"),
    ("window", "under-a-second"),
}


@pytest.mark.parametrize("kind, case, spec", [
    ("compaction", "periodic", {"compaction": {"retention": "1h30m"}}),
    ("compaction", "periodic-fraction", {"compaction": {"mode": "periodic", "retention": "1.5h"}}),
    ("compaction", "periodic-bare-number", {"compaction": {"retention": "5"}}),
    ("compaction", "zero-duration", {"compaction": {"retention": "0s"}}),
    ("compaction", "revision", {"compaction": {"mode": "revision", "retention": "10000"}}),
    ("compaction", "revision-integer", {"compaction": {"mode": "revision", "retention": 10000}}),
    ("compaction", "revision-duration", {"compaction": {"mode": "revision", "retention": "1h"}}),
    ("compaction", "revision-zero", {"compaction": {"mode": "revision", "retention": "0"}}),
    ("compaction", "disabled", {"compaction": {"mode": "disabled"}}),
    ("compaction", "negative", {"compaction": {"retention": "-1h"}}),
    ("compaction", "days", {"compaction": {"retention": "1d"}}),
    ("backendQuota", "integer", {"backendQuota": 16777216}),
    ("backendQuota", "Mi", {"backendQuota": "16Mi"}),
    ("backendQuota", "Gi", {"backendQuota": "8Gi"}),
    ("backendQuota", "decimal-SI", {"backendQuota": "2G"}),
    ("backendQuota", "fraction", {"backendQuota": "1.5Gi"}),
    ("backendQuota", "GB", {"backendQuota": "8GB"}),
    ("backendQuota", "milli", {"backendQuota": "100m"}),
    ("backendQuota", "space", {"backendQuota": "8 Gi"}),
    ("backendQuota", "zero", {"backendQuota": 0}),
    ("backendQuota", "over-100Gi-string", {"backendQuota": "101Gi"}),
    ("window", "over-midnight", {"defragmentation": {"window": {"start": "22:00", "duration": "4h"}}}),
    ("window", "over-a-day", {"defragmentation": {"window": {"start": "22:00", "duration": "25h"}}}),
    ("window", "under-a-second", {"defragmentation": {"window": {"start": "22:00", "duration": "10ms"}}}),
    ("window", "no-leading-zero", {"defragmentation": {"window": {"start": "2:00", "duration": "4h"}}}),
    ("window", "seconds", {"defragmentation": {"window": {"start": "02:00:00", "duration": "4h"}}}),
    ("threshold", "1", {"defragmentation": {"thresholdPercent": 1}}),
    ("threshold", "100", {"defragmentation": {"thresholdPercent": 100}}),
    ("threshold", "0", {"defragmentation": {"thresholdPercent": 0}}),
])
def test_the_schema_admits_what_the_parser_accepts(kind: str, case: str, spec: dict[str, Any]) -> None:
    full = {"size": 3, **spec}
    admitted = admit(manifest(full))[0] == []
    try:
        parse_cluster_spec(full)
        parsed = True
    except SpecError:
        parsed = False
    if (kind, case) in _ONLY_THE_PARSER_REFUSES:
        assert admitted and not parsed
    else:
        assert admitted is parsed


def test_maintenance_example_is_admitted_and_runs_without_warnings() -> None:
    example = yaml.safe_load((REPO / "examples" / "cluster-with-maintenance.yaml").read_text())
    assert admit(example) == ([], [])
    spec = parse_cluster_spec(example["spec"])
    assert spec.warnings == () and spec.backend_quota_bytes == 4 * c.GIB
    assert spec.defragmentation.window is not None and spec.compaction.retention == "1h"


def test_unknown_spec_fields_are_pruned() -> None:
    errors, pruned = admit(manifest({"size": 3, "selfHosted": {}, "pod": {"nonsense": 1}}))
    assert errors == [] and sorted(pruned) == [".spec.pod.nonsense", ".spec.selfHosted"]


# ---------------------------------------------------------------------------------------------
# Status written by the operator fits the schema (nothing pruned, nothing refused)


@pytest.mark.parametrize("observed", [
    pytest.param(healthy_cluster(3), id="running"),
    pytest.param(nothing_yet(), id="creating"),
    pytest.param(unhealthy(healthy_cluster(3), "example-mem02", "example-mem03"), id="quorum-lost"),
    pytest.param(member_list_unavailable(healthy_cluster(3)), id="unreachable"),
    pytest.param(with_spec(healthy_cluster(3), version="3.4.23"), id="rejected"),
    pytest.param(with_spec(healthy_cluster(3), pod={"busyboxImage": "b"}), id="warnings"),
    pytest.param(with_issued_certificates(healthy_cluster(3, spec={"TLS": {"issued": {}}})), id="tls-issued"),
    pytest.param(healthy_cluster(3, spec={"TLS": {"issued": {}}}), id="tls-issued-missing"),
])
def test_status_fits_schema(observed: Any) -> None:
    status = compute_status(observed, plan_next_action(observed), now=datetime(2024, 6, 1), last_error="boom")
    errors, pruned = validate(SCHEMA["properties"]["status"], status, ".status")
    assert (errors, pruned) == ([], [])
    # `tls` only for spec.TLS.issued clusters; `recovery` only once a quorum-loss recovery started.
    issued = observed.cluster.require_spec().issued_tls is not None
    optional = {"recovery"} | ({"tls"} if not issued else set())
    assert set(status) | optional == set(SCHEMA["properties"]["status"]["properties"])
