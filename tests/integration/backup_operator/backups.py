"""Helpers for backup tests: EtcdBackups of one namespace, the sandbox's S3, the awsSecret, and
restoring a snapshot into a scratch etcd to see which keys it serves."""
from __future__ import annotations

import base64
import json
import secrets
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from etcd_common.etcd.etcdutl import snapshot_restore
from etcd_common.storage import s3
from kube_sandbox import binaries
from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.etcd_operator.operator_clusters import Clusters

GROUP, VERSION, PLURAL = "etcd.database.coreos.com", "v1beta2", "etcdbackups"
AWS_SECRET = "aws"


def coreos_aws_files(access_key: str, secret_key: str, *, s3_endpoint: str = "") -> dict[str, str]:
    """The CoreOS awsSecret's two files. With `s3_endpoint`, the config file names that server and
    path-style addressing as the AWS SDKs' shared config does, so an `s3` section with only `path`
    and `awsSecret` (the CoreOS examples) reaches it."""
    config = "[default]\nregion = us-east-1\n"
    if s3_endpoint:
        config += f"endpoint_url = {s3_endpoint}\ns3 =\n    addressing_style = path\n"
    return {
        "credentials": f"[default]\naws_access_key_id = {access_key}\naws_secret_access_key = {secret_key}\n",
        "config": config,
    }


def sandbox_storage(sandbox: Sandbox) -> s3.S3Storage:
    config = sandbox.config
    return s3.S3Storage(endpoint=config.s3_endpoint, force_path_style=True,
                        credentials=s3.AwsCredentials(config.s3_access_key, config.s3_secret_key), max_attempts=1)


def etcd_backup(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "EtcdBackup", "metadata": {"name": name}, "spec": spec}


class Backups:
    """EtcdBackups, secrets and events of one test namespace."""

    def __init__(self, sandbox: Sandbox, namespace: str) -> None:
        self.sandbox = sandbox
        self.namespace = namespace
        api = sandbox.api_client()
        self.custom = k8s.CustomObjectsApi(api)
        self.core = k8s.CoreV1Api(api)

    def s3_spec(self, path: str, *, secret: str = AWS_SECRET) -> dict[str, Any]:
        return {"path": path, "awsSecret": secret, "endpoint": self.sandbox.config.s3_endpoint, "forcePathStyle": True}

    def create_aws_secret(self, name: str = AWS_SECRET, *, secret_key: str | None = None,
                          files: dict[str, str] | None = None, server_in_config: bool = False) -> None:
        """The awsSecret `name` with the sandbox's keys (or `files` as given); `server_in_config`:
        its config file also names the sandbox's S3 server (for specs without `endpoint`)."""
        config = self.sandbox.config
        if files is None:
            files = coreos_aws_files(config.s3_access_key, secret_key or config.s3_secret_key,
                                     s3_endpoint=config.s3_endpoint if server_in_config else "")
        data = {k: base64.b64encode(v.encode()).decode() for k, v in files.items()}
        body = {"metadata": {"name": name}, "type": "Opaque", "data": data}
        try:
            self.core.create_namespaced_secret(self.namespace, body)
        except k8s.ApiException as error:
            if error.status != 409:
                raise
            self.core.replace_namespaced_secret(name, self.namespace, body)

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, body)
        return result

    def apply_yaml(self, text: str) -> None:
        self.sandbox.kubectl("-n", self.namespace, "apply", "-f", "-", input=text)

    def get(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)
        return result

    def patch_spec(self, name: str, spec: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name, {"spec": spec})

    def delete(self, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)

    def status(self, name: str) -> dict[str, Any]:
        return self.get(name).get("status") or {}

    def wait_status(self, name: str, predicate: Callable[[dict[str, Any]], bool], what: str,
                    timeout: float = 180) -> dict[str, Any]:
        seen: list[dict[str, Any]] = []

        def check() -> dict[str, Any] | None:
            status = self.status(name)
            seen[:] = [status]
            return status if predicate(status) else None
        try:
            return wait_for(check, timeout=timeout, what=f"{self.namespace}/{name}: {what}")
        except AssertionError as error:
            raise AssertionError(f"{error}\nlast status: {json.dumps(seen[-1] if seen else None, indent=1)}") from None

    def wait_succeeded(self, name: str, timeout: float = 180) -> dict[str, Any]:
        return self.wait_status(name, lambda s: s.get("succeeded") is True, "backup succeeded", timeout)

    def wait_failed(self, name: str, reason: str, timeout: float = 180) -> dict[str, Any]:
        return self.wait_status(name, lambda s: s.get("succeeded") is False and s.get("lastResult") == reason,
                                f"failed with {reason}", timeout)

    def events(self, name: str) -> list[Any]:
        selector = f"involvedObject.name={name},involvedObject.kind=EtcdBackup"
        return list(self.core.list_namespaced_event(self.namespace, field_selector=selector).items)

    def has_event(self, name: str, event_type: str, reason: str) -> bool:
        return any(e.type == event_type and e.reason == reason for e in self.events(name))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def keys_in_snapshot(snapshot: Path, workdir: Path) -> dict[str, str]:
    """Restore `snapshot` with etcdutl into a scratch single-member etcd on loopback and return
    every key and value it serves."""
    version = binaries.newest_etcd_version()
    etcd_dir = binaries.etcd_dir(version)
    client, peer = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    workdir.mkdir(parents=True, exist_ok=True)
    data_dir = workdir / "restored"
    snapshot_restore(str(snapshot), data_dir=str(data_dir), name="scratch", initial_cluster=f"scratch={peer}",
                     initial_advertise_peer_urls=[peer], initial_cluster_token="scratch",
                     binary=str(etcd_dir / "etcdutl"))
    log = open(workdir / "scratch-etcd.log", "wb")
    process = subprocess.Popen([str(etcd_dir / "etcd"), "--name", "scratch", "--data-dir", str(data_dir),
                                "--listen-client-urls", client, "--advertise-client-urls", client,
                                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                                "--initial-cluster", f"scratch={peer}"], stdout=log, stderr=subprocess.STDOUT)
    try:
        def read_all() -> dict[str, str] | None:
            result = subprocess.run([str(etcd_dir / "etcdctl"), f"--endpoints={client}", "get", "", "--prefix",
                                     "-w", "json"], capture_output=True, text=True, timeout=10)
            if result.returncode != 0:
                return None
            kvs = json.loads(result.stdout).get("kvs") or []
            return {base64.b64decode(kv["key"]).decode(): base64.b64decode(kv.get("value", "")).decode() for kv in kvs}
        return wait_for(read_all, timeout=60, what="scratch etcd serving the restored snapshot")
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def cluster_revision(clusters: Clusters, name: str) -> int:
    """The revision the EtcdCluster's first endpoint reports."""
    return int(json.loads(clusters.etcdctl(name, "endpoint", "status", "-w", "json"))[0]["Status"]["header"]["revision"])


def download(storage: s3.S3Storage, bucket: str, key: str) -> Path:
    directory = Path(tempfile.mkdtemp(prefix="backup-test-"))
    path = directory / "snapshot.db"
    storage.download_file(bucket, key, str(path))
    return path


def unique_bucket(prefix: str) -> str:
    """A bucket name no other test uses, parallel workers included."""
    return f"{prefix}-{int(time.time() * 1000) % 10**9}-{secrets.token_hex(3)}"
