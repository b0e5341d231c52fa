"""Claims are bound at once to their own hostPath volume, so the real scheduler can place their pods."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, cast

from kube_sandbox.kubelet.kube_api import KubeApi
from kube_sandbox.kubelet.provisioner import BIND_COMPLETED, ClaimBinder, persistent_volume
from kube_sandbox.kubelet.settings import KubeletSettings
from tests.unit.kube_sandbox.scripted_kube_api import ScriptedKubeApi

CLAIM = "/api/v1/namespaces/ns/persistentvolumeclaims/data"


def claim(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "data", "namespace": "ns", "uid": "c-uid"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}, **spec}}


def binder(api: ScriptedKubeApi, tmp_path: Path) -> ClaimBinder:
    settings = KubeletSettings(node_names=("n",), state_dir=tmp_path, hosts_file=tmp_path / "hosts",
                               apiserver_port=6443, ca_cert=tmp_path / "ca.crt", venv_bin_dir=tmp_path)
    return ClaimBinder(cast(KubeApi, api), settings, threading.Event())


def test_the_volume_is_pre_bound_to_the_claim(tmp_path: Path) -> None:
    volume = persistent_volume(claim(storageClassName="fast"), tmp_path / "dir")
    assert volume["metadata"]["name"] == "pvc-c-uid"
    spec = volume["spec"]
    assert spec["claimRef"]["uid"] == "c-uid" and spec["claimRef"]["namespace"] == "ns"
    assert spec["capacity"] == {"storage": "2Gi"} and spec["storageClassName"] == "fast"
    assert spec["hostPath"]["path"] == str(tmp_path / "dir")
    assert "nodeAffinity" not in spec  # every node shares the host's filesystem


def test_a_new_claim_gets_a_volume_and_both_are_bound(tmp_path: Path) -> None:
    api = ScriptedKubeApi()
    binder(api, tmp_path)._on_event("ADDED", claim())
    assert [(c.method, c.path) for c in api.calls] == [
        ("POST", "/api/v1/persistentvolumes"), ("PATCH", "/api/v1/persistentvolumes/pvc-c-uid/status"),
        ("PATCH", CLAIM), ("PATCH", CLAIM + "/status")]
    bound = api.calls[2].body or {}
    assert bound["spec"] == {"volumeName": "pvc-c-uid"}
    assert bound["metadata"]["annotations"][BIND_COMPLETED] == "yes"
    assert (api.calls[3].body or {})["status"]["phase"] == "Bound"
    assert (tmp_path / "pvc" / "ns" / "data-c-uid").is_dir()


def test_bound_or_deleted_claims_are_left_alone_and_a_deleted_claim_loses_its_volume(tmp_path: Path) -> None:
    api = ScriptedKubeApi()
    b = binder(api, tmp_path)
    b._on_event("MODIFIED", claim(volumeName="pvc-c-uid"))
    assert api.calls == []
    b._on_event("DELETED", claim(volumeName="pvc-c-uid"))
    assert [(c.method, c.path) for c in api.calls] == [
        ("PATCH", "/api/v1/persistentvolumes/pvc-c-uid/status"), ("DELETE", "/api/v1/persistentvolumes/pvc-c-uid")]
    assert (api.calls[0].body or {})["status"]["phase"] == "Released"  # pv-protection keeps Bound volumes
