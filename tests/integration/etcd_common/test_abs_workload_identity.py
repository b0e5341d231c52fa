"""Azure workload identity against Azurite (HTTPS, OAuth bearer tokens checked): with
--allow-pod-identity, an ABS location without absSecret uploads and downloads as the pod's
identity, azure-identity's WorkloadIdentityCredential trading the federated token file the
webhook mounts for a token at AZURE_AUTHORITY_HOST (a loopback stand-in for Entra); a federated
token the authority refuses is AccessDenied; without the permission nothing is asked."""
from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from etcd_common.api.storage_locations import OtherLocation, StorageLocation
from etcd_common.storage import abs as abs_storage
from etcd_common.storage import locations, objects
from kube_sandbox.azurite import Azurite, start_azurite
from kube_sandbox.binaries import MissingBinary
from tests.integration.etcd_common.entra_token_stub import (
    CLIENT_ID,
    STORAGE_AUDIENCE,
    TENANT_ID,
    EntraStub,
    LoopbackTls,
    entra_token_stub,
    loopback_tls,
)


@dataclass
class Identity:
    azurite: Azurite
    stub: EntraStub
    token_file: Path

    def location(self, path: str) -> StorageLocation:
        return StorageLocation("ABS", other=OtherLocation(path, endpoint=self.azurite.endpoint))


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> LoopbackTls:
    return loopback_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def oauth_azurite(tmp_path_factory: pytest.TempPathFactory, tls: LoopbackTls) -> Iterator[Azurite]:
    try:
        server = start_azurite(tmp_path_factory.mktemp("azurite-oauth"), tls=(tls.cert, tls.key), oauth=True)
    except MissingBinary as error:
        pytest.fail(str(error))
    yield server
    server.stop()


@pytest.fixture
def identity(oauth_azurite: Azurite, tls: LoopbackTls, tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[Identity]:
    """The environment the Azure workload identity webhook gives a pod, its authority the stub."""
    federated = f"federated-{secrets.token_hex(8)}"
    token_file = tmp_path / "azure-identity-token"
    token_file.write_text(federated)
    with entra_token_stub(tls, federated) as stub:
        for name, value in {"AZURE_CLIENT_ID": CLIENT_ID, "AZURE_TENANT_ID": TENANT_ID,
                            "AZURE_FEDERATED_TOKEN_FILE": str(token_file), "AZURE_AUTHORITY_HOST": stub.url,
                            "REQUESTS_CA_BUNDLE": str(tls.ca)}.items():
            monkeypatch.setenv(name, value)
        yield Identity(oauth_azurite, stub, token_file)


def test_the_pods_workload_identity_uploads_and_downloads_where_allowed(identity: Identity, tmp_path: Path) -> None:
    storage = locations.storage_for_location(identity.location("backups/etcd.backup"), "tenant",
                                             _no_secret, allow_pod_identity=True)
    storage.create_bucket("backups")
    data = secrets.token_bytes(3 * abs_storage.BLOCK_SIZE_BYTES // 2)
    source = tmp_path / "snapshot.db"
    source.write_bytes(data)
    uploaded = storage.upload_file("backups", "etcd.backup", str(source), metadata={"sha256": "x"})
    assert uploaded.size == len(data)
    assert storage.download_file("backups", "etcd.backup", str(tmp_path / "back.db")) == len(data)
    assert (tmp_path / "back.db").read_bytes() == data
    assert storage.head("backups", "etcd.backup").metadata == {"sha256": "x"}
    assert identity.stub.issued and all(scope.startswith(STORAGE_AUDIENCE) for scope in identity.stub.issued)
    assert identity.stub.refused == []


def test_a_federated_token_the_authority_refuses_is_access_denied(identity: Identity) -> None:
    identity.token_file.write_text("a token of another service account")
    storage = locations.storage_for_location(identity.location("backups/etcd.backup"), "tenant",
                                             _no_secret, allow_pod_identity=True)
    with pytest.raises(objects.AccessDenied) as denied:
        storage.check_bucket("backups")
    assert denied.value.reason == "ABSAccessDenied"
    assert identity.stub.issued == [] and identity.stub.refused  # retried: refused each time
    assert set(identity.stub.refused) == {"the client assertion is not the federated token"}


def test_without_the_permission_the_pods_identity_is_never_asked(identity: Identity) -> None:
    with pytest.raises(objects.CredentialsRequired):
        locations.storage_for_location(identity.location("backups/etcd.backup"), "tenant", _no_secret)
    assert identity.stub.issued == [] and identity.stub.refused == []


def _no_secret(namespace: str, name: str) -> dict[str, object]:
    raise AssertionError("no secret is named")
