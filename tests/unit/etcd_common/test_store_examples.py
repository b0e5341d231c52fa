"""The ABS, GCS and OSS examples (examples/<store>_backup_cr.yaml, <store>_restore_cr.yaml and the
secret in CoreOS's format), their placeholders filled in: admitted by the CRDs, read as the
operators read them, and the secret read into the credentials the store is reached with. The
sandbox test applying them: tests/integration/restore_operator/test_coreos_store_examples.py."""
from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from etcd_common.api.etcd_backup import parse_etcd_backup
from etcd_common.api.etcd_restore import parse_etcd_restore
from etcd_common.storage import abs as abs_storage
from etcd_common.storage import gcs, oss
from tests.examples_filled import filled_example
from tests.support.openapi_schema import BACKUP_SCHEMA, RESTORE_SCHEMA, validate

ENDPOINTS = '"http://example-etcd-cluster-client.default.svc:2379"'
ACCOUNT_KEY = base64.b64encode(b"k" * 64).decode()


def service_account_key() -> str:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    return json.dumps({"type": "service_account", "project_id": "p", "private_key_id": "1", "private_key": pem,
                       "client_email": "backup@p.iam.gserviceaccount.com", "token_uri": "https://oauth2.googleapis.com/token"})


# store -> (the secret's example, its placeholders' values, the backup and restore examples' values)
STORES: dict[str, tuple[str, dict[str, str], dict[str, str]]] = {
    "ABS": ("abs-secret.yaml", {"<storage-account>": "acct", "<storage-key>": ACCOUNT_KEY,
                                "<cloud>": "AzureChinaCloud", "<blob-service-url>": ""},
            {"<full-abs-path>": "etcd-backups/etcd.backup", "<abs-secret>": "abs-credentials"}),
    "GCS": ("gcp-secret.yaml", {"<service-account-key-json>": "", "<gcs-endpoint>": "http://127.0.0.1:4443"},
            {"<full-gcs-path>": "bucket/etcd.backup", "<gcp-secret>": "gcp-credentials"}),
    "OSS": ("oss-secret.yaml", {"<access-key-id>": "id", "<access-key-secret>": "secret"},
            {"<full-oss-path>": "bucket/etcd.backup", "<oss-secret>": "oss-credentials",
             "<oss-endpoint>": "http://oss-cn-beijing.aliyuncs.com"}),
}


def secret_name(location: dict[str, str]) -> str:
    return next(value for placeholder, value in location.items() if placeholder.endswith("-secret>"))


def load(name: str, values: dict[str, str]) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(filled_example(name, values))
    return document


@pytest.mark.parametrize("storage_type", sorted(STORES))
def test_backup_and_restore_examples_are_admitted_and_name_the_store(storage_type: str) -> None:
    section = storage_type.lower()
    _, _, location = STORES[storage_type]
    backup = load(f"{section}_backup_cr.yaml", {"<etcd-cluster-endpoints>": ENDPOINTS, **location})
    restore = load(f"{section}_restore_cr.yaml", location)
    assert validate(BACKUP_SCHEMA, backup) == ([], []) and validate(RESTORE_SCHEMA, restore) == ([], [])
    backup_spec = parse_etcd_backup(backup).spec
    restore_spec = parse_etcd_restore(restore).spec
    assert backup_spec is not None and restore_spec is not None
    assert backup_spec.storage == restore_spec.storage
    assert backup_spec.storage.storage_type == storage_type
    assert backup_spec.storage.path == location[f"<full-{section}-path>"]
    assert backup_spec.storage.secret == secret_name(location)
    assert restore_spec.etcd_cluster_name == restore["metadata"]["name"] == "example-etcd-cluster"


@pytest.mark.parametrize("storage_type", sorted(STORES))
def test_the_secret_example_is_the_secret_its_manifests_name(storage_type: str) -> None:
    secret_file, values, location = STORES[storage_type]
    if storage_type == "GCS":
        values = {**values, "<service-account-key-json>": service_account_key()}
    secret = load(secret_file, values)
    assert secret["metadata"]["name"] == secret_name(location)
    if storage_type == "ABS":
        credentials = abs_storage.credentials_from_secret(secret)
        assert credentials.account_url == "https://acct.blob.core.chinacloudapi.cn"
    elif storage_type == "GCS":
        google = gcs.credentials_from_secret(secret)
        assert google.service_account_info and google.endpoint == "http://127.0.0.1:4443"
    else:
        assert oss.credentials_from_secret(secret).access_key_id == "id"
