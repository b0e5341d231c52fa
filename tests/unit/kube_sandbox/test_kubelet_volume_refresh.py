"""Secret, configMap and projected volumes of a running pod follow their sources, as with the real
kubelet: rewritten atomically when a source changed, left alone when nothing did or when a Secret is
gone, modes kept, the projected service-account token kept, subPath mounts not updated."""
from __future__ import annotations

import base64
import os
import stat
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from kube_sandbox.kubelet.atomic_writer import DATA_DIR_NAME
from kube_sandbox.kubelet.images import ImageRuntime
from kube_sandbox.kubelet.kube_api import KubeApi, NotFound, Unavailable
from kube_sandbox.kubelet.pods import PodServices, PodWorker
from kube_sandbox.kubelet.settings import KubeletSettings
from kube_sandbox.kubelet.volumes import PreparedVolumes, SourceCache, VolumeManager
from tests.unit.kube_sandbox.scripted_kube_api import ScriptedKubeApi

SECRET = "/api/v1/namespaces/ns/secrets/tls"
CONFIG = "/api/v1/namespaces/ns/configmaps/conf"
ROOT_CA = "/api/v1/namespaces/ns/configmaps/kube-root-ca.crt"
TOKEN = "/api/v1/namespaces/ns/serviceaccounts/default/token"
POD_IP = "127.5.1.1"


def secret(**data: str) -> dict[str, Any]:
    return {"data": {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}}


def issued(token: str) -> dict[str, Any]:
    expires = datetime.fromtimestamp(time.time() + 3600, UTC)
    return {"status": {"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}}


def member_pod() -> dict[str, Any]:
    """A member-like pod: TLS from a Secret (one file also mounted by subPath), a ConfigMap with
    items, and the kube-api-access projected volume."""
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid", "labels": {"app": "etcd"}},
        "spec": {
            "serviceAccountName": "default",
            "containers": [{"name": "etcd", "image": "etcd", "command": [
                "etcd", "--cert-file=/etc/tls/tls.crt", "--key-file=/etc/tls/tls.key",
                "--trusted-ca-file=/etc/ca.crt", "--config-file=/etc/etcd/etcd.conf"],
                "volumeMounts": [{"name": "tls", "mountPath": "/etc/tls"},
                                 {"name": "tls", "mountPath": "/etc/ca.crt", "subPath": "ca.crt"},
                                 {"name": "conf", "mountPath": "/etc/etcd"}]}],
            "volumes": [
                {"name": "tls", "secret": {"secretName": "tls", "defaultMode": 0o400}},
                {"name": "conf", "configMap": {"name": "conf", "items": [
                    {"key": "etcd.conf", "path": "etcd.conf", "mode": 0o440}]}},
                {"name": "kube-api-access-x", "projected": {"defaultMode": 0o644, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                ]}},
            ],
        },
    }


@pytest.fixture
def api() -> ScriptedKubeApi:
    return ScriptedKubeApi(answers={
        ("GET", SECRET): secret(**{"tls.crt": "cert-1", "tls.key": "key-1", "ca.crt": "ca-1"}),
        ("GET", CONFIG): {"data": {"etcd.conf": "conf-1"}},
        ("GET", ROOT_CA): {"data": {"ca.crt": "root-1"}},
        ("POST", TOKEN): issued("token-1"),
    })


@pytest.fixture
def settings(tmp_path: Path) -> KubeletSettings:
    return KubeletSettings(node_names=("n",), state_dir=tmp_path, hosts_file=tmp_path / "hosts",
                           apiserver_port=6443, ca_cert=tmp_path / "ca.crt", venv_bin_dir=tmp_path)


@pytest.fixture
def volumes(api: ScriptedKubeApi, settings: KubeletSettings) -> VolumeManager:
    manager = VolumeManager(cast(KubeApi, api), settings)
    manager.sources = SourceCache(ttl_seconds=0.0)  # every refresh reads the API (the cache has its own test)
    return manager


def due(prepared: PreparedVolumes) -> PreparedVolumes:
    """As if VOLUME_REFRESH_SECONDS had passed."""
    for content in prepared.contents.values():
        content.next_check = 0.0
    return prepared


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_changed_secret_is_written_after_the_refresh_period(volumes: VolumeManager, api: ScriptedKubeApi) -> None:
    pod = member_pod()
    prepared = volumes.prepare(pod, POD_IP)
    tls = prepared.directories["tls"]
    assert (tls / "tls.crt").read_text() == "cert-1" and os.readlink(tls / "tls.crt") == "..data/tls.crt"
    api.answers[("GET", SECRET)] = secret(**{"tls.crt": "cert-2", "tls.key": "key-2", "ca.crt": "ca-1"})

    assert volumes.refresh_contents(pod, prepared, POD_IP) == [], "refreshed before VOLUME_REFRESH_SECONDS"
    assert (tls / "tls.crt").read_text() == "cert-1"

    assert volumes.refresh_contents(pod, due(prepared), POD_IP) == ["tls"]
    assert (tls / "tls.crt").read_text() == "cert-2" and (tls / "tls.key").read_text() == "key-2"
    assert mode(tls / "tls.key") == 0o400, "defaultMode lost by the update"


def test_unchanged_sources_write_nothing(volumes: VolumeManager, api: ScriptedKubeApi) -> None:
    pod = member_pod()
    prepared = volumes.prepare(pod, POD_IP)
    targets = {name: os.readlink(directory / DATA_DIR_NAME) for name, directory in prepared.directories.items()}
    gets = len(api.calls_to("GET", SECRET))
    assert volumes.refresh_contents(pod, due(prepared), POD_IP) == []
    assert len(api.calls_to("GET", SECRET)) == gets + 1, "the refresh did not look at the Secret"
    assert {name: os.readlink(directory / DATA_DIR_NAME)
            for name, directory in prepared.directories.items()} == targets


def test_a_deleted_secret_leaves_the_last_files(volumes: VolumeManager, api: ScriptedKubeApi) -> None:
    pod = member_pod()
    prepared = volumes.prepare(pod, POD_IP)
    tls = prepared.directories["tls"]
    api.answers[("GET", SECRET)] = NotFound(404, "NotFound", 'secrets "tls" not found')
    assert volumes.refresh_contents(pod, due(prepared), POD_IP) == []
    assert (tls / "tls.crt").read_text() == "cert-1" and (tls / "ca.crt").read_text() == "ca-1"
    assert "not found" in prepared.contents["tls"].problem

    api.answers[("GET", SECRET)] = Unavailable(503, "ServiceUnavailable", "apiserver restarting")
    assert volumes.refresh_contents(pod, due(prepared), POD_IP) == []
    assert (tls / "tls.crt").read_text() == "cert-1"

    api.answers[("GET", SECRET)] = secret(**{"tls.crt": "cert-3", "tls.key": "key-3", "ca.crt": "ca-3"})
    assert volumes.refresh_contents(pod, due(prepared), POD_IP) == ["tls"]
    assert (tls / "tls.crt").read_text() == "cert-3" and prepared.contents["tls"].problem == ""


def test_config_map_items_keep_their_mode(volumes: VolumeManager, api: ScriptedKubeApi) -> None:
    pod = member_pod()
    prepared = volumes.prepare(pod, POD_IP)
    conf = prepared.directories["conf"]
    assert mode(conf / "etcd.conf") == 0o440
    api.answers[("GET", CONFIG)] = {"data": {"etcd.conf": "conf-2", "other": "not an item"}}
    assert volumes.refresh_contents(pod, due(prepared), POD_IP) == ["conf"]
    assert (conf / "etcd.conf").read_text() == "conf-2" and mode(conf / "etcd.conf") == 0o440
    assert not os.path.lexists(conf / "other")


def test_projected_volume_follows_its_sources_and_keeps_its_token(
        volumes: VolumeManager, api: ScriptedKubeApi) -> None:
    pod = member_pod()
    prepared = volumes.prepare(pod, POD_IP)
    access = prepared.directories["kube-api-access-x"]
    assert (access / "token").read_text() == "token-1" and (access / "labels").read_text() == 'app="etcd"'

    api.answers[("GET", ROOT_CA)] = {"data": {"ca.crt": "root-2"}}
    pod["metadata"]["labels"]["role"] = "member"
    assert volumes.refresh_contents(pod, due(prepared), POD_IP) == ["kube-api-access-x"]
    assert (access / "ca.crt").read_text() == "root-2"
    assert (access / "labels").read_text() == 'app="etcd"\nrole="member"'
    assert (access / "token").read_text() == "token-1", "the refresh lost the token"
    assert len(api.calls_to("POST", TOKEN)) == 1, "the refresh requested another token"

    # A renewed token goes into the same layout, keeping the other sources' files.
    prepared.tokens[0].refresh_at = 0.0
    api.answers[("POST", TOKEN)] = issued("token-2")
    assert volumes.refresh_tokens(pod, prepared) == prepared.tokens
    assert os.readlink(access / "token") == "..data/token"
    assert (access / "token").read_text() == "token-2" and (access / "ca.crt").read_text() == "root-2"
    assert volumes.refresh_contents(pod, due(prepared), POD_IP) == []
    assert (access / "token").read_text() == "token-2"


def test_sources_are_read_once_per_cache_period(api: ScriptedKubeApi, settings: KubeletSettings) -> None:
    manager = VolumeManager(cast(KubeApi, api), settings)
    manager.sources = SourceCache(ttl_seconds=3600.0)  # SOURCE_CACHE_SECONDS, on a machine of any speed
    pod = member_pod()
    first, second = manager.prepare(pod, POD_IP), manager.prepare({**pod, "metadata": {
        **pod["metadata"], "uid": "other-uid"}}, "127.5.1.2")
    gets = len(api.calls_to("GET", SECRET))
    manager.refresh_contents(pod, due(first), POD_IP)
    manager.refresh_contents(pod, due(second), "127.5.1.2")
    assert len(api.calls_to("GET", SECRET)) == gets, "a Secret read within SOURCE_CACHE_SECONDS was read again"


def _worker(pod: dict[str, Any], api: ScriptedKubeApi, volumes: VolumeManager,
            settings: KubeletSettings) -> PodWorker:
    services = PodServices(
        api=cast(KubeApi, api), settings=settings, node_name="n", ipam=cast(Any, None), images=cast(Any, None),
        volumes=volumes, events=cast(Any, None), stop=threading.Event(), node_down=threading.Event(),
        on_worker_done=lambda uid: None, on_address_assigned=lambda uid, ip: None)
    worker = PodWorker(pod, services)
    worker.ip = POD_IP
    worker.volumes = volumes.prepare(pod, POD_IP)
    worker.states[0].runtime = ImageRuntime("etcd", "etcd-id", (), (), ("etcd",), ())
    return worker


def _argument(argv: list[str], flag: str) -> Path:
    return Path(next(a for a in argv if a.startswith(flag + "=")).split("=", 1)[1])


def test_a_subpath_mount_keeps_what_the_container_started_with(
        volumes: VolumeManager, api: ScriptedKubeApi, settings: KubeletSettings) -> None:
    worker = _worker(member_pod(), api, volumes, settings)
    container = worker.states[0]
    argv = worker._process_spec(container)[0].argv
    ca, cert = _argument(argv, "--trusted-ca-file"), _argument(argv, "--cert-file")
    assert ca.read_text() == "ca-1" and cert.read_text() == "cert-1"

    api.answers[("GET", SECRET)] = secret(**{"tls.crt": "cert-2", "tls.key": "key-2", "ca.crt": "ca-2"})
    due(worker.volumes)  # type: ignore[arg-type]
    worker._refresh_volume_contents()
    assert cert.read_text() == "cert-2", "the directory mount did not follow the Secret"
    assert ca.read_text() == "ca-1", "the subPath mount was updated (the real kubelet's bind mount is not)"
    assert mode(ca) == 0o400
    hook_argv = worker._process_spec(container, starting=False)[0].argv  # a preStop hook of the same run
    assert _argument(hook_argv, "--trusted-ca-file").read_text() == "ca-1"

    restart_argv = worker._process_spec(container)[0].argv  # the next start takes the file as it is now
    assert _argument(restart_argv, "--trusted-ca-file").read_text() == "ca-2"


def test_an_optional_secret_that_is_deleted_takes_its_files_along(volumes: VolumeManager, api: ScriptedKubeApi) -> None:
    pod = member_pod()
    pod["spec"]["volumes"][0]["secret"]["optional"] = True
    prepared = volumes.prepare(pod, POD_IP)
    tls = prepared.directories["tls"]
    api.answers[("GET", SECRET)] = NotFound(404, "NotFound", 'secrets "tls" not found')
    assert volumes.refresh_contents(pod, due(prepared), POD_IP) == ["tls"]
    assert not os.path.lexists(tls / "tls.crt") and (tls / DATA_DIR_NAME).is_dir()
