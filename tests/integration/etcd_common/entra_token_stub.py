"""A stand-in for Microsoft Entra's token endpoint on loopback, over HTTPS (MSAL asks HTTPS
authorities only), for Azure workload identity against Azurite: it serves the tenant's OpenID
configuration and answers the client-credentials grant WorkloadIdentityCredential sends, but only
for the client id it was made for and a client assertion equal to the federated token it expects
(what the pod's projected ServiceAccount token file holds). Its tokens carry what Azurite's
"basic" OAuth check reads (issuer, audience, times); Azurite does not check their signature."""
from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import secrets
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.integration.loopback_json import Answer, json_endpoint

TENANT_ID = "72f988bf-0000-4000-8000-000000000001"
CLIENT_ID = "etcd-backup-operator-client"
JWT_BEARER_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
STORAGE_AUDIENCE = "https://storage.azure.com"


@dataclass(frozen=True)
class LoopbackTls:
    """A CA and a certificate for 127.0.0.1 it signed (PEM files in one directory)."""

    ca: Path
    cert: Path
    key: Path


def loopback_tls(directory: Path) -> LoopbackTls:
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "entra-stub-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("localhost")]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = LoopbackTls(directory / "ca.pem", directory / "server.pem", directory / "server-key.pem")
    paths.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return paths


@dataclass
class EntraStub:
    url: str  # AZURE_AUTHORITY_HOST
    federated_token: str  # the client assertion it accepts
    issued: list[str] = field(default_factory=list)  # the scope of each token issued
    refused: list[str] = field(default_factory=list)  # why each refused grant was refused

    def check(self, form: dict[str, list[str]]) -> str:
        """The scope of a valid grant; ValueError saying what is wrong with another."""
        if form.get("grant_type") != ["client_credentials"]:
            raise ValueError(f"grant_type {form.get('grant_type')}")
        if form.get("client_id") != [CLIENT_ID]:
            raise ValueError(f"client_id {form.get('client_id')}")
        if form.get("client_assertion_type") != [JWT_BEARER_ASSERTION]:
            raise ValueError(f"client_assertion_type {form.get('client_assertion_type')}")
        if form.get("client_assertion") != [self.federated_token]:
            raise ValueError("the client assertion is not the federated token")
        return form.get("scope", [""])[0]


def _b64(document: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(document).encode()).rstrip(b"=").decode()


def storage_token() -> str:
    now = int(time.time())
    claims = {"iss": f"https://sts.windows.net/{TENANT_ID}/", "aud": STORAGE_AUDIENCE, "tid": TENANT_ID,
              "appid": CLIENT_ID, "oid": "00000000-0000-4000-8000-000000000002", "iat": now, "nbf": now - 60,
              "exp": now + 3600}
    return f"{_b64({'alg': 'RS256', 'typ': 'JWT'})}.{_b64(claims)}.{secrets.token_urlsafe(32)}"


@contextmanager
def entra_token_stub(tls: LoopbackTls, federated_token: str) -> Iterator[EntraStub]:
    """The stub serving HTTPS on 127.0.0.1 (a free port) until the block ends."""
    stub = EntraStub("", federated_token)

    def respond(method: str, path: str, body: str) -> Answer:
        base = f"{stub.url}/{TENANT_ID}"
        if method == "GET" and path.endswith("/.well-known/openid-configuration"):
            return 200, {"issuer": f"{base}/v2.0", "token_endpoint": f"{base}/oauth2/v2.0/token",
                         "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                         "device_authorization_endpoint": f"{base}/oauth2/v2.0/devicecode"}
        if method != "POST":
            return 404, {"error": "not_found"}
        try:
            if not path.endswith(f"/{TENANT_ID}/oauth2/v2.0/token"):
                raise ValueError(f"token request to {path}")
            scope = stub.check(urllib.parse.parse_qs(body))
        except ValueError as error:
            stub.refused.append(str(error))
            return 401, {"error": "invalid_client", "error_description": str(error)}
        stub.issued.append(scope)
        return 200, {"token_type": "Bearer", "expires_in": 3600, "ext_expires_in": 3600,
                     "access_token": storage_token()}

    with json_endpoint("entra-token-stub", respond, tls=(tls.cert, tls.key)) as url:
        stub.url = url
        yield stub
