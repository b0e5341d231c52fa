"""Container environment: $(VAR) expansion rules and the sources of variables."""
from __future__ import annotations

from typing import Any

import pytest

from kube_sandbox.kubelet.environment import ContainerConfigError, build_environment, expand, field_ref_value
from kube_sandbox.kubelet.resources import parse_quantity, resource_field_value

POD: dict[str, Any] = {
    "metadata": {"name": "web-0", "namespace": "prod", "uid": "u-1", "labels": {"app": "web"},
                 "annotations": {"team": "db"}},
    "spec": {"nodeName": "sandbox-node", "serviceAccountName": "runner", "containers": [
        {"name": "main", "resources": {"limits": {"memory": "1Gi", "cpu": "500m"}}}]},
}


@pytest.mark.parametrize("text, expected", [
    ("$(A)", "a"),
    ("x$(A)y$(B)z", "xaybz"),
    ("$(MISSING)", "$(MISSING)"),
    ("$$(A)", "$(A)"),
    ("$$$(A)", "$a"),
    ("$$", "$"),
    ("$A", "$A"),
    ("$(A", "$(A"),
    ("end$", "end$"),
    ("$()", "$()"),
    ("no refs", "no refs"),
    ("$(A)$(A)", "aa"),
])
def test_expand_follows_kubernetes_rules(text: str, expected: str) -> None:
    assert expand(text, {"A": "a", "B": "b"}) == expected


@pytest.mark.parametrize("path, expected", [
    ("metadata.name", "web-0"),
    ("metadata.namespace", "prod"),
    ("metadata.uid", "u-1"),
    ("metadata.labels['app']", "web"),
    ("metadata.annotations['team']", "db"),
    ("metadata.labels['absent']", ""),
    ("spec.nodeName", "sandbox-node"),
    ("spec.serviceAccountName", "runner"),
    ("status.podIP", "127.1.0.7"),
    ("status.hostIP", "127.0.0.1"),
])
def test_field_refs(path: str, expected: str) -> None:
    assert field_ref_value(POD, path, "127.1.0.7", "127.0.0.1") == expected


def test_unknown_field_ref_is_a_config_error() -> None:
    with pytest.raises(ContainerConfigError):
        field_ref_value(POD, "spec.bogus", "127.1.0.7", "127.0.0.1")


def lookups(secrets: dict[str, dict[str, str]], config_maps: dict[str, dict[str, str]]) -> dict[str, Any]:
    return {"secret": secrets.get, "config_map": config_maps.get}


def test_env_sources_order_and_expansion() -> None:
    container = {
        "name": "main",
        "resources": {"limits": {"memory": "1Gi"}},
        "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}, {"secretRef": {"name": "sec"}}],
        "env": [
            {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "URL", "value": "http://$(NAME):$(PORT)/$(KUBERNETES_SERVICE_HOST)"},
            {"name": "PORT", "value": "2379"},
            {"name": "TOKEN", "value": "overridden"},
            {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "password"}}},
            {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
            {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
            {"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "x", "optional": True}}},
        ],
    }
    env = build_environment(POD, container, pod_ip="127.1.0.7", host_ip="127.0.0.1",
                            service_env={"KUBERNETES_SERVICE_HOST": "127.0.0.1"},
                            **lookups({"sec": {"password": "pw", "TOKEN": "t", "bad key": "x"}},
                                      {"cfg": {"mode": "fast"}}))
    # PORT is defined after URL, so it is not expanded there (Kubernetes semantics)
    assert env["URL"] == "http://web-0:$(PORT)/127.0.0.1"
    assert env["CFG_mode"] == "fast"
    assert env["TOKEN"] == "overridden"
    assert env["PASSWORD"] == "pw"
    assert env["MODE"] == "fast"
    assert env["MEM"] == "1024"
    assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    assert "OPT" not in env and "bad key" not in env


@pytest.mark.parametrize("env_item, message", [
    ({"name": "X", "valueFrom": {"secretKeyRef": {"name": "missing", "key": "k"}}}, 'secret "missing" not found'),
    ({"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "nokey"}}},
     "couldn't find key nokey in ConfigMap prod/cfg"),
])
def test_missing_env_sources_are_config_errors(env_item: dict[str, Any], message: str) -> None:
    with pytest.raises(ContainerConfigError, match=message):
        build_environment(POD, {"name": "main", "env": [env_item]}, pod_ip="", host_ip="", service_env={},
                          **lookups({}, {"cfg": {"mode": "fast"}}))


@pytest.mark.parametrize("text, value", [
    ("100m", "0.1"), ("1Gi", str(2**30)), ("2k", "2000"), ("1.5", "1.5"), ("3e3", "3000"), ("512Mi", str(512 * 2**20)),
])
def test_parse_quantity(text: str, value: str) -> None:
    assert parse_quantity(text) == parse_quantity(value)


def test_resource_field_defaults_to_node_capacity_and_rounds_up() -> None:
    container = {"resources": {"limits": {"cpu": "500m"}}}
    assert resource_field_value(container, "limits.cpu") == "1"
    assert resource_field_value(container, "limits.cpu", "1m") == "500"
    assert resource_field_value(container, "requests.cpu", "1m") == "500"  # requests default to limits
    assert int(resource_field_value({}, "limits.memory")) > 0
