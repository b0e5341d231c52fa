"""The sandbox's other object stores as EtcdBackup and EtcdRestore specs name them, with CoreOS's
secret formats: ABS on Azurite (absSecret, its endpoint in the secret), GCS on fake-gcs-server
(gcpSecret with an access token, spec.gcs.endpoint) and OSS through SeaweedFS's S3 API (ossSecret,
spec.oss.endpoint, as CoreOS's OSS section has it). One parametrized test body serves all three."""
from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from etcd_common.api.storage_locations import OtherLocation, StorageLocation
from etcd_common.storage.locations import storage_for_location
from etcd_common.storage.objects import ObjectStorage
from kube_adapter.errors import NotFound
from kube_sandbox.config import AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY
from kube_sandbox.testing import Sandbox
from tests.integration.backup_operator.backups import Backups, unique_bucket

SECRET = "store-credentials"
STORAGE_TYPES = ("ABS", "GCS", "OSS")


@dataclass(frozen=True)
class SandboxStore:
    """One storage type on its sandbox server: the spec section, its secret's data, the store's
    name for sandbox.faults.stop_store, and a client for looking at the objects."""

    storage_type: str
    secret_data: dict[str, str]
    spec_endpoint: str  # "" for ABS: its endpoint is in the secret
    server: str  # "abs", "gcs" or "s3"

    @property
    def section(self) -> str:
        return self.storage_type.lower()

    @property
    def secret_field(self) -> str:
        return {"ABS": "absSecret", "GCS": "gcpSecret", "OSS": "ossSecret"}[self.storage_type]

    def location(self, path: str) -> dict[str, Any]:
        return {"path": path, self.secret_field: SECRET, **({"endpoint": self.spec_endpoint} if self.spec_endpoint else {})}

    def backup_fields(self, path: str) -> dict[str, Any]:
        """EtcdBackup spec fields writing to `path` ("<bucket>/<key>")."""
        return {"storageType": self.storage_type, self.section: self.location(path)}

    def restore_fields(self, path: str) -> dict[str, Any]:
        """EtcdRestore spec fields reading `path`."""
        return {"backupStorageType": self.storage_type, self.section: self.location(path)}

    def create_secret(self, backups: Backups) -> None:
        data = {k: base64.b64encode(v.encode()).decode() for k, v in self.secret_data.items()}
        backups.core.create_namespaced_secret(backups.namespace, k8s.V1Secret(
            metadata=k8s.V1ObjectMeta(name=SECRET), type="Opaque", data=data))

    def storage(self) -> ObjectStorage:
        """A client of this store with the same secret, as the operators build theirs."""
        def read_secret(namespace: str, name: str) -> dict[str, Any]:
            if name != SECRET:
                raise NotFound(f"secret {namespace}/{name}")
            return {"stringData": self.secret_data}
        location = StorageLocation(self.storage_type, other=OtherLocation("bucket/key", SECRET, self.spec_endpoint))
        return storage_for_location(location, "tests", read_secret, max_attempts=1)


def sandbox_store(sandbox: Sandbox, storage_type: str) -> SandboxStore:
    config = sandbox.config
    if storage_type == "ABS":
        return SandboxStore("ABS", {"storage-account": AZURITE_ACCOUNT, "storage-key": AZURITE_ACCOUNT_KEY,
                                    "endpoint": config.abs_endpoint}, "", "abs")
    if storage_type == "GCS":
        return SandboxStore("GCS", {"access-token": "fake-gcs-server-accepts-any"}, config.gcs_endpoint, "gcs")
    if storage_type == "OSS":
        return SandboxStore("OSS", {"accessKeyID": config.s3_access_key, "accessKeySecret": config.s3_secret_key},
                            config.s3_endpoint, "s3")
    raise ValueError(f"no sandbox store for {storage_type}")


def new_bucket(store: SandboxStore, prefix: str) -> str:
    """A bucket (container) of the test's own on `store`, created now."""
    name = unique_bucket(prefix)
    store.storage().create_bucket(name)
    return name


def remove_bucket(store: SandboxStore, bucket: str) -> None:
    storage = store.storage()
    for info in storage.list(bucket):
        storage.delete(bucket, info.key)
    storage.delete_bucket(bucket)


def download(store: SandboxStore, bucket: str, key: str, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "snapshot.db"
    store.storage().download_file(bucket, key, str(path))
    return path
