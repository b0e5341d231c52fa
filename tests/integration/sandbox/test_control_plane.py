"""The real control plane does what Kubernetes does: garbage collection, S3, loopback only."""
from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path

import boto3
import botocore.exceptions
import pytest
from kubernetes import client as k8s

from kube_sandbox.cli import daemon_pid
from kube_sandbox.namespace import processes_in_namespace
from kube_sandbox.testing import Sandbox, wait_for


def test_deleting_an_owner_garbage_collects_its_dependents(sandbox: Sandbox, namespace: str) -> None:
    core = k8s.CoreV1Api(sandbox.api_client())
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    for i in range(3):
        core.create_namespaced_config_map(namespace, {"metadata": {"name": f"dependent-{i}", "ownerReferences": [reference]}})
    core.delete_namespaced_config_map("owner", namespace)

    def dependents() -> list[str]:
        return [c.metadata.name for c in core.list_namespaced_config_map(namespace).items
                if c.metadata.name.startswith("dependent-")]
    wait_for(lambda: not dependents(), timeout=60, what="dependents garbage-collected")


def s3_client(sandbox: Sandbox, secret: str | None = None) -> boto3.client:
    config = sandbox.config
    return boto3.client("s3", endpoint_url=config.s3_endpoint, region_name="us-east-1",
                        aws_access_key_id=config.s3_access_key,
                        aws_secret_access_key=secret or config.s3_secret_key)


def test_s3_stores_objects_and_refuses_wrong_credentials(sandbox: Sandbox, namespace: str) -> None:
    s3 = s3_client(sandbox)
    bucket = f"bucket-{namespace}"[:63]
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="snapshots/one.db", Body=b"snapshot bytes")
    assert s3.get_object(Bucket=bucket, Key="snapshots/one.db")["Body"].read() == b"snapshot bytes"
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        s3_client(sandbox, secret="wrong-secret").get_object(Bucket=bucket, Key="snapshots/one.db")
    assert refused.value.response["Error"]["Code"] in ("SignatureDoesNotMatch", "AccessDenied", "InvalidAccessKeyId")


def _tcp_sockets() -> dict[str, tuple[str, str]]:
    """socket inode -> (local address, remote address) for every TCP socket on the machine."""
    sockets: dict[str, tuple[str, str]] = {}
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            sockets[fields[9]] = (_address(fields[1], width), _address(fields[2], width))
    return sockets


def _address(hex_address: str, width: int) -> str:
    host = hex_address.split(":")[0]
    raw = bytes.fromhex(host)
    if width == 8:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    address = ipaddress.IPv6Address(words)
    return str(address.ipv4_mapped or address)


def test_every_sandbox_connection_stays_on_loopback(sandbox: Sandbox) -> None:
    pid = daemon_pid(sandbox.config)
    assert pid is not None
    pids = processes_in_namespace(os.readlink(f"/proc/{pid}/ns/mnt"))
    sockets = _tcp_sockets()
    seen: list[tuple[int, str, str]] = []
    for process in pids:
        try:
            fds = os.listdir(f"/proc/{process}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{process}/fd/{fd}")
            except OSError:
                continue
            match = re.fullmatch(r"socket:\[(\d+)\]", target)
            if match and match.group(1) in sockets:
                local, remote = sockets[match.group(1)]
                seen.append((process, local, remote))
    assert seen, "found no sandbox sockets to check"
    outside = [(p, local, r) for p, local, r in seen
               if r not in ("0.0.0.0", "::") and not ipaddress.ip_address(r).is_loopback]
    listening_outside = [(p, local, r) for p, local, r in seen
                         if local not in ("0.0.0.0", "::") and not ipaddress.ip_address(local).is_loopback]
    assert not outside, f"connections leaving loopback: {outside}"
    assert not listening_outside, f"sockets bound outside loopback: {listening_outside}"
    hosts = sandbox.config.hosts_file.read_text().split()
    addresses = [word for word in hosts if re.fullmatch(r"[0-9.]+|[0-9a-f:]+", word) and word.count(".") == 3]
    assert addresses and all(ipaddress.ip_address(a).is_loopback for a in addresses), addresses


WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.sandbox.test"},
    "spec": {
        "group": "sandbox.test", "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                      "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                          "spec": {"type": "object", "properties": {"note": {"type": "string"},
                                                                    "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
                          "status": {"type": "object", "properties": {"message": {"type": "string"}}}}}}}],
    },
}


def test_custom_resources_with_maps_and_empty_strings_are_stored(sandbox: Sandbox, namespace: str) -> None:
    """Guards the two patches of the kube build: map-valued custom resources used to crash the
    apiserver (reflect2 1.0.1), and "" used to be refused as null (OpenAPI zero-value check)."""
    api = sandbox.api_client()
    extensions = k8s.ApiextensionsV1Api(api)
    try:
        extensions.create_custom_resource_definition(WIDGET_CRD)
    except k8s.ApiException as e:
        if e.status != 409:
            raise
    custom = k8s.CustomObjectsApi(api)

    def create() -> dict[str, object]:
        body = {"apiVersion": "sandbox.test/v1", "kind": "Widget", "metadata": {"name": "w"},
                "spec": {"note": "", "labels": {"a": "1", "b": ""}}}
        created: dict[str, object] = custom.create_namespaced_custom_object("sandbox.test", "v1", namespace, "widgets", body)
        return created
    created = wait_for(create, timeout=30, what="Widget created once its CRD is served")
    assert created["spec"] == {"note": "", "labels": {"a": "1", "b": ""}}
    patched = custom.patch_namespaced_custom_object_status(
        "sandbox.test", "v1", namespace, "widgets", "w", {"status": {"message": ""}})
    assert patched["status"] == {"message": ""}
