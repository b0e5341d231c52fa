"""Claims are bound at once to their own hostPath volume, so the real scheduler can place their pods."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, cast

import pytest

from kube_sandbox.kubelet import sized_volumes
from kube_sandbox.kubelet.kube_api import KubeApi, NotFound
from kube_sandbox.kubelet.provisioner import BIND_COMPLETED, ClaimBinder, persistent_volume
from kube_sandbox.kubelet.settings import KubeletSettings
from kube_sandbox.kubelet.sized_volumes import SIZED_STORAGE_CLASS, VolumeNotSized
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


class FakeTmpfs:
    """sized_volumes' mount calls, recorded: {directory: size in bytes}."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sizes: dict[Path, int] = {}
        self.used = 0
        monkeypatch.setattr(sized_volumes, "mount", self.mount)
        monkeypatch.setattr(sized_volumes, "unmount", lambda d: self.sizes.pop(d, None))
        monkeypatch.setattr(sized_volumes, "resize", self.resize)
        monkeypatch.setattr(sized_volumes, "used_bytes", lambda d: self.used)
        monkeypatch.setattr(sized_volumes.os.path, "ismount", lambda d: Path(d) in self.sizes)

    def mount(self, directory: Path, size: int) -> bool:
        self.sizes[directory] = size
        return True

    def resize(self, directory: Path, size: int) -> int:
        self.sizes[directory] = sized_volumes.whole_pages(size)
        return self.sizes[directory]


SIZED_DIR = Path("pvc/ns/data-c-uid")


def test_only_a_claim_of_the_sized_class_gets_a_tmpfs_of_its_request(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    tmpfs = FakeTmpfs(monkeypatch)
    b = binder(ScriptedKubeApi(), tmp_path)
    b._on_event("ADDED", claim(storageClassName="fast"))
    assert tmpfs.sizes == {}
    b._on_event("ADDED", claim(storageClassName=SIZED_STORAGE_CLASS))
    assert tmpfs.sizes == {tmp_path / SIZED_DIR: 2 * 2**30}
    b._on_event("DELETED", claim(storageClassName=SIZED_STORAGE_CLASS, volumeName="pvc-c-uid"))
    assert tmpfs.sizes == {}


def test_a_bound_sized_claim_without_its_tmpfs_gets_one_and_the_kubelet_unmounts_all_when_it_stops(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmpfs = FakeTmpfs(monkeypatch)
    b = binder(ScriptedKubeApi(), tmp_path)
    b._on_event("MODIFIED", claim(storageClassName=SIZED_STORAGE_CLASS, volumeName="pvc-c-uid"))
    assert tmpfs.sizes == {tmp_path / SIZED_DIR: 2 * 2**30}
    b.unmount_all()
    assert tmpfs.sizes == {}


def test_no_space_armed_for_a_claim_not_there_yet_takes_effect_when_it_is_bound(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmpfs = FakeTmpfs(monkeypatch)
    api = ScriptedKubeApi({("GET", CLAIM): NotFound(404, "NotFound", "no such claim")})
    b = binder(api, tmp_path)
    assert b.fill("ns", "data", 0).startswith("armed")
    b._on_event("ADDED", claim(storageClassName=SIZED_STORAGE_CLASS))
    # What it holds (nothing) plus nothing: one page, as tmpfs reads size=0 as unlimited.
    assert tmpfs.sizes == {tmp_path / SIZED_DIR: sized_volumes.PAGE_BYTES}
    assert api.calls_to("POST", "/api/v1/persistentvolumes")  # bound after the space was taken


def test_no_space_on_a_bound_sized_claim_keeps_what_it_holds_and_none_gives_the_size_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmpfs = FakeTmpfs(monkeypatch)
    bound = claim(storageClassName=SIZED_STORAGE_CLASS, volumeName="pvc-c-uid")
    b = binder(ScriptedKubeApi({("GET", CLAIM): bound}), tmp_path)
    b._on_event("MODIFIED", bound)
    tmpfs.used = 10 * sized_volumes.PAGE_BYTES
    assert b.fill("ns", "data", 1).startswith("filled")
    assert tmpfs.sizes[tmp_path / SIZED_DIR] == 11 * sized_volumes.PAGE_BYTES
    assert b.fill("ns", "data", None).startswith("lifted")
    assert tmpfs.sizes[tmp_path / SIZED_DIR] == 2 * 2**30


def test_no_space_is_refused_for_a_claim_on_the_hosts_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    FakeTmpfs(monkeypatch)
    b = binder(ScriptedKubeApi({("GET", CLAIM): claim(storageClassName="fast", volumeName="pvc-c-uid")}), tmp_path)
    with pytest.raises(VolumeNotSized, match="host's disk"):
        b.fill("ns", "data", 0)


def test_a_sized_request_is_whole_pages_never_zero() -> None:
    assert sized_volumes.requested_bytes(claim(), "1Gi") == 2 * 2**30
    assert sized_volumes.whole_pages(0) == sized_volumes.PAGE_BYTES
    assert sized_volumes.whole_pages(sized_volumes.PAGE_BYTES + 1) == 2 * sized_volumes.PAGE_BYTES


def test_a_claims_directory_is_writable_by_any_pod_user(tmp_path: Path) -> None:
    """As hostPath provisioners make them: the kubelet applies no fsGroup to a hostPath volume, and
    non-root pods (the restore's staging pod, uid 65532) write their claim's root."""
    binder(ScriptedKubeApi(), tmp_path)._on_event("ADDED", claim())
    assert (tmp_path / "pvc" / "ns" / "data-c-uid").stat().st_mode & 0o777 == 0o777
