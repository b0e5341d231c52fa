"""Reading a store's credentials Secret, the same way for every backend: the Secret named in the
spec fetched (a missing one is the backend's SecretInvalid), and its `data` (base64) and
`stringData` keys decoded into text. What the keys mean stays in each backend's module."""
from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from etcd_common.storage.objects import SecretInvalid
from kube_adapter.errors import NotFound

SecretReader = Callable[[str, str], dict[str, Any]]  # (namespace, name) -> Secret dict

CredentialsT_co = TypeVar("CredentialsT_co", covariant=True)


class CredentialsParser(Protocol[CredentialsT_co]):
    """A backend's `credentials_from_secret`: the Secret's API dict -> its credentials."""

    def __call__(self, secret: Mapping[str, Any], *, where: str) -> CredentialsT_co: ...


def secret_values(secret: Mapping[str, Any], *, where: str, backend: str) -> dict[str, str]:
    """Every key of a Secret (API dict) as stripped text: `data` decoded from base64, then
    `stringData` as written (winning, as the API server merges them). SecretInvalid naming the key
    whose `data` is not base64 of UTF-8 text."""
    values: dict[str, str] = {}
    for name, encoded in (secret.get("data") or {}).items():
        try:
            values[name] = base64.b64decode(encoded, validate=True).decode("utf-8").strip()
        except (binascii.Error, ValueError, UnicodeDecodeError) as error:
            raise SecretInvalid(f"{where}: key {name!r} is not base64 of UTF-8 text", backend=backend) from error
    values.update({name: str(value).strip() for name, value in (secret.get("stringData") or {}).items()})
    return values


def require_keys(values: Mapping[str, str], keys: tuple[str, ...], *, where: str, backend: str) -> None:
    """SecretInvalid naming each of `keys` that is absent or empty, and the keys there are."""
    missing = [key for key in keys if not values.get(key)]
    if missing:
        present = ", ".join(sorted(values)) or "none"
        raise SecretInvalid(f"{where} lacks {' and '.join(repr(k) for k in missing)} (keys present: {present})",
                            backend=backend)


def read_credentials(read_secret: SecretReader, namespace: str, secret_name: str, *, field: str,
                     parse: CredentialsParser[CredentialsT_co], backend: str,
                     invalid: type[SecretInvalid] = SecretInvalid) -> CredentialsT_co:
    """The credentials `parse` finds in secret `namespace/secret_name`, named in the spec at
    `field`. A missing secret is `invalid` (the backend's SecretInvalid); other API failures pass
    through as KubeError."""
    where = f"secret {namespace}/{secret_name} ({field})"
    try:
        secret = read_secret(namespace, secret_name)
    except NotFound as error:
        raise invalid(f"{where} does not exist", backend=backend) from error
    return parse(secret, where=where)
