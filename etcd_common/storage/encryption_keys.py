"""The AES-256 key of `spec.encryption` read from its Secret (in the object's namespace), for the
backup operator (encrypting) and the restore operator (verifying). The seed reads the same value
from the Secret mounted as a file (`etcd_common.seed.program`)."""
from __future__ import annotations

from etcd_common.api.storage_locations import EncryptionKeyRef
from etcd_common.storage.codec import KeyMissing, parse_key
from etcd_common.storage.objects import SecretInvalid
from etcd_common.storage.secret_data import SecretReader, secret_values
from kube_adapter.errors import NotFound


def read_encryption_key(read_secret: SecretReader, namespace: str, ref: EncryptionKeyRef, *,
                        field: str = "spec.encryption") -> bytes:
    """The key; KeyMissing when the Secret or its key is absent, KeyInvalid when the value is not
    base64 of 32 bytes. Other API failures pass through as KubeError."""
    where = f"secret {namespace}/{ref.secret_name} ({field}.secretName)"
    try:
        secret = read_secret(namespace, ref.secret_name)
    except NotFound as error:
        raise KeyMissing(f"{where} does not exist") from error
    try:
        values = secret_values(secret, where=where, backend="Encryption")
    except SecretInvalid as error:
        raise KeyMissing(error.message) from error
    value = values.get(ref.secret_key)
    if not value:
        present = ", ".join(sorted(values)) or "none"
        raise KeyMissing(f"{where} has no key {ref.secret_key!r} ({field}.secretKey; keys present: {present})")
    return parse_key(value, where=f"key {ref.secret_key!r} of {where}")
