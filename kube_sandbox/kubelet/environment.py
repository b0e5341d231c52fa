"""Container environment variables, computed the way the real kubelet does.

`$(VAR)` expansion follows Kubernetes' rules (`$$` escapes, unknown references stay verbatim);
`fieldRef` covers the downward-API fields pods commonly use. Secrets and ConfigMaps are looked up
through callables so this module stays free of API calls.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from kube_sandbox.kubelet.resources import InvalidQuantity, resource_field_value

# name -> decoded data, or None when the object does not exist
DataLookup = Callable[[str], "dict[str, str] | None"]

_LABEL_REF = re.compile(r"^metadata\.(labels|annotations)\['(?P<key>[^']+)'\]$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


class ContainerConfigError(Exception):
    """The container cannot be configured (missing Secret/ConfigMap/key, bad field path).

    Reported as `CreateContainerConfigError`, as the real kubelet does; retried later."""


def expand(text: str, variables: Mapping[str, str]) -> str:
    """Expand `$(NAME)` references; `$$` yields `$`; unresolvable references are left as written."""
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    length = len(text)
    while cursor < length:
        if text[cursor] == "$" and cursor + 1 < length:
            out.append(text[checkpoint:cursor])
            following = text[cursor + 1]
            if following == "$":
                out.append("$")
                advance = 1
            elif following == "(":
                close = text.find(")", cursor + 2)
                if close == -1:
                    out.append("$(")
                    advance = 1
                else:
                    name = text[cursor + 2:close]
                    out.append(variables[name] if name in variables else f"$({name})")
                    advance = close - cursor
            else:
                out.append("$" + following)
                advance = 1
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    out.append(text[checkpoint:])
    return "".join(out)


def field_ref_value(pod: dict[str, Any], field_path: str, pod_ip: str, host_ip: str) -> str:
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    simple = {
        "metadata.name": metadata.get("name", ""),
        "metadata.namespace": metadata.get("namespace", ""),
        "metadata.uid": metadata.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": host_ip,
    }
    if field_path in simple:
        return str(simple[field_path] or "")
    match = _LABEL_REF.match(field_path)
    if match:
        return str((metadata.get(match.group(1)) or {}).get(match.group("key"), ""))
    if field_path in ("metadata.labels", "metadata.annotations"):
        return format_map(metadata.get(field_path.split(".")[1]) or {})
    raise ContainerConfigError(f"unsupported fieldRef fieldPath {field_path!r}")


def format_map(values: Mapping[str, str]) -> str:
    """The downward-API file format for labels/annotations: `key="value"` lines, sorted."""
    return "\n".join(f'{k}="{_quote(v)}"' for k, v in sorted(values.items()))


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def containers_by_name(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    spec = pod.get("spec") or {}
    return {c["name"]: c for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]}


def build_environment(
    pod: dict[str, Any],
    container: dict[str, Any],
    *,
    pod_ip: str,
    host_ip: str,
    service_env: Mapping[str, str],
    secret: DataLookup,
    config_map: DataLookup,
) -> dict[str, str]:
    """The container's own variables (envFrom, then env), expanded against earlier ones and
    `service_env`; `service_env` entries the container does not override are included too."""
    namespace = (pod.get("metadata") or {}).get("namespace", "")
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix") or ""
        if source.get("configMapRef"):
            ref = source["configMapRef"]
            data = config_map(ref["name"])
            kind = "configmap"
        elif source.get("secretRef"):
            ref = source["secretRef"]
            data = secret(ref["name"])
            kind = "secret"
        else:
            continue
        if data is None:
            if ref.get("optional"):
                continue
            raise ContainerConfigError(f'{kind} "{ref["name"]}" not found')
        for key, value in data.items():
            if _ENV_NAME.match(prefix + key):
                env[prefix + key] = value

    for item in container.get("env") or []:
        name = item["name"]
        if "value" in item or not item.get("valueFrom"):
            env[name] = expand(str(item.get("value") or ""), {**service_env, **env})
            continue
        found = _value_from(pod, container, item["valueFrom"], namespace, pod_ip, host_ip, secret, config_map)
        if found is not None:
            env[name] = found
    return {**service_env, **env}


def _value_from(
    pod: dict[str, Any], container: dict[str, Any], source: dict[str, Any], namespace: str, pod_ip: str, host_ip: str,
    secret: DataLookup, config_map: DataLookup,
) -> str | None:
    if source.get("fieldRef"):
        return field_ref_value(pod, source["fieldRef"]["fieldPath"], pod_ip, host_ip)
    if source.get("resourceFieldRef"):
        ref = source["resourceFieldRef"]
        target = containers_by_name(pod).get(ref.get("containerName") or "", container)
        try:
            return resource_field_value(target, ref["resource"], ref.get("divisor"))
        except InvalidQuantity as e:
            raise ContainerConfigError(str(e)) from e
    for field, lookup, kind in (("secretKeyRef", secret, "Secret"), ("configMapKeyRef", config_map, "ConfigMap")):
        ref = source.get(field)
        if not ref:
            continue
        data = lookup(ref["name"])
        if data is None:
            if ref.get("optional"):
                return None
            raise ContainerConfigError(f'{kind.lower()} "{ref["name"]}" not found')
        if ref["key"] not in data:
            if ref.get("optional"):
                return None
            raise ContainerConfigError(f"couldn't find key {ref['key']} in {kind} {namespace}/{ref['name']}")
        return data[ref["key"]]
    return None
