"""The CRDs' schemas (crds/) and a small OpenAPI v3 validator that stands in for the apiserver's:
the same rules for the subset our CRDs use, including the structural-schema pruning of unknown
fields and x-kubernetes-int-or-string, which a JSON Schema validator does not know."""
from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]

Schema = dict[str, Any]


def crd(file_name: str) -> dict[str, Any]:
    """crds/<file_name> as a dict."""
    loaded: dict[str, Any] = yaml.safe_load((REPO / "crds" / file_name).read_text())
    return loaded


def crd_schema(file_name: str) -> Schema:
    """The openAPIV3Schema of the one version crds/<file_name> serves."""
    [version] = crd(file_name)["spec"]["versions"]
    schema: Schema = version["schema"]["openAPIV3Schema"]
    return schema


CLUSTER_SCHEMA = crd_schema("etcdclusters.yaml")
BACKUP_SCHEMA = crd_schema("etcdbackups.yaml")
RESTORE_SCHEMA = crd_schema("etcdrestores.yaml")


def validate(schema: Schema, value: Any, path: str = "") -> tuple[list[str], list[str]]:
    """(errors, pruned field paths) of `value` under `schema`; `path` names `value` in the messages."""
    errors: list[str] = []
    pruned: list[str] = []
    where = path or "<root>"
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            errors.append(f"{where}: must be an integer or a string")
        elif isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
        elif isinstance(value, int) and not schema.get("minimum", value) <= value <= schema.get("maximum", value):
            errors.append(f"{where}: {value} out of [{schema.get('minimum')}, {schema.get('maximum')}]")
        return errors, pruned
    kind = schema.get("type")
    checks = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
    }
    if kind is not None and not checks[kind](value):
        return [f"{where}: must be of type {kind}, got {value!r}"], pruned
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} not in {schema['enum']}")
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{where}: {value} < {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        errors.append(f"{where}: {value} > {schema['maximum']}")
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(f"{where}: shorter than {schema['minLength']}")
    if "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if schema.get("format") == "date-time":
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            errors.append(f"{where}: {value!r} is not a date-time")
    if kind == "object":
        for required in schema.get("required", ()):
            if required not in value:
                errors.append(f"{where}: {required} is required")
        properties = schema.get("properties", {})
        for key, item in value.items():
            child = f"{path}.{key}"
            if key in properties:
                sub_errors, sub_pruned = validate(properties[key], item, child)
            elif "additionalProperties" in schema:
                sub_errors, sub_pruned = validate(schema["additionalProperties"], item, child)
            elif schema.get("x-kubernetes-preserve-unknown-fields") or (path == ".metadata"):
                continue
            else:
                pruned.append(child)
                continue
            errors += sub_errors
            pruned += sub_pruned
    if kind == "array":
        for index, item in enumerate(value):
            sub_errors, sub_pruned = validate(schema["items"], item, f"{path}[{index}]")
            errors += sub_errors
            pruned += sub_pruned
    return errors, pruned


def apply_defaults(schema: Schema, value: Any) -> Any:
    """`value` with the schema's defaults filled in where a field is missing (in place)."""
    if isinstance(value, dict) and schema.get("type") == "object":
        for key, sub in schema.get("properties", {}).items():
            if key not in value and "default" in sub:
                value[key] = sub["default"]
            if key in value:
                apply_defaults(sub, value[key])
    return value


def walk(schema: Schema, path: str = "") -> list[tuple[str, Schema]]:
    """Every (path, schema) node of the schema: `.a.b`, `.map.*` for additionalProperties, `.list[]`."""
    nodes = [(path, schema)]
    for key, sub in schema.get("properties", {}).items():
        nodes += walk(sub, f"{path}.{key}")
    if isinstance(schema.get("additionalProperties"), dict):
        nodes += walk(schema["additionalProperties"], f"{path}.*")
    if "items" in schema:
        nodes += walk(schema["items"], f"{path}[]")
    return nodes
