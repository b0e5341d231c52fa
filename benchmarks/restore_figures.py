"""The restore figure: EtcdRestore created -> restored cluster Running with all members, against a
floor measured in the same run: download the same object from the same S3 server, `etcdutl
snapshot restore` it, plus the raw bring-up floor of a cluster of the same size
(benchmarks.floor)."""
from __future__ import annotations

import base64
import logging
import os
import secrets
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from kubernetes import client as k8s

from benchmarks import floor
from benchmarks.clusters import BenchClusters
from benchmarks.environment import OPERATOR_NAMESPACE, ROLLOUT_TIMEOUT_SECONDS, bench_namespace
from benchmarks.results import Result, describe_samples, median
from etcd_common.storage import s3
from kube_sandbox import binaries
from kube_sandbox.config import CHECKOUT_DIR
from kube_sandbox.testing import Sandbox, wait_for

log = logging.getLogger(__name__)

RESTORE_DEPLOYMENT = "etcd-restore-operator"
GROUP, VERSION, PLURAL = "etcd.database.coreos.com", "v1beta2", "etcdrestores"
BUCKET = "bench-restores"
AWS_SECRET = "aws"
KEYS = 200
VALUE_BYTES = 4096  # 200 x 4 KiB: a snapshot of about 1 MiB


def deploy_restore_operator(sandbox: Sandbox) -> None:
    sandbox.kubectl("apply", "-f", str(Path(CHECKOUT_DIR) / "deploy" / "restore-operator.yaml"))
    sandbox.kubectl("-n", OPERATOR_NAMESPACE, "rollout", "status", f"deployment/{RESTORE_DEPLOYMENT}",
                    f"--timeout={ROLLOUT_TIMEOUT_SECONDS:.0f}s", timeout=ROLLOUT_TIMEOUT_SECONDS + 10)
    wait_for(lambda: "became leader" in sandbox.kubectl("-n", OPERATOR_NAMESPACE, "logs",
                                                        f"deploy/{RESTORE_DEPLOYMENT}", check=False).stdout,
             timeout=90, what="restore operator leading")


def measure_restore(sandbox: Sandbox, repeat: int, size: int = 3) -> list[Result]:
    deploy_restore_operator(sandbox)
    config = sandbox.config
    storage = s3.S3Storage(endpoint=config.s3_endpoint, force_path_style=True,
                           credentials=s3.AwsCredentials(config.s3_access_key, config.s3_secret_key))
    storage.create_bucket(BUCKET)
    operator_samples: list[float] = []
    floor_samples: list[float] = []
    with bench_namespace(sandbox, "restore") as namespace, tempfile.TemporaryDirectory() as scratch:
        clusters = BenchClusters(sandbox, namespace)
        core = k8s.CoreV1Api(sandbox.api_client())
        custom = k8s.CustomObjectsApi(sandbox.api_client())
        _create_aws_secret(core, sandbox, namespace)
        key = _snapshot_of_a_filled_cluster(sandbox, clusters, namespace, storage, scratch)
        for run in range(repeat):
            floor_samples.append(_floor(storage, key, scratch, size))
            name = f"restored-{run}"
            started = time.monotonic()
            custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, {
                "apiVersion": f"{GROUP}/{VERSION}", "kind": "EtcdRestore", "metadata": {"name": name},
                "spec": {"etcdCluster": {"name": name}, "backupStorageType": "S3", "clusterSpec": {"size": size},
                         "s3": {"path": f"{BUCKET}/{key}", "awsSecret": AWS_SECRET, "endpoint": config.s3_endpoint,
                                "forcePathStyle": True}},
            })
            operator_samples.append(clusters.seconds_until(
                started, lambda: clusters.running(name, size), f"{name} restored, Running {size}/{size}",
                timeout=300))
            log.info("restore %d: operator %.2fs, floor %.2fs", size, operator_samples[-1], floor_samples[-1])
            wait_for(lambda: _restore_phase(custom, namespace, name) == "Completed",
                     timeout=60, what=f"{namespace}/{name} restore Completed")
            custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
            clusters.delete(name)
    note = (f"operator {describe_samples(operator_samples)}; floor {describe_samples(floor_samples)}; "
            f"snapshot of {KEYS} keys x {VALUE_BYTES} B")
    return [Result.against_floor(f"restore, size {size}", "s", median(operator_samples), median(floor_samples),
                                 target=None, note=note)]


def _restore_phase(custom: k8s.CustomObjectsApi, namespace: str, name: str) -> str:
    restore = cast(dict[str, Any], custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name))
    return str((restore.get("status") or {}).get("phase") or "")


def _create_aws_secret(core: k8s.CoreV1Api, sandbox: Sandbox, namespace: str) -> None:
    config = sandbox.config
    files = {"credentials": f"[default]\naws_access_key_id = {config.s3_access_key}\n"
                            f"aws_secret_access_key = {config.s3_secret_key}\n",
             "config": "[default]\nregion = us-east-1\n"}
    core.create_namespaced_secret(namespace, k8s.V1Secret(metadata=k8s.V1ObjectMeta(name=AWS_SECRET), data={
        name: base64.b64encode(text.encode()).decode() for name, text in files.items()}))


def _snapshot_of_a_filled_cluster(sandbox: Sandbox, clusters: BenchClusters, namespace: str,
                                  storage: s3.S3Storage, scratch: str) -> str:
    clusters.create("source", 1)
    clusters.seconds_until(time.monotonic(), lambda: clusters.running("source", 1), "source Running 1/1")
    url = f"http://source-client.{namespace}.svc:2379"
    value = "v" * VALUE_BYTES
    for index in range(KEYS):
        result = sandbox.etcdctl([url], "put", f"bench/{index:05d}", value)
        if result.returncode != 0:
            raise RuntimeError(f"put failed: {result.stderr}")
    path = os.path.join(scratch, "source.db")
    result = sandbox.etcdctl([url], "snapshot", "save", path, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"snapshot save failed: {result.stderr}")
    key = f"bench-{secrets.token_hex(4)}.db"
    storage.upload_file(BUCKET, key, path)
    clusters.delete("source")
    return key


def _floor(storage: s3.S3Storage, key: str, scratch: str, size: int) -> float:
    """Download + etcdutl snapshot restore + the raw bring-up of `size` members."""
    directory = tempfile.mkdtemp(dir=scratch)
    etcdutl = str(binaries.etcd_dir(binaries.newest_etcd_version()) / "etcdutl")
    started = time.monotonic()
    path = os.path.join(directory, "snapshot.db")
    storage.download_file(BUCKET, key, path)
    subprocess.run([etcdutl, "snapshot", "restore", path, "--data-dir", os.path.join(directory, "data"),
                    "--name", "floor", "--initial-cluster", "floor=http://127.0.0.1:2380",
                    "--initial-advertise-peer-urls", "http://127.0.0.1:2380", "--initial-cluster-token", "floor",
                    "--bump-revision", "1000000000", "--mark-compacted"],
                   check=True, capture_output=True, timeout=120)
    fetched = time.monotonic() - started
    return fetched + floor.measure_bring_up(size)
