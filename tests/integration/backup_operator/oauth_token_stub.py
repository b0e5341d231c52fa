"""A stand-in for Google's OAuth2 token endpoint on loopback, for a service-account key
(`credentials.json`) against fake-gcs-server, which accepts any bearer token but issues none.
It answers the JWT-bearer grant Google's libraries send to the key's `token_uri`, but only for an
assertion signed with the key's private key and naming its client_email: a token it issues
proves the key file was read and used."""
from __future__ import annotations

import base64
import json
import secrets
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.integration.loopback_json import Answer, json_endpoint

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
CLIENT_EMAIL = "etcd-backup@sandbox-project.iam.gserviceaccount.com"


@dataclass
class TokenStub:
    url: str
    private_key: rsa.RSAPrivateKey
    issued: list[str] = field(default_factory=list)  # the scopes of each token issued
    refused: list[str] = field(default_factory=list)  # why each refused request was refused

    def credentials_json(self) -> str:
        """A service-account key file whose token_uri is this stub."""
        pem = self.private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                             serialization.NoEncryption()).decode()
        return json.dumps({"type": "service_account", "project_id": "sandbox-project", "private_key_id": "stub",
                           "private_key": pem, "client_email": CLIENT_EMAIL, "client_id": "1",
                           "token_uri": f"{self.url}/token"})

    def check(self, form: dict[str, list[str]]) -> str:
        """The scope of a valid grant; ValueError saying what is wrong with another."""
        if form.get("grant_type") != [JWT_BEARER]:
            raise ValueError(f"grant_type {form.get('grant_type')}")
        header, payload, signature = form.get("assertion", [""])[0].split(".")
        self.private_key.public_key().verify(_unpad(signature), f"{header}.{payload}".encode(),
                                             padding.PKCS1v15(), hashes.SHA256())
        claims: dict[str, Any] = json.loads(_unpad(payload))
        if claims.get("iss") != CLIENT_EMAIL:
            raise ValueError(f"iss {claims.get('iss')!r}")
        return str(claims.get("scope", ""))


def _unpad(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


@contextmanager
def oauth_token_stub() -> Iterator[TokenStub]:
    """The stub serving on 127.0.0.1 (a free port) until the block ends."""
    stub = TokenStub("", rsa.generate_private_key(public_exponent=65537, key_size=2048))

    def respond(method: str, path: str, body: str) -> Answer:
        if method != "POST":
            return 404, {"error": "not_found"}
        try:
            scope = stub.check(urllib.parse.parse_qs(body))
        except (ValueError, InvalidSignature) as error:
            stub.refused.append(repr(error))
            return 400, {"error": "invalid_grant", "error_description": repr(error)}
        stub.issued.append(scope)
        return 200, {"access_token": f"stub-{secrets.token_hex(8)}", "expires_in": 3600, "token_type": "Bearer"}

    with json_endpoint("oauth-token-stub", respond) as url:
        stub.url = url
        yield stub
