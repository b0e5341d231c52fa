"""Where the operator's API configuration comes from: a kubeconfig, or the in-cluster service account."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from kube_adapter.client import ServiceAccount, in_cluster_service_account, load_api_client, service_account_from_token

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:16443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: kubeconfig-token}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: from-kubeconfig}}]
current-context: x
"""


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBERNETES_SERVICE_ACCOUNT_DIR", "POD_NAMESPACE", "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "/nonexistent-home")


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    return path


@pytest.fixture
def service_account_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "serviceaccount"
    directory.mkdir()
    (directory / "token").write_text("in-cluster-token")
    (directory / "ca.crt").write_text("not really a certificate")
    (directory / "namespace").write_text("operators\n")
    monkeypatch.setenv("KUBERNETES_SERVICE_ACCOUNT_DIR", str(directory))
    return directory


def test_explicit_kubeconfig(kubeconfig: Path) -> None:
    configuration = load_api_client(str(kubeconfig)).configuration
    assert configuration.host == "https://127.0.0.1:16443"
    # The header the client sends (its api_key dict is keyed differently across client releases).
    assert configuration.auth_settings()["BearerToken"]["value"] == "Bearer kubeconfig-token"
    assert configuration.connection_pool_maxsize >= 32


def test_in_cluster_from_the_service_account_dir(service_account_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "16443")
    configuration = load_api_client().configuration
    assert configuration.host == "https://127.0.0.1:16443"
    assert configuration.ssl_ca_cert == str(service_account_dir / "ca.crt")
    assert configuration.auth_settings()["BearerToken"]["value"] .lower() == "bearer in-cluster-token"  # the in-cluster loader writes "bearer"


def test_explicit_kubeconfig_wins_over_in_cluster(kubeconfig: Path, service_account_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.9")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert load_api_client(str(kubeconfig)).configuration.host == "https://127.0.0.1:16443"


def test_default_kubeconfig_from_the_environment(kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    assert load_api_client().configuration.host == "https://127.0.0.1:16443"


def _jwt(claims: object) -> str:
    def part(value: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")
    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


BOUND_CLAIMS = {"aud": ["https://kubernetes.default.svc"], "sub": "system:serviceaccount:ops:etcd-operator",
                "kubernetes.io": {"namespace": "ops", "pod": {"name": "p", "uid": "pod-uid"},
                                  "serviceaccount": {"name": "etcd-operator", "uid": "sa-uid"}}}


@pytest.mark.parametrize("token, expected", [
    (_jwt(BOUND_CLAIMS), ServiceAccount("ops", "etcd-operator", "sa-uid")),
    (_jwt(BOUND_CLAIMS) + "\n", ServiceAccount("ops", "etcd-operator", "sa-uid")),
    # A legacy secret-based token has flat claims and no uid under kubernetes.io.
    (_jwt({"kubernetes.io/serviceaccount/namespace": "ops", "kubernetes.io/serviceaccount/service-account.name": "x"}),
     None),
    (_jwt({"kubernetes.io": {"namespace": "ops", "serviceaccount": {"name": "x"}}}), None),
    (_jwt(["not", "an", "object"]), None),
    ("not-a-jwt", None),
    ("a.%%%.c", None),
], ids=["bound", "trailing-newline", "legacy", "no-uid", "not-an-object", "not-a-jwt", "bad-base64"])
def test_the_service_account_comes_from_a_bound_tokens_claims(token: str, expected: ServiceAccount | None) -> None:
    assert service_account_from_token(token) == expected


def test_in_cluster_service_account_reads_the_mounted_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "token").write_text(_jwt(BOUND_CLAIMS))
    monkeypatch.setenv("KUBERNETES_SERVICE_ACCOUNT_DIR", str(tmp_path))
    assert in_cluster_service_account() is None, "outside a cluster (no KUBERNETES_SERVICE_HOST)"
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    assert in_cluster_service_account() == ServiceAccount("ops", "etcd-operator", "sa-uid")
    (tmp_path / "token").unlink()
    assert in_cluster_service_account() is None
