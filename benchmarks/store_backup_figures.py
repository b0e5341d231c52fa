"""Backup throughput per store: one one-shot EtcdBackup to S3 and OSS (SeaweedFS's S3 API), ABS
(Azurite) and GCS (fake-gcs-server) each, against a floor measured in the same run on the same
member and server, with the operator's CPU share (`cpu_share`): `etcdctl snapshot save` to a
file, then that store's SDK uploading the file as the operator does (azure-storage-blob
`upload_blob` in 8 MiB blocks, 4 at once; google-cloud-storage `upload_from_filename`, resumable
in 8 MiB chunks; boto3 `upload_file`).
Then the cluster grows to `rss_snapshot_mib` and one more backup per store (S3 too) measures
the backup operator's peak RSS growth, against its growth backing up the small warm-up database:
memory must stay flat in the snapshot's size."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import boto3
from azure.storage.blob import BlobServiceClient
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage as gcs_sdk
from kubernetes import client as k8s

from benchmarks.backup_figures import (
    DATABASE_MIB,
    RSS_GROWTH_TARGET_MIB,
    SMALL_DATABASE_MIB,
    backup_operator_pid,
    fill,
    floor_seconds,
    one_member_cluster,
    operator_backup,
)
from benchmarks.cpu_share import cpu_cgroup_of, cpu_shares, run_in_cpu_cgroup
from benchmarks.environment import bench_namespace
from benchmarks.results import Result, describe_samples, median
from etcd_common.api.storage_locations import OtherLocation, S3Location, StorageLocation
from etcd_common.storage import abs as abs_storage
from etcd_common.storage import gcs
from etcd_common.storage.locations import storage_for_location
from etcd_common.storage.objects import BucketNotFound, ObjectStorage
from kube_sandbox.config import AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY
from kube_sandbox.testing import Sandbox

log = logging.getLogger(__name__)
# The Azure SDK logs every request and response at INFO; the table is what matters here.
AZURE_HTTP_LOGGER = "azure.core.pipeline.policies.http_logging_policy"

SECRET = "store-credentials"
STORAGE_TYPES = ("ABS", "GCS", "OSS")
RSS_STORAGE_TYPES = ("S3", *STORAGE_TYPES)
THROUGHPUT_STORAGE_TYPES = RSS_STORAGE_TYPES  # S3 too: every backend's ratio from one run
# Throughput at least this share of the floor's (issue 23's done-when).
THROUGHPUT_TARGET = 0.95


@dataclass(frozen=True)
class BenchStore:
    """One store on its sandbox server: the secret (CoreOS's keys), the spec's endpoint, and the
    SDK upload of the floor."""

    storage_type: str
    secret_data: dict[str, str]
    spec_endpoint: str
    floor_upload: Callable[[str, str, str], None]  # (file, bucket, key)

    @property
    def secret_name(self) -> str:
        return f"{SECRET}-{self.storage_type.lower()}"

    def fields(self, bucket: str, name: str) -> dict[str, Any]:
        """EtcdBackup spec fields writing `<bucket>/<name>.backup` to this store."""
        section = self.storage_type.lower()
        secret_field = {"S3": "awsSecret", "ABS": "absSecret", "GCS": "gcpSecret", "OSS": "ossSecret"}[
            self.storage_type]
        endpoint = {"endpoint": self.spec_endpoint} if self.spec_endpoint else {}
        path_style = {"forcePathStyle": True} if self.storage_type == "S3" else {}
        return {"storageType": self.storage_type,
                section: {"path": f"{bucket}/{name}.backup", secret_field: self.secret_name, **endpoint,
                          **path_style}}

    def storage(self) -> ObjectStorage:
        """The operators' client of this store (bucket creation and cleanup)."""
        if self.storage_type == "S3":
            location = StorageLocation("S3", s3=S3Location("bucket/key", self.secret_name, self.spec_endpoint,
                                                           force_path_style=True))
        else:
            location = StorageLocation(self.storage_type,
                                       other=OtherLocation("bucket/key", self.secret_name, self.spec_endpoint))
        return storage_for_location(location, "bench", lambda namespace, name: {"stringData": self.secret_data})


def bench_store(sandbox: Sandbox, storage_type: str) -> BenchStore:
    config = sandbox.config
    if storage_type == "ABS":
        service = BlobServiceClient(config.abs_endpoint, max_block_size=abs_storage.BLOCK_SIZE_BYTES,
                                    credential={"account_name": AZURITE_ACCOUNT, "account_key": AZURITE_ACCOUNT_KEY})

        def abs_upload(path: str, bucket: str, key: str) -> None:
            with open(path, "rb") as source:
                service.get_blob_client(bucket, key).upload_blob(source, overwrite=True,
                                                                 max_concurrency=abs_storage.MAX_CONCURRENCY)
        return BenchStore("ABS", {"storage-account": AZURITE_ACCOUNT, "storage-key": AZURITE_ACCOUNT_KEY,
                                  "endpoint": config.abs_endpoint}, "", abs_upload)
    if storage_type == "GCS":
        client = gcs_sdk.Client(project=gcs.DEFAULT_PROJECT, credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
                                client_options={"api_endpoint": config.gcs_endpoint})

        def gcs_upload(path: str, bucket: str, key: str) -> None:
            client.bucket(bucket).blob(key, chunk_size=gcs.CHUNK_SIZE_BYTES).upload_from_filename(path)
        return BenchStore("GCS", {"access-token": "fake-gcs-server-accepts-any"}, config.gcs_endpoint, gcs_upload)
    s3 = boto3.client("s3", endpoint_url=config.s3_endpoint, region_name="us-east-1",
                      aws_access_key_id=config.s3_access_key, aws_secret_access_key=config.s3_secret_key)
    if storage_type == "S3":
        return BenchStore("S3", {"credentials": f"[default]\naws_access_key_id = {config.s3_access_key}\n"
                                                f"aws_secret_access_key = {config.s3_secret_key}\n"},
                          config.s3_endpoint, lambda path, bucket, key: s3.upload_file(path, bucket, key))
    return BenchStore("OSS", {"accessKeyID": config.s3_access_key, "accessKeySecret": config.s3_secret_key},
                      config.s3_endpoint, lambda path, bucket, key: s3.upload_file(path, bucket, key))


def measure_store_backups(sandbox: Sandbox, repeat: int, database_mib: int = DATABASE_MIB,
                          rss_snapshot_mib: int = 0) -> list[Result]:
    """One row per store: the one-shot EtcdBackup's time against the floor's (medians of `repeat`
    interleaved runs) on one cluster of `database_mib` MiB (plus a small warm-up database); then,
    with `rss_snapshot_mib`, the cluster grown to that size and one peak-RSS row per store."""
    logging.getLogger(AZURE_HTTP_LOGGER).setLevel(logging.WARNING)
    pid = backup_operator_pid(sandbox)
    results: list[Result] = []
    with bench_namespace(sandbox, "backup-stores") as namespace:
        cluster = "bench-stores"
        client_url = one_member_cluster(sandbox, namespace, cluster)
        fill(client_url, SMALL_DATABASE_MIB, start=0)
        stores = [bench_store(sandbox, storage_type) for storage_type in RSS_STORAGE_TYPES]
        core: Any = k8s.CoreV1Api(sandbox.api_client())
        bucket = f"bench-stores-{int(time.time())}"
        small_growth: dict[str, float] = {}
        for store in stores:
            core.create_namespaced_secret(namespace, {"metadata": {"name": store.secret_name},
                                                      "stringData": store.secret_data})
            store.storage().create_bucket(bucket)
            # The first backup to each store loads its SDK in the operator: a warm-up; the second
            # is the small database's RSS growth.
            kind = store.storage_type.lower()
            operator_backup(sandbox, namespace, cluster, bucket, pid, f"warm-up-{kind}", store.fields(bucket, f"w-{kind}"))
            _, _, baseline, peak = operator_backup(sandbox, namespace, cluster, bucket, pid, f"small-{kind}",
                                                   store.fields(bucket, f"small-{kind}"))
            small_growth[store.storage_type] = peak - baseline
            log.info("%s: %d MiB warm-up database, RSS %.1f -> peak %.1f MiB", store.storage_type,
                     SMALL_DATABASE_MIB, baseline, peak)
        fill(client_url, database_mib, start=SMALL_DATABASE_MIB)
        try:
            for store in stores:
                if store.storage_type in THROUGHPUT_STORAGE_TYPES:
                    results.append(_measure_one(sandbox, namespace, cluster, client_url, pid, store, bucket, repeat))
            if rss_snapshot_mib > database_mib + SMALL_DATABASE_MIB:
                log.info("writing up to %d MiB into %s", rss_snapshot_mib, cluster)
                fill(client_url, rss_snapshot_mib - database_mib - SMALL_DATABASE_MIB,
                     start=SMALL_DATABASE_MIB + database_mib)
            for store in stores:
                results.append(_measure_rss(sandbox, namespace, cluster, pid, store, bucket,
                                            small_growth[store.storage_type]))
        finally:
            for store in stores:
                _remove_bucket(store.storage(), bucket)
    return results


def _measure_rss(sandbox: Sandbox, namespace: str, cluster: str, pid: int, store: BenchStore, bucket: str,
                 small_growth: float) -> Result:
    """The backup operator's peak RSS growth during one backup of the grown database; its object
    is removed at once (the emulators keep what they are given on this machine's disk)."""
    name = f"rss-{store.storage_type.lower()}"
    _, status, baseline, peak = operator_backup(sandbox, namespace, cluster, bucket, pid, name,
                                                store.fields(bucket, name))
    store.storage().delete(bucket, f"{name}.backup")
    mib = status["lastBackup"]["size"] / (1024 * 1024)
    log.info("%s: %.0f MiB snapshot, RSS %.1f -> peak %.1f MiB", store.storage_type, mib, baseline, peak)
    return Result.alone(
        f"backup operator peak RSS growth backing up a {mib:.0f} MiB snapshot to {store.storage_type}", "MiB",
        peak - baseline, target=RSS_GROWTH_TARGET_MIB,
        note=f"RSS {baseline:.1f} -> peak {peak:.1f} MiB; {small_growth:.1f} MiB backing up the "
             f"{SMALL_DATABASE_MIB} MiB warm-up database (flat: not growing with the snapshot)")


def _measure_one(sandbox: Sandbox, namespace: str, cluster: str, client_url: str, pid: int, store: BenchStore,
                 bucket: str, repeat: int) -> Result:
    """The floor runs in a process of its own with the operator's CPU share (`cpu_share`), its
    SDK client made there (a forked process must not share the parent's connections)."""
    kind = store.storage_type.lower()
    cpu_cgroup = cpu_cgroup_of(pid)
    shares = cpu_shares(cpu_cgroup)
    floors, runs = [], []
    size = 0
    status: dict[str, Any] = {}
    for run in range(repeat):  # floor and operator interleaved; medians reported
        key = f"floor-{run}.backup"
        floor, size = run_in_cpu_cgroup(cpu_cgroup, lambda: floor_seconds(
            client_url, lambda path: bench_store(sandbox, store.storage_type).floor_upload(path, bucket, key)))
        name = f"bench-{kind}-{run}"
        seconds, status, _, _ = operator_backup(sandbox, namespace, cluster, bucket, pid, name,
                                                store.fields(bucket, name))
        log.info("%s run %d: floor %.2fs for %d bytes; operator %.2fs (its own measure %.2fs)", store.storage_type,
                 run, floor, size, seconds, status["lastBackup"]["durationSeconds"])
        floors.append(floor)
        runs.append(seconds)
    floor, seconds = median(floors), median(runs)
    mib = status["lastBackup"]["size"] / (1024 * 1024)
    return Result.against_floor(
        f"backup of a {mib:.0f} MiB database (one-shot EtcdBackup -> {store.storage_type})", "s", seconds, floor,
        target=1 / THROUGHPUT_TARGET,
        note=f"throughput {mib / seconds:.1f} MiB/s vs floor {size / (1024 * 1024) / floor:.1f} MiB/s "
             f"(etcdctl snapshot save + the {store.storage_type} SDK's upload): ratio {floor / seconds:.2f}, "
             f"target >= {THROUGHPUT_TARGET}; {describe_samples(runs)} (floor {describe_samples(floors)}); floor "
             + (f"run with the operator container's CPU share ({shares} cpu.shares)" if shares
                else "run at this process's CPU share (no operator cgroup to join)"))


def _remove_bucket(storage: ObjectStorage, bucket: str) -> None:
    """Emulators keep what they are given; SeaweedFS has only so many volumes for buckets. S3 and
    OSS share SeaweedFS and the bucket name: the second finds it gone."""
    try:
        for info in storage.list(bucket):
            storage.delete(bucket, info.key)
    except BucketNotFound:
        return
    storage.delete_bucket(bucket)
