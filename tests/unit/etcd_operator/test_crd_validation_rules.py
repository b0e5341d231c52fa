"""The CEL rules (x-kubernetes-validations) of crds/etcdclusters.yaml: the API server refuses at
apply what the operator would refuse later as InvalidSpec, and never what the operator accepts.

The rules are evaluated here with cel-python, standing in for the API server's cel-go (`join`,
a Kubernetes CEL extension, is added); the reserved keys they spell out are compared with the
operator's constants, so a key added to one and not the other fails here.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml

from etcd_common.api import constants as c
from etcd_common.api.fields import SpecError
from etcd_operator.spec import parse_cluster_spec

REPO = Path(__file__).resolve().parents[3]
CRD = yaml.safe_load((REPO / "crds" / "etcdclusters.yaml").read_text())
[VERSION] = CRD["spec"]["versions"]
SPEC_SCHEMA = VERSION["schema"]["openAPIV3Schema"]["properties"]["spec"]

Schema = dict[str, Any]
_ENV = celpy.Environment()
_FUNCTIONS = {"join": lambda items, separator: celpy.celtypes.StringType(str(separator).join(map(str, items)))}


def _evaluate(expression: str, value: Any) -> Any:
    program = _ENV.program(_ENV.compile(expression), functions=_FUNCTIONS)
    return program.evaluate({"self": celpy.json_to_cel(value)})


def _rules(schema: Schema, path: str) -> list[tuple[str, Schema]]:
    """Every (field path, schema) below `schema` that carries CEL rules."""
    found = [(path, schema)] if schema.get("x-kubernetes-validations") else []
    for name, child in schema.get("properties", {}).items():
        found += _rules(child, f"{path}.{name}")
    assert "x-kubernetes-validations" not in schema.get("items", {}), "rules on list items: see the etcdEnv note"
    return found


def _at(value: Any, path: str) -> Any:
    """The value at `path` ("spec.pod.labels") in `{"spec": value}`; None when absent."""
    for part in path.split(".")[1:]:
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def admission_refusals(spec: dict[str, Any]) -> list[str]:
    """What the CRD's CEL rules say of `spec`: one "<field>: <message>" per broken rule."""
    refusals = []
    for path, schema in _rules(SPEC_SCHEMA, "spec"):
        value = _at(spec, path)
        if value is None:
            continue
        for rule in schema["x-kubernetes-validations"]:
            if not _evaluate(rule["rule"], value):
                where = path + rule.get("fieldPath", "")
                message = _evaluate(rule["messageExpression"], value) if "messageExpression" in rule else rule["message"]
                refusals.append(f"{where}: {message}")
    return refusals


def operator_refusal(spec: dict[str, Any]) -> str | None:
    try:
        parse_cluster_spec(spec)
    except SpecError as error:
        return str(error)
    return None


def _pod(**fields: Any) -> dict[str, Any]:
    return {"size": 3, "pod": fields}


def _tls(**static: Any) -> dict[str, Any]:
    return {"size": 3, "TLS": {"static": static}}


def _issued(**fields: Any) -> dict[str, Any]:
    return {"size": 3, "TLS": {"issued": fields}}


def _compaction(**fields: Any) -> dict[str, Any]:
    return {"size": 3, "compaction": fields}


# (spec, the field the refusal names, what it names in it)
REFUSED = [
    pytest.param(_pod(labels={"app": "mine"}), "spec.pod.labels", "app", id="label-app"),
    pytest.param(_pod(labels={"team": "db", "etcd_node": "x", "etcd_cluster": "y"}), "spec.pod.labels",
                 "etcd_cluster or etcd_node", id="labels-two"),
    pytest.param(_pod(labels={c.LABEL_SERVING: "true"}), "spec.pod.labels", c.LABEL_SERVING, id="label-serving"),
    pytest.param(_pod(annotations={"etcd.version": "3.5.0"}), "spec.pod.annotations", "etcd.version",
                 id="annotation-version"),
    pytest.param(_pod(annotations={c.ANNOTATION_POD_POLICY_HASH: "x"}), "spec.pod.annotations",
                 c.ANNOTATION_POD_POLICY_HASH, id="annotation-hash"),
    pytest.param(_tls(operatorSecret="client"), "spec.TLS.static", "serverSecret", id="tls-operator-only"),
    pytest.param(_tls(member={"peerSecret": "p", "serverSecret": "s"}), "spec.TLS.static", "operatorSecret",
                 id="tls-server-only"),
    pytest.param(_tls(member={"serverSecret": "s"}, operatorSecret=""), "spec.TLS.static", "operatorSecret",
                 id="tls-operator-empty"),
    pytest.param({"size": 3, "TLS": {"static": {"member": {"peerSecret": "p"}}, "issued": {}}}, "spec.TLS",
                 "cannot both be set", id="tls-static-and-issued"),
    pytest.param({"size": 3, "TLS": {"static": {}, "issued": {}}}, "spec.TLS", "cannot both be set",
                 id="tls-empty-static-and-issued"),
    pytest.param({"size": 3, "TLS": {"certManager": {"issuerRef": {"name": "ca"}}, "issued": {}}}, "spec.TLS",
                 "certManager cannot be set with static or issued", id="tls-cert-manager-and-issued"),
    pytest.param({"size": 3, "TLS": {"certManager": {"issuerRef": {"name": "ca"}}, "static": {}}}, "spec.TLS",
                 "certManager cannot be set with static or issued", id="tls-cert-manager-and-static"),
    pytest.param({"size": 3, "TLS": {"certManager": {"issuerRef": {"name": "ca"}, "duration": "30m"}}},
                 "spec.TLS.certManager.duration", "at least 1h", id="cert-manager-duration-short"),
    pytest.param({"size": 3, "TLS": {"certManager": {"issuerRef": {"name": "ca"}, "duration": "2h",
                                                     "renewBefore": "3h"}}},
                 "spec.TLS.certManager.renewBefore", "less than duration", id="cert-manager-renew-over"),
    pytest.param(_issued(validity="30m"), "spec.TLS.issued.validity", "at least 1h", id="issued-validity-short"),
    pytest.param(_issued(validity="24h", renewBefore="24h"), "spec.TLS.issued.renewBefore", "less than validity",
                 id="issued-renew-equal"),
    pytest.param(_issued(renewBefore="2400h"), "spec.TLS.issued.renewBefore", "less than validity",
                 id="issued-renew-over-default"),
    pytest.param(_issued(renewBefore="0s"), "spec.TLS.issued.renewBefore", "more than 0s", id="issued-renew-zero"),
    pytest.param(_issued(validity="24h", caValidity="12h"), "spec.TLS.issued.caValidity", "at least validity",
                 id="issued-ca-shorter"),
    pytest.param(_issued(caValidity="720h"), "spec.TLS.issued.caValidity", "at least validity",
                 id="issued-ca-under-default"),
    pytest.param(_compaction(retention=24), "spec.compaction.retention", "24 has no unit", id="periodic-int"),
    pytest.param(_compaction(mode="periodic", retention="24"), "spec.compaction.retention", "24 has no unit",
                 id="periodic-bare-string"),
    pytest.param(_compaction(retention="0s"), "spec.compaction.retention", "0s is zero", id="periodic-zero"),
    pytest.param(_compaction(retention="0h0.0m"), "spec.compaction.retention", "0h0.0m is zero",
                 id="periodic-zero-parts"),
    pytest.param(_compaction(mode="revision", retention="0"), "spec.compaction.retention", "0 is zero",
                 id="revision-zero"),
    pytest.param(_compaction(mode="revision", retention="000"), "spec.compaction.retention", "000 is zero",
                 id="revision-zeros"),
    pytest.param(_compaction(mode="revision", retention="1h"), "spec.compaction.retention",
                 "1h is not a number of revisions", id="revision-duration"),
]


@pytest.mark.parametrize(("spec", "field", "named"), REFUSED)
def test_admission_refuses_what_the_operator_refuses(spec: dict[str, Any], field: str, named: str) -> None:
    assert operator_refusal(spec) is not None, f"the operator accepts {spec}: no rule may refuse it"
    refusals = admission_refusals(spec)
    assert refusals, f"no rule refuses {spec}"
    assert any(r.startswith(f"{field}: ") and named in r for r in refusals), refusals


def _coreos_manifest_with_every_section() -> dict[str, Any]:
    return {
        "size": 5, "version": "3.5.21", "repository": "quay.io/coreos/etcd", "paused": False,
        "pod": {
            "labels": {"team": "db", "app.kubernetes.io/name": "etcd"},
            "annotations": {"prometheus.io/scrape": "false", "etcd.database.coreos.com/note": "mine"},
            "nodeSelector": {"disk": "ssd"}, "antiAffinity": True,
            "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": 1}},
            "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute",
                             "tolerationSeconds": 30}],
            "etcdEnv": [{"name": "ETCD_AUTO_COMPACTION_RETENTION", "value": "1"},
                        {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            "persistentVolumeClaimSpec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "8Gi"}}},
            "busyboxImage": "busybox:1.28.0-glibc", "securityContext": {"runAsNonRoot": True},
            "DNSTimeoutInSecond": 60, "ClusterDomain": ".cluster.local",
        },
        "TLS": {"static": {"member": {"peerSecret": "peer", "serverSecret": "server"}, "operatorSecret": "client"}},
    }


ACCEPTED = [
    pytest.param({"size": 3}, id="minimal"),
    pytest.param(_coreos_manifest_with_every_section(), id="coreos-every-section"),
    pytest.param(_pod(labels={}, annotations={}), id="empty-maps"),
    pytest.param(_pod(labels={"application": "etcd", "etcd_cluster_name": "x"}), id="labels-like-reserved"),
    pytest.param(_tls(member={"peerSecret": "peer"}), id="tls-peer-only"),
    pytest.param(_tls(member={"serverSecret": ""}, operatorSecret=""), id="tls-both-empty"),
    pytest.param({"size": 3, "TLS": {}}, id="tls-empty"),
    pytest.param(_issued(), id="issued-defaults"),
    pytest.param(_issued(validity="24h", renewBefore="8h", caValidity="24h"), id="issued-short"),
    pytest.param(_issued(validity="1h"), id="issued-one-hour"),
    pytest.param(_issued(renewBefore="1439h"), id="issued-renew-under-default"),
    pytest.param(_issued(validity="17520h"), id="issued-two-years"),
    pytest.param({"size": 3, "TLS": {"certManager": {"issuerRef": {"name": "ca"}}}}, id="cert-manager-defaults"),
    pytest.param({"size": 3, "TLS": {"certManager": {"issuerRef": {"name": "ca", "kind": "ClusterIssuer"},
                                                     "duration": "1h", "renewBefore": "59m"}}}, id="cert-manager-short"),
    pytest.param(_compaction(), id="compaction-empty"),
    pytest.param(_compaction(mode="periodic"), id="periodic-default"),
    pytest.param(_compaction(retention="90m"), id="periodic-unset-mode"),
    pytest.param(_compaction(mode="periodic", retention="0.5s"), id="periodic-fraction"),
    pytest.param(_compaction(mode="periodic", retention="10h0m"), id="periodic-trailing-zero"),
    pytest.param(_compaction(mode="revision", retention="10000"), id="revision-string"),
    pytest.param(_compaction(mode="revision", retention=100), id="revision-int"),
    pytest.param(_compaction(mode="revision"), id="revision-default"),
    pytest.param(_compaction(mode="disabled", retention="0"), id="disabled-ignores-retention"),
    pytest.param(_compaction(mode="disabled", retention=24), id="disabled-ignores-bare-number"),
]


@pytest.mark.parametrize("spec", ACCEPTED)
def test_admission_accepts_what_the_operator_accepts(spec: dict[str, Any]) -> None:
    assert operator_refusal(spec) is None, operator_refusal(spec)
    assert admission_refusals(spec) == []


@pytest.mark.parametrize("example", sorted((REPO / "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_examples_pass_the_rules(example: Path) -> None:
    for document in yaml.safe_load_all(example.read_text()):
        if document and document.get("kind") == c.KIND:
            assert admission_refusals(document["spec"]) == [], example


def _key_list(keys: frozenset[str]) -> str:
    return "[" + ", ".join(f"'{key}'" for key in sorted(keys)) + "]"


@pytest.mark.parametrize(("field", "keys"), [
    ("labels", c.RESERVED_LABEL_KEYS),
    ("annotations", c.RESERVED_ANNOTATION_KEYS),
])
def test_reserved_keys_in_the_rules_are_the_operators(field: str, keys: frozenset[str]) -> None:
    [rule] = SPEC_SCHEMA["properties"]["pod"]["properties"][field]["x-kubernetes-validations"]
    listed = _key_list(keys)
    assert listed in rule["rule"], f"spec.pod.{field}: the rule's keys differ from the operator's: write {listed}"
    # A static message: a messageExpression over the map is refused by the API server's cost
    # estimate (unbounded map of unbounded strings), and maxProperties would refuse specs it accepts.
    assert "messageExpression" not in rule
    for key in keys:
        assert key in rule["message"], f"spec.pod.{field}: the message does not name {key}"
        refusals = admission_refusals(_pod(**{field: {key: "x"}}))
        assert refusals and key in refusals[0], (key, refusals)


def test_every_rule_has_a_message_naming_no_other_field() -> None:
    for path, schema in _rules(SPEC_SCHEMA, "spec"):
        for rule in schema["x-kubernetes-validations"]:
            assert rule["message"] and "\n" not in rule["message"], (path, rule)
            if "fieldPath" in rule:
                assert rule["fieldPath"].lstrip(".") in schema["properties"], (path, rule)


def test_etcd_env_names_are_left_to_the_operator() -> None:
    """Refusing etcdEnv names at admission would iterate an unbounded list: its estimated cost
    (up to ~1M items at 3 MB per request) is over the API server's per-rule limit, and a maxItems
    would refuse specs the operator accepts. The operator checks them (InvalidSpec)."""
    etcd_env = SPEC_SCHEMA["properties"]["pod"]["properties"]["etcdEnv"]
    assert "maxItems" not in etcd_env and "x-kubernetes-validations" not in etcd_env
    spec = _pod(etcdEnv=[{"name": "ETCD_NAME", "value": "x"}])
    assert admission_refusals(spec) == [] and operator_refusal(spec) is not None


def test_rule_text_spells_each_key_once() -> None:
    # the list literals are what test_reserved_keys_in_the_rules_are_the_operators compares
    for field in ("labels", "annotations"):
        [rule] = SPEC_SCHEMA["properties"]["pod"]["properties"][field]["x-kubernetes-validations"]
        [literal] = set(re.findall(r"\[[^\]]*\]", rule["rule"]))
        keys = re.findall(r"'([^']*)'", literal)
        assert len(keys) == len(set(keys)), keys
