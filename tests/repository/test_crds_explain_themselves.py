"""The CRDs in crds/ explain themselves: every field of every schema has a description (what
`kubectl explain etcdcluster.spec.<field>` prints), every printer column says what it shows,
`kubectl get etcd` shows why a cluster is in its phase, and EtcdBackup and EtcdRestore have short
names that no built-in resource uses."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CRD_FILES = sorted((REPO / "crds").glob("*.yaml"))

# Short names and resource names kubectl already resolves in a Kubernetes 1.37 cluster
# (`kubectl api-resources`); a CRD short name among them would be shadowed or shadow one.
BUILT_IN_NAMES = frozenset({
    "all", "cm", "cs", "csr", "cj", "crd", "crds", "ds", "deploy", "ep", "eps", "ev", "hpa", "ing", "ingclass",
    "limits", "netpol", "no", "ns", "pc", "pdb", "po", "pv", "pvc", "quota", "rc", "rs", "sa", "sc", "sts", "svc",
    "vac", "event", "events", "endpoints", "pods", "pod", "node", "nodes",
})


def crd(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def properties(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every named field below `schema`: object properties, array items' properties and
    map values' properties, as (dotted path, schema)."""
    for name, child in schema.get("properties", {}).items():
        yield f"{path}.{name}", child
        yield from properties(child, f"{path}.{name}")
    if "items" in schema:
        yield from properties(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from properties(schema["additionalProperties"], f"{path}{{}}")


@pytest.mark.parametrize("path", CRD_FILES, ids=lambda p: p.name)
def test_every_field_has_a_description(path: Path) -> None:
    for version in crd(path)["spec"]["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        assert schema.get("description", "").strip(), f"{path.name}: the kind itself"
        missing = [field for field, node in properties(schema)
                   if field != ".metadata" and not node.get("description", "").strip()]
        assert not missing, f"{path.name} {version['name']}: fields without a description: {missing}"


@pytest.mark.parametrize("path", CRD_FILES, ids=lambda p: p.name)
def test_root_metadata_carries_nothing_the_apiserver_refuses(path: Path) -> None:
    """The apiserver refuses a CRD whose root `metadata` schema says anything but `type: object`
    (not even a description): "must not specify anything other than name and generateName"."""
    for version in crd(path)["spec"]["versions"]:
        assert version["schema"]["openAPIV3Schema"]["properties"]["metadata"] == {"type": "object"}


@pytest.mark.parametrize("path", CRD_FILES, ids=lambda p: p.name)
def test_every_printer_column_says_what_it_shows(path: Path) -> None:
    for version in crd(path)["spec"]["versions"]:
        for column in version["additionalPrinterColumns"]:
            if column["jsonPath"] != ".metadata.creationTimestamp":
                assert column.get("description", "").strip(), f"{path.name}: column {column['name']}"


def test_kubectl_get_etcd_shows_the_reason_and_wide_output_the_message() -> None:
    [version] = crd(REPO / "crds" / "etcdclusters.yaml")["spec"]["versions"]
    columns = {column["name"]: column for column in version["additionalPrinterColumns"]}
    assert columns["Reason"]["jsonPath"] == ".status.reason" and columns["Reason"].get("priority", 0) == 0
    assert columns["Message"]["jsonPath"] == ".status.message" and columns["Message"]["priority"] == 1


@pytest.mark.parametrize("name, short", [("etcdbackups.yaml", "eb"), ("etcdrestores.yaml", "er")])
def test_backups_and_restores_have_short_names(name: str, short: str) -> None:
    names = crd(REPO / "crds" / name)["spec"]["names"]
    assert short in names["shortNames"]


def test_short_names_are_unique_and_clash_with_no_built_in_resource() -> None:
    every = [short for path in CRD_FILES for short in crd(path)["spec"]["names"].get("shortNames", [])]
    assert len(every) == len(set(every)), every
    assert not set(every) & BUILT_IN_NAMES, set(every) & BUILT_IN_NAMES


def _null_keys(node: Any, path: str = "") -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if value is None:
                yield f"{path}.{key}"
            yield from _null_keys(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _null_keys(value, f"{path}[{index}]")


@pytest.mark.parametrize("path", CRD_FILES, ids=lambda p: p.name)
def test_no_key_is_left_without_a_value(path: Path) -> None:
    """A comma in an unquoted description inside a YAML flow mapping (`{type: string, description:
    a, b}`) makes `b` a key without a value: the apiserver refuses the whole CRD."""
    nulls = list(_null_keys(crd(path)))
    assert not nulls, f"{path.name}: keys without a value (quote the description?): {nulls}"
