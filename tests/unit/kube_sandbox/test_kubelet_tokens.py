"""Projected service-account tokens through the TokenRequest API, bound to the pod, renewed in time."""
from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from kube_sandbox.kubelet.kube_api import KubeApi, NotFound
from kube_sandbox.kubelet.settings import KubeletSettings
from kube_sandbox.kubelet.volumes import (
    DEFAULT_TOKEN_EXPIRATION_SECONDS,
    VolumeManager,
    VolumeNotReady,
    token_refresh_time,
)
from tests.unit.kube_sandbox.scripted_kube_api import ScriptedKubeApi

TOKEN_PATH = "/api/v1/namespaces/ns/serviceaccounts/default/token"
ROOT_CA = "/api/v1/namespaces/ns/configmaps/kube-root-ca.crt"
HOUR = 3600.0
YEAR = 365 * 24 * HOUR


def kube_api_access_pod(**token_source: Any) -> dict[str, Any]:
    """A pod as the 1.37 apiserver admits it: with the injected kube-api-access projected volume."""
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid"},
        "spec": {"serviceAccountName": "default", "containers": [{"name": "c"}], "volumes": [{
            "name": "kube-api-access-x",
            "projected": {"defaultMode": 0o644, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token", **token_source}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ]},
        }]},
    }


def issued(token: str, lifetime_seconds: float) -> dict[str, Any]:
    expires = datetime.fromtimestamp(time.time() + lifetime_seconds, UTC)
    return {"status": {"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}}


@pytest.fixture
def api() -> ScriptedKubeApi:
    return ScriptedKubeApi(answers={
        ("GET", ROOT_CA): {"data": {"ca.crt": "CA PEM"}},
        ("POST", TOKEN_PATH): issued("first-token", HOUR),
    })


@pytest.fixture
def volumes(api: ScriptedKubeApi, tmp_path: Path) -> VolumeManager:
    settings = KubeletSettings(node_names=("n",), state_dir=tmp_path, hosts_file=tmp_path / "hosts",
                               apiserver_port=6443, ca_cert=tmp_path / "ca.crt", venv_bin_dir=tmp_path)
    return VolumeManager(cast(KubeApi, api), settings)


@pytest.mark.parametrize("issued_at, expires_at, refresh_at", [
    (0.0, HOUR, 0.8 * HOUR),  # 80% of the lifetime
    (100.0, 100.0 + 600, 100.0 + 480),
    (0.0, YEAR, 24 * HOUR),  # extended kube-api-access tokens: at least daily
    (50.0, 40.0, 50.0),  # already expired: at once
])
def test_token_refresh_time(issued_at: float, expires_at: float, refresh_at: float) -> None:
    assert token_refresh_time(issued_at, expires_at) == pytest.approx(refresh_at)


def test_kube_api_access_volume_gets_a_bound_token_the_ca_and_the_namespace(
        volumes: VolumeManager, api: ScriptedKubeApi) -> None:
    prepared = volumes.prepare(kube_api_access_pod(), "127.5.1.1")
    directory = prepared.directories["kube-api-access-x"]
    assert (directory / "token").read_text() == "first-token"
    assert (directory / "ca.crt").read_text() == "CA PEM"
    assert (directory / "namespace").read_text() == "ns"
    request = api.calls_to("POST", TOKEN_PATH)[0].body or {}
    assert request["kind"] == "TokenRequest"
    assert request["spec"] == {"expirationSeconds": 3607, "boundObjectRef": {
        "apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid"}}  # no audiences: the apiserver's own
    token = prepared.tokens[0]
    assert token.path == directory / "token"
    assert time.time() + 0.7 * HOUR < token.refresh_at < time.time() + 0.9 * HOUR


def test_audience_and_default_expiration(volumes: VolumeManager, api: ScriptedKubeApi) -> None:
    pod = kube_api_access_pod(audience="vault")
    del pod["spec"]["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"]
    volumes.prepare(pod, "127.5.1.1")
    spec = (api.calls_to("POST", TOKEN_PATH)[0].body or {})["spec"]
    assert spec["audiences"] == ["vault"]
    assert spec["expirationSeconds"] == DEFAULT_TOKEN_EXPIRATION_SECONDS


def test_missing_service_account_keeps_the_pod_waiting(volumes: VolumeManager, api: ScriptedKubeApi) -> None:
    api.answers[("POST", TOKEN_PATH)] = NotFound(404, "NotFound", 'serviceaccounts "default" not found')
    with pytest.raises(VolumeNotReady, match="serviceaccount"):
        volumes.prepare(kube_api_access_pod(), "127.5.1.1")


def test_tokens_are_renewed_only_when_due(volumes: VolumeManager, api: ScriptedKubeApi) -> None:
    pod = kube_api_access_pod()
    prepared = volumes.prepare(pod, "127.5.1.1")
    assert volumes.refresh_tokens(pod, prepared) == []
    assert len(api.calls_to("POST", TOKEN_PATH)) == 1

    prepared.tokens[0].refresh_at = time.time() - 1
    api.answers[("POST", TOKEN_PATH)] = issued("second-token", HOUR)
    renewed = volumes.refresh_tokens(pod, prepared)
    assert renewed == prepared.tokens
    assert prepared.tokens[0].path.read_text() == "second-token"
    assert prepared.tokens[0].refresh_at > time.time() + 0.7 * HOUR
    assert len(api.calls_to("POST", TOKEN_PATH)) == 2
