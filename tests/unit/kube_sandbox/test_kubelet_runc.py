"""The runc bundle of a local image's container: mounts, user, env, read-only root (runc.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kube_sandbox.kubelet.images import ImageCatalog, ImageNotAvailable
from kube_sandbox.kubelet.runc import (
    DEFAULT_CAPABILITIES,
    ContainerConfig,
    LocalImage,
    LocalImageError,
    Mount,
    is_local_image,
    parse_user,
    runtime_spec,
    write_bundle,
)

PASSWD = "root:x:0:0:root:/root:/bin/sh\netcd-operator:x:10001:10002::/app:/usr/sbin/nologin\n"
GROUP = "root:x:0:\nops:x:4242:\n"


def config(**overrides: object) -> ContainerConfig:
    values: dict[str, object] = {
        "args": ["etcd-operator", "--http-address=127.5.64.1"], "env": {"PATH": "/usr/bin", "POD_IP": "127.5.64.1"},
        "cwd": "/app", "rootfs": Path("/var/lib/containers/storage/overlay/abc/merged"), "uid": 10001, "gid": 10001,
    }
    values.update(overrides)
    return ContainerConfig(**values)  # type: ignore[arg-type]


def test_process_has_the_args_env_cwd_and_user() -> None:
    spec = runtime_spec(config(additional_gids=(10001, 4242)))
    process = spec["process"]
    assert process["args"] == ["etcd-operator", "--http-address=127.5.64.1"]
    assert process["env"] == ["PATH=/usr/bin", "POD_IP=127.5.64.1"]
    assert process["cwd"] == "/app"
    assert process["user"] == {"uid": 10001, "gid": 10001, "additionalGids": [10001, 4242]}
    assert process["terminal"] is False


def test_the_host_network_no_network_namespace_and_cgroups_path() -> None:
    spec = runtime_spec(config(cgroups_path="/kube-sandbox-abc123/podUID/operator"))
    kinds = {n["type"] for n in spec["linux"]["namespaces"]}
    assert kinds == {"pid", "ipc", "uts", "mount"}, "a network namespace would hide the pod's loopback address"
    assert spec["linux"]["cgroupsPath"] == "/kube-sandbox-abc123/podUID/operator"
    assert "cgroupsPath" not in runtime_spec(config())["linux"]


@pytest.mark.parametrize("read_only", [True, False])
def test_the_root_is_read_only_when_asked(read_only: bool) -> None:
    spec = runtime_spec(config(read_only_root=read_only))
    assert spec["root"] == {"path": "/var/lib/containers/storage/overlay/abc/merged", "readonly": read_only}


def test_volumes_are_bind_mounts_at_their_mount_paths_after_the_system_mounts() -> None:
    mounts = (Mount("/var/run/secrets/kubernetes.io/serviceaccount", "/state/pods/u/volumes/token", read_only=True),
              Mount("/tmp", "/state/pods/u/volumes/tmp"), Mount("/scratch", tmpfs_options=("size=16m",)))
    spec_mounts = runtime_spec(config(mounts=mounts))["mounts"]
    destinations = [m["destination"] for m in spec_mounts]
    assert destinations[:2] == ["/proc", "/dev"]
    assert destinations[-3:] == ["/var/run/secrets/kubernetes.io/serviceaccount", "/tmp", "/scratch"]
    token, tmp, scratch = spec_mounts[-3:]
    assert token == {"destination": "/var/run/secrets/kubernetes.io/serviceaccount", "type": "bind",
                     "source": "/state/pods/u/volumes/token", "options": ["rbind", "rprivate", "ro"]}
    assert tmp["type"] == "bind" and "rw" in tmp["options"]
    assert scratch["type"] == "tmpfs" and "size=16m" in scratch["options"]


def test_a_non_root_user_has_no_effective_capabilities_and_drops_are_kept() -> None:
    non_root = runtime_spec(config(capabilities=()))["process"]
    assert all(non_root["capabilities"][kind] == [] for kind in ("bounding", "effective", "permitted"))
    root = runtime_spec(config(uid=0, gid=0))["process"]
    assert root["capabilities"]["effective"] == list(DEFAULT_CAPABILITIES)
    assert runtime_spec(config(no_new_privileges=True))["process"]["noNewPrivileges"] is True


def test_write_bundle_writes_config_json(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "bundle", config())
    assert json.loads((bundle / "config.json").read_text()) == runtime_spec(config())


@pytest.mark.parametrize("user, expected", [
    ("10001:10001", (10001, 10001)),
    ("10001", (10001, 10002)),  # the primary group from /etc/passwd
    ("etcd-operator", (10001, 10002)),
    ("etcd-operator:ops", (10001, 4242)),
    ("", (0, 0)),
    ("4000", (4000, 4000)),  # not in /etc/passwd: its own number as the group, as runtimes do
])
def test_the_image_user(user: str, expected: tuple[int, int]) -> None:
    assert parse_user(user, PASSWD, GROUP) == expected


@pytest.mark.parametrize("user", ["nobody", "etcd-operator:nogroup"])
def test_an_unknown_user_or_group_is_an_error(user: str) -> None:
    with pytest.raises(LocalImageError):
        parse_user(user, PASSWD, GROUP)


def test_only_images_of_the_local_registry_run_in_runc() -> None:
    assert is_local_image("localhost/etcd-operator-py:0.1.0")
    assert not is_local_image("etcd-operator-py:0.1.0")  # the default: this checkout's virtualenv
    assert not is_local_image("ghcr.io/example/etcd-operator-py:0.1.0")


class FakeLocalImages:
    def __init__(self, images: dict[str, LocalImage]) -> None:
        self.images = images

    def find(self, name: str) -> LocalImage:
        if name not in self.images:
            raise LocalImageError(f"{name}: image not known")
        return self.images[name]


def test_the_catalog_resolves_a_local_image_to_its_config(tmp_path: Path) -> None:
    image = LocalImage("localhost/etcd-operator-py:0.1.0", "b9a8", {
        "User": "10001:10001", "Env": ["PATH=/usr/local/bin:/usr/bin", "LANG=C.UTF-8"], "Entrypoint": ["etcd-operator"]})
    catalog = ImageCatalog({}, tmp_path / "venv" / "bin", tmp_path / "images",
                           local_images=FakeLocalImages({image.name: image}))  # type: ignore[arg-type]
    runtime = catalog.resolve(image.name)
    assert runtime.local == image
    assert runtime.entrypoint == ("etcd-operator",) and runtime.cmd == ()
    assert runtime.env == (("PATH", "/usr/local/bin:/usr/bin"), ("LANG", "C.UTF-8"))
    assert runtime.image_id == "localhost/etcd-operator-py@sha256:b9a8"
    assert catalog.resolve("etcd-operator-py:0.1.0").local is None  # the venv, as before
    with pytest.raises(ImageNotAvailable, match="not in the local image store"):
        catalog.resolve("localhost/etcd-operator-py:9.9.9")
    with pytest.raises(ImageNotAvailable, match="runs no local images"):
        ImageCatalog({}, tmp_path, tmp_path).resolve(image.name)
