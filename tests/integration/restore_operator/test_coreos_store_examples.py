"""CoreOS's ABS, GCS and OSS manifests, as this project ships them (examples/<store>_backup_cr.yaml,
<store>_restore_cr.yaml and the secret in CoreOS's format), applied with only their placeholders
filled in (secret names, "<bucket>/<key>", the endpoint of the sandbox's emulator): the backup
succeeds and its object holds exactly the keys written, and the restore brings the cluster back
serving exactly those keys. GCS uses a service-account key file (`credentials.json`, CoreOS's
way) whose token_uri is a loopback stand-in for Google's token endpoint (`oauth_token_stub`)."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kube_sandbox.config import AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY
from tests.examples_filled import filled_example
from tests.integration.backup_operator.backups import Backups, keys_in_snapshot
from tests.integration.backup_operator.oauth_token_stub import TokenStub, oauth_token_stub
from tests.integration.backup_operator.stores import SandboxStore, download
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.restore_operator.conftest import Restores
from tests.integration.restore_operator.restore_steps import EXAMPLE_CLUSTER, RESTORE_TIMEOUT, keys_of

pytestmark = pytest.mark.sandbox

KEYS = {f"/registry/key-{index}": f"value-{index}" for index in range(10)}
# The name each example's secret has and its manifests name (the `<store>-secret` placeholders).
SECRET_NAMES = {"ABS": ("<abs-secret>", "abs-credentials"), "GCS": ("<gcp-secret>", "gcp-credentials"),
                "OSS": ("<oss-secret>", "oss-credentials")}


@pytest.fixture
def token_stub() -> Iterator[TokenStub]:
    with oauth_token_stub() as stub:
        yield stub


def secret_example(store: SandboxStore, backups: Backups, token_stub: TokenStub) -> str:
    """The store's secret example filled in for the sandbox's emulator."""
    config = backups.sandbox.config
    if store.storage_type == "ABS":
        return filled_example("abs-secret.yaml", {
            "<storage-account>": AZURITE_ACCOUNT, "<storage-key>": AZURITE_ACCOUNT_KEY, "<cloud>": "AzurePublicCloud",
            "<blob-service-url>": config.abs_endpoint})
    if store.storage_type == "GCS":
        return filled_example("gcp-secret.yaml", {
            "<service-account-key-json>": token_stub.credentials_json(), "<gcs-endpoint>": config.gcs_endpoint})
    return filled_example("oss-secret.yaml", {"<access-key-id>": config.s3_access_key,
                                              "<access-key-secret>": config.s3_secret_key})


def test_coreos_store_examples_back_up_and_restore_exactly_the_keys(
        other_store: tuple[SandboxStore, str], backups: Backups, clusters: Clusters, restores: Restores,
        token_stub: TokenStub, tmp_path: Path) -> None:
    store, bucket = other_store
    section = store.section
    clusters.create(etcd_cluster(EXAMPLE_CLUSTER, 1))
    clusters.wait_running(EXAMPLE_CLUSTER, 1, timeout=180)
    for key, value in KEYS.items():
        clusters.put(EXAMPLE_CLUSTER, key, value)
    backups.apply_yaml(secret_example(store, backups, token_stub))
    placeholder, secret = SECRET_NAMES[store.storage_type]
    location = {f"<full-{section}-path>": f"{bucket}/etcd.backup", placeholder: secret,
                **({"<oss-endpoint>": store.spec_endpoint} if store.storage_type == "OSS" else {})}

    backups.apply_yaml(filled_example(f"{section}_backup_cr.yaml", {
        "<etcd-cluster-endpoints>": f'"{clusters.client_url(EXAMPLE_CLUSTER)}"', **location}))
    backed_up = backups.wait_succeeded("example-etcd-cluster-backup", timeout=240)
    assert backed_up["lastBackup"]["key"] == "etcd.backup", backed_up
    # Every store's object carries the snapshot's SHA-256 (GCS: from its upload's start).
    assert store.storage().head(bucket, "etcd.backup").metadata["sha256"] == backed_up["lastBackup"]["sha256"]
    snapshot = download(store, bucket, "etcd.backup", tmp_path / "download")
    assert keys_in_snapshot(snapshot, tmp_path / "scratch") == KEYS
    clusters.put(EXAMPLE_CLUSTER, "/registry/after-backup", "not in the backup")

    backups.apply_yaml(filled_example(f"{section}_restore_cr.yaml", location))
    restored = restores.wait_phase(EXAMPLE_CLUSTER, "Completed", timeout=RESTORE_TIMEOUT)
    assert restored["succeeded"] is True
    assert restored["snapshot"]["revision"] == backed_up["etcdRevision"]
    clusters.wait_running(EXAMPLE_CLUSTER, 1, timeout=60)
    assert keys_of(clusters, EXAMPLE_CLUSTER) == KEYS
    if store.storage_type == "GCS":  # the key file was what reached the store
        assert token_stub.issued and not token_stub.refused, (token_stub.issued, token_stub.refused)
