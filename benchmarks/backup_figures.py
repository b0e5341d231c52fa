"""Backup throughput and the backup operator's memory: one one-shot EtcdBackup of a 256 MB+
database against a floor measured in the same run on the same member (`etcdctl snapshot save` to
a file, then a plain boto3 `upload_file` to the same S3), and the operator's peak RSS growth while
it backs up (it streams file -> S3, so that must not grow with the database)."""
from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
from kubernetes import client as k8s
from kubernetes import watch

from benchmarks.environment import CLUSTER_GROUP, CLUSTER_PLURAL, CLUSTER_VERSION, bench_namespace
from benchmarks.process_status import read_process_status
from benchmarks.results import Result, describe_samples, median
from kube_sandbox import binaries
from kube_sandbox.config import CHECKOUT_DIR
from kube_sandbox.testing import Sandbox, wait_for

log = logging.getLogger(__name__)

BACKUP_NAMESPACE = "etcd-operator"
BACKUP_DEPLOYMENT = "etcd-backup-operator"
BACKUP_CONTAINER = "etcd-backup-operator"
BACKUP_SELECTOR = "app.kubernetes.io/name=etcd-backup-operator"
DATABASE_MIB = 256
SMALL_DATABASE_MIB = 32
VALUE_BYTES = 1024 * 1024  # etcd takes requests up to 1.5 MiB
# Throughput at least 0.9 of the floor's, i.e. time at most 1/0.9 of it.
TIME_RATIO_TARGET = 1 / 0.9
RSS_GROWTH_TARGET_MIB = 64.0
RSS_SAMPLE_SECONDS = 0.05
BACKUP_TIMEOUT_SECONDS = 900.0


def deploy_backup_operator(sandbox: Sandbox) -> str:
    """Apply the backup CRD and deploy/backup-operator.yaml, restart it; the leading pod's name."""
    sandbox.kubectl("apply", "-f", str(CHECKOUT_DIR / "crds" / "etcdbackups.yaml"))
    sandbox.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/etcdbackups.etcd.database.coreos.com")
    sandbox.kubectl("apply", "-f", str(CHECKOUT_DIR / "deploy" / "backup-operator.yaml"))
    # Restarted, so that it runs this checkout's code (a pod runs what it was started with).
    sandbox.kubectl("-n", BACKUP_NAMESPACE, "rollout", "restart", f"deployment/{BACKUP_DEPLOYMENT}")
    sandbox.kubectl("-n", BACKUP_NAMESPACE, "rollout", "status", f"deployment/{BACKUP_DEPLOYMENT}", "--timeout=120s",
                    timeout=130)
    core: Any = k8s.CoreV1Api(sandbox.api_client())

    def leading() -> str:
        pods = core.list_namespaced_pod(BACKUP_NAMESPACE, label_selector=BACKUP_SELECTOR).items
        if len(pods) != 1:
            return ""
        name: str = pods[0].metadata.name
        logs = sandbox.kubectl("-n", BACKUP_NAMESPACE, "logs", name, check=False).stdout
        return name if "became leader" in logs else ""
    return wait_for(leading, timeout=120, what="one backup operator pod, leading")


def _create_bucket(sandbox: Sandbox, bucket: str) -> None:
    config = sandbox.config
    boto3.client("s3", endpoint_url=config.s3_endpoint, region_name="us-east-1", aws_access_key_id=config.s3_access_key,
                 aws_secret_access_key=config.s3_secret_key).create_bucket(Bucket=bucket)


def _delete_bucket(sandbox: Sandbox, bucket: str) -> None:
    """Buckets are volumes of their own in SeaweedFS, which has only so many."""
    config = sandbox.config
    s3 = boto3.client("s3", endpoint_url=config.s3_endpoint, region_name="us-east-1",
                      aws_access_key_id=config.s3_access_key, aws_secret_access_key=config.s3_secret_key)
    for entry in s3.list_objects_v2(Bucket=bucket).get("Contents") or []:
        s3.delete_object(Bucket=bucket, Key=entry["Key"])
    s3.delete_bucket(Bucket=bucket)


def fill(client_url: str, mib: int, *, start: int) -> None:
    """Write `mib` MiB of incompressible values through etcd's JSON gateway (keys from `start` on)."""
    for index in range(start, start + mib):
        body = json.dumps({"key": base64.b64encode(f"/bench/{index:06d}".encode()).decode(),
                           "value": base64.b64encode(os.urandom(VALUE_BYTES)).decode()}).encode()
        request = urllib.request.Request(f"{client_url}/v3/kv/put", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()


def floor_seconds(client_url: str, upload: Callable[[str], None]) -> tuple[float, int]:
    """etcdctl snapshot save to a file + `upload(file)` (an SDK's plain upload), as a person would
    do it by hand: seconds for both, and the snapshot's size."""
    etcdctl = binaries.etcd_dir(binaries.newest_etcd_version()) / "etcdctl"
    with tempfile.TemporaryDirectory(prefix="bench-backup-floor-") as directory:
        path = Path(directory) / "snapshot.db"
        started = time.monotonic()
        subprocess.run([str(etcdctl), f"--endpoints={client_url}", "--command-timeout=600s", "snapshot", "save",
                        str(path)], check=True, capture_output=True, timeout=BACKUP_TIMEOUT_SECONDS)
        upload(str(path))
        return time.monotonic() - started, path.stat().st_size


def _floor_seconds(sandbox: Sandbox, client_url: str, bucket: str, key: str) -> tuple[float, int]:
    """etcdctl snapshot save + boto3 upload_file."""
    config = sandbox.config
    s3 = boto3.client("s3", endpoint_url=config.s3_endpoint, region_name="us-east-1",
                      aws_access_key_id=config.s3_access_key, aws_secret_access_key=config.s3_secret_key)
    return floor_seconds(client_url, lambda path: s3.upload_file(path, bucket, key))


def _create_aws_secret(sandbox: Sandbox, namespace: str) -> None:
    config = sandbox.config
    core: Any = k8s.CoreV1Api(sandbox.api_client())
    files = {"credentials": f"[default]\naws_access_key_id = {config.s3_access_key}\n"
                            f"aws_secret_access_key = {config.s3_secret_key}\n"}
    core.create_namespaced_secret(namespace, {"metadata": {"name": "aws"}, "stringData": files})


def operator_backup(sandbox: Sandbox, namespace: str, cluster: str, bucket: str, pid: int,
                     name: str, storage_fields: dict[str, Any] | None = None) -> tuple[float, dict[str, Any], float, float]:
    """Create a one-shot EtcdBackup (to the sandbox's S3, or to `storage_fields`: `storageType` and
    its section); seconds until status says succeeded, that status, RSS before and peak."""
    config = sandbox.config
    custom: Any = k8s.CustomObjectsApi(sandbox.api_client())
    baseline = read_process_status(pid).rss_mib
    peak = [baseline]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(RSS_SAMPLE_SECONDS):
            try:
                peak[0] = max(peak[0], read_process_status(pid).rss_mib)
            except (FileNotFoundError, ProcessLookupError):
                return
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    body = {"apiVersion": f"{CLUSTER_GROUP}/{CLUSTER_VERSION}", "kind": "EtcdBackup", "metadata": {"name": name},
            "spec": {"etcdCluster": {"name": cluster}, **(storage_fields or {
                "storageType": "S3", "s3": {"path": f"{bucket}/{name}.backup", "awsSecret": "aws",
                                            "endpoint": config.s3_endpoint, "forcePathStyle": True}})}}
    started = time.monotonic()
    custom.create_namespaced_custom_object(CLUSTER_GROUP, CLUSTER_VERSION, namespace, "etcdbackups", body)
    try:
        status = _watch_until_succeeded(custom, namespace, name)
    finally:
        done.set()
        sampler.join()
    return time.monotonic() - started, status, baseline, peak[0]


def _watch_until_succeeded(custom: Any, namespace: str, name: str) -> dict[str, Any]:
    """The EtcdBackup's status once it says succeeded, seen by a watch: the time measured ends when
    the status is written, not at the next poll. A watch that ends early (its server-side timeout)
    is started again; its first event is the object as it is then."""
    deadline = time.monotonic() + BACKUP_TIMEOUT_SECONDS
    stream: Any = watch.Watch()  # type: ignore[no-untyped-call]
    try:
        while (left := deadline - time.monotonic()) > 0:
            for event in stream.stream(custom.list_namespaced_custom_object, CLUSTER_GROUP, CLUSTER_VERSION,
                                       namespace, "etcdbackups", field_selector=f"metadata.name={name}",
                                       timeout_seconds=max(1, int(left))):
                status: dict[str, Any] = event["object"].get("status") or {}
                if status.get("succeeded") is False:
                    raise RuntimeError(f"the backup failed: {status.get('Reason')}")
                if status.get("succeeded"):
                    return status
    finally:
        stream.stop()
    raise TimeoutError(f"EtcdBackup {namespace}/{name} did not succeed within {BACKUP_TIMEOUT_SECONDS:.0f}s")


def backup_operator_pid(sandbox: Sandbox) -> int:
    """The backup operator deployed (restarted on this checkout's code) and its process id."""
    pod = deploy_backup_operator(sandbox)
    pid = sandbox.faults.pod_pid(BACKUP_NAMESPACE, pod, BACKUP_CONTAINER)
    if pid is None:
        raise RuntimeError(f"the sandbox knows no process for {BACKUP_NAMESPACE}/{pod}")
    return pid


def one_member_cluster(sandbox: Sandbox, namespace: str, cluster: str) -> str:
    """An EtcdCluster of one member, Running; its member's client URL."""
    custom: Any = k8s.CustomObjectsApi(sandbox.api_client())
    core: Any = k8s.CoreV1Api(sandbox.api_client())
    custom.create_namespaced_custom_object(CLUSTER_GROUP, CLUSTER_VERSION, namespace, CLUSTER_PLURAL, {
        "apiVersion": f"{CLUSTER_GROUP}/{CLUSTER_VERSION}", "kind": "EtcdCluster", "metadata": {"name": cluster},
        "spec": {"size": 1}})

    def member_ip() -> str | None:
        pods = core.list_namespaced_pod(namespace, label_selector=f"etcd_cluster={cluster}").items
        status = custom.get_namespaced_custom_object(CLUSTER_GROUP, CLUSTER_VERSION, namespace, CLUSTER_PLURAL,
                                                     cluster).get("status") or {}
        ready = pods and pods[0].status.pod_ip and status.get("phase") == "Running"
        return str(pods[0].status.pod_ip) if ready else None
    return f"http://{wait_for(member_ip, timeout=240, what='the bench cluster Running')}:2379"


def measure_backup(sandbox: Sandbox, repeat: int, database_mib: int = DATABASE_MIB) -> list[Result]:
    pid = backup_operator_pid(sandbox)
    with bench_namespace(sandbox, "backup") as namespace:
        cluster = "bench-backup"
        client_url = one_member_cluster(sandbox, namespace, cluster)
        bucket_name = f"bench-backup-{int(time.time())}"
        _create_bucket(sandbox, bucket_name)
        _create_aws_secret(sandbox, namespace)
        # A small database first: a warm-up backup (the first one loads boto3), then one whose RSS
        # growth is compared with the large database's, to show it does not depend on the size.
        log.info("writing %d MiB into %s", SMALL_DATABASE_MIB, cluster)
        fill(client_url, SMALL_DATABASE_MIB, start=0)
        operator_backup(sandbox, namespace, cluster, bucket_name, pid, "warm-up")
        _, small_status, small_baseline, small_peak = operator_backup(sandbox, namespace, cluster, bucket_name, pid,
                                                                      "small")
        small_mib = small_status["lastBackup"]["size"] / (1024 * 1024)
        log.info("%.0f MiB database: RSS %.1f -> peak %.1f MiB", small_mib, small_baseline, small_peak)
        log.info("writing %d MiB more into %s", database_mib, cluster)
        fill(client_url, database_mib, start=SMALL_DATABASE_MIB)
        bucket = bucket_name
        floors, runs, growths = [], [], []
        for run in range(repeat):  # floor and operator interleaved; medians reported
            floor, size = _floor_seconds(sandbox, client_url, bucket, f"floor-{run}.backup")
            seconds, status, baseline, peak = operator_backup(sandbox, namespace, cluster, bucket, pid, f"bench-{run}")
            log.info("run %d: floor %.2fs for %d bytes; operator %.2fs (its own measure %.2fs); RSS %.1f -> peak "
                     "%.1f MiB", run, floor, size, seconds, status["lastBackup"]["durationSeconds"], baseline, peak)
            floors.append(floor)
            runs.append(seconds)
            growths.append(peak - baseline)
        floor, seconds = median(floors), median(runs)
        _delete_bucket(sandbox, bucket)
        mib = status["lastBackup"]["size"] / (1024 * 1024)
        return [
            Result.against_floor(
                f"backup of a {mib:.0f} MiB database (one-shot EtcdBackup -> S3)", "s", seconds, floor,
                target=TIME_RATIO_TARGET,
                note=f"throughput {mib / seconds:.1f} MiB/s vs floor {size / (1024 * 1024) / floor:.1f} MiB/s "
                     f"(etcdctl snapshot save + boto3 upload_file): ratio {floor / seconds:.2f}, target >= 0.9; "
                     f"{describe_samples(runs)} (floor {describe_samples(floors)})"),
            Result.alone("backup operator peak RSS growth during that backup", "MiB", max(growths),
                         target=RSS_GROWTH_TARGET_MIB,
                         note="largest of: " + ", ".join(f"{g:.1f}" for g in growths)
                              + f"; {small_peak - small_baseline:.1f} MiB backing up the same cluster at "
                                f"{small_mib:.0f} MiB (after a warm-up backup)"),
        ]
