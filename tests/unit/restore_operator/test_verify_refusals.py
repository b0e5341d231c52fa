"""The restore operator's verification of an encrypted backup refuses, with the reason in status
and nothing deleted, a missing, wrong or unusable key and an object that fails authentication
(the object store and the status writes replaced by fakes; these refusals come before etcdutl)."""
from __future__ import annotations

import base64
import hashlib
import io
import threading
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from etcd_common.api.etcd_restore import parse_etcd_restore
from etcd_common.storage import codec
from etcd_common.storage.objects import ObjectInfo
from kube_adapter.errors import NotFound
from restore_operator import acting
from restore_operator.supervisor import RestoreSupervisor
from tests.unit.restore_operator.etcd_restore_builders import raw_restore, s3_spec

KEY = bytes(range(32))


class OneObject:
    """The object store holding the one object the restore names."""

    endpoint = ""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def head(self, bucket: str, key: str, *, version_id: str = "") -> ObjectInfo:
        return ObjectInfo(key, len(self.data), datetime.now(UTC), etag="etag-1")

    def download_file(self, bucket: str, key: str, path: str, *, if_match: str = "", version_id: str = "") -> int:
        Path(path).write_bytes(self.data)
        return len(self.data)


def encrypted_object() -> bytes:
    body = b"\0" * 8 + b"page" * 5000
    out = io.BytesIO()
    codec.encode_stream(io.BytesIO(body + hashlib.sha256(body).digest()), out, codec.Encoding("Gzip", KEY))
    return out.getvalue()


def restore_body(encryption: dict[str, str] | None) -> dict[str, Any]:
    extra = {"encryption": encryption} if encryption is not None else {}
    return raw_restore(s3_spec(path="bucket/etcd.backup", **extra), uid="u")


def key_text(key: bytes) -> str:
    return base64.b64encode(key).decode()


@pytest.mark.parametrize("case, encryption, secret, data, reason, fragment", [
    ("no spec.encryption", None, None, "encrypted", "EncryptionKeyMissing", "is encrypted (AES-256-GCM, key id"),
    ("secret missing", {"secretName": "gone"}, None, "encrypted", "EncryptionKeyMissing", "does not exist"),
    ("another key", {"secretName": "k"}, key_text(bytes(32)), "encrypted", "EncryptionKeyWrong",
     f"was encrypted with key id {codec.key_id(KEY)}"),
    ("not a key", {"secretName": "k"}, "short", "encrypted", "EncryptionKeyInvalid", "not base64"),
    ("truncated object", {"secretName": "k"}, key_text(KEY), "truncated", "BackupObjectCorrupt", "authentication"),
])
def test_refused_before_anything_is_deleted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, case: str,
                                            encryption: dict[str, str] | None, secret: str | None, data: str,
                                            reason: str, fragment: str) -> None:
    encoded = encrypted_object()
    store = OneObject(encoded if data == "encrypted" else encoded[:-100])
    monkeypatch.setattr(acting, "storage_for_location", lambda location, namespace, read_secret: store)

    def read_secret(namespace: str, name: str) -> dict[str, Any]:
        if name != "k" or secret is None:
            raise NotFound(f"secret {namespace}/{name}")
        return {"stringData": {"key": secret}}
    context = SimpleNamespace(read_secret=read_secret, stop=threading.Event(),
                              settings=SimpleNamespace(work_dir=str(tmp_path), etcdutl_binary="/nonexistent/etcdutl",
                                                       resync_seconds=7.0, fetch_image="etcd-operator-py:0.1.0",
                                                       bump_revision=0, trusted_repositories=(),
                                                       allowed_s3_endpoint_hosts=()))
    supervisor = RestoreSupervisor(("ns", "r"), context)  # type: ignore[arg-type]
    failures: list[tuple[str, str]] = []
    monkeypatch.setattr(supervisor.executor, "_write", lambda *args, **kwargs: None)
    monkeypatch.setattr(supervisor.executor, "_fail", lambda raw, restore, current, why, message: failures.append((why, message)))
    raw = restore_body(encryption)
    delay = supervisor.executor._verify(raw, parse_etcd_restore(raw), {"lastError": "keep the message"})
    assert delay == 7.0
    [(why, message)] = failures
    assert why == reason and fragment in message and message.endswith("nothing was deleted"), message
    assert list(tmp_path.iterdir()) == []  # the downloaded copy removed


@pytest.mark.parametrize("endpoint, token_uri, refused", [
    ("http://169.254.169.254", "", "endpoint_url of secret aws 'http://169.254.169.254'"),
    ("https://minio.internal:9000", "", ""),
    ("", "http://10.0.0.1/token", "token_uri of the service-account key in secret aws"),
    ("", "https://oauth2.googleapis.com/token", ""),
])
def test_an_object_store_endpoint_outside_the_allow_list_is_refused_before_any_request(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, endpoint: str, token_uri: str, refused: str) -> None:
    class Refusing(OneObject):
        def head(self, bucket: str, key: str, *, version_id: str = "") -> ObjectInfo:
            raise AssertionError("a request was sent")
        download_file = head  # type: ignore[assignment]
    store = Refusing(b"")
    store.endpoint, store.token_uri = endpoint, token_uri  # type: ignore[attr-defined]
    monkeypatch.setattr(acting, "storage_for_location", lambda location, namespace, read_secret: store)
    context = SimpleNamespace(read_secret=None, stop=threading.Event(),
                              settings=SimpleNamespace(work_dir=str(tmp_path), etcdutl_binary="/nonexistent/etcdutl",
                                                       resync_seconds=7.0, fetch_image="etcd-operator-py:0.1.0",
                                                       bump_revision=0, trusted_repositories=(),
                                                       allowed_s3_endpoint_hosts=("minio.internal",)))
    supervisor = RestoreSupervisor(("ns", "r"), context)  # type: ignore[arg-type]
    failures: list[tuple[str, str]] = []
    monkeypatch.setattr(supervisor.executor, "_write", lambda *args, **kwargs: None)
    monkeypatch.setattr(supervisor.executor, "_fail", lambda raw, restore, current, why, message: failures.append((why, message)))
    raw = restore_body(None)
    if not refused:
        with pytest.raises(AssertionError, match="a request was sent"):
            supervisor.executor._verify(raw, parse_etcd_restore(raw), {"lastError": "x"})
        return
    assert supervisor.executor._verify(raw, parse_etcd_restore(raw), {"lastError": "x"}) == 7.0
    [(why, message)] = failures
    assert why == "EndpointNotAllowed" and refused in message and message.endswith("nothing was deleted"), message
