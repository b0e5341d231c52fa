"""Image -> local program mapping, and the rewrites that stand in for mounts and network namespaces."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kube_sandbox.kubelet.images import (
    ImageCatalog,
    ImageNotAvailable,
    container_argv,
    parse_etcd_version,
    parse_image_reference,
)
from kube_sandbox.kubelet.rewrites import Rewriter

VENV = Path("/work/venv/bin")


@pytest.fixture
def etcd_dirs(tmp_path: Path) -> dict[str, Path]:
    # As binaries.etcd_binaries() finds them: Debian's 3.4.23 (no etcdutl) and the Go-module builds.
    dirs = {version: tmp_path / f"etcd-{version}" for version in ("3.4.23", "3.5.35", "3.6.16")}
    for version, directory in dirs.items():
        directory.mkdir()
        for program in ("etcd", "etcdctl") if version == "3.4.23" else ("etcd", "etcdctl", "etcdutl"):
            (directory / program).write_text("#!/bin/sh\n")
    return dirs


@pytest.fixture
def catalog(tmp_path: Path, etcd_dirs: dict[str, Path]) -> ImageCatalog:
    return ImageCatalog(etcd_dirs, VENV, tmp_path / "images")


@pytest.mark.parametrize("image, repository, tag", [
    ("quay.io/coreos/etcd:v3.5.1", "quay.io/coreos/etcd", "v3.5.1"),
    ("localhost:5000/etcd-operator-py:dev", "localhost:5000/etcd-operator-py", "dev"),
    ("localhost:5000/busybox", "localhost:5000/busybox", ""),
    ("busybox@sha256:abc", "busybox", ""),
    ("debian:bookworm@sha256:abc", "debian", "bookworm"),
])
def test_parse_image_reference(image: str, repository: str, tag: str) -> None:
    reference = parse_image_reference(image)
    assert (reference.repository, reference.tag) == (repository, tag)


@pytest.mark.parametrize("tag, version", [
    ("v3.5.1", "3.5.1"), ("3.5.1", "3.5.1"), ("3.5.1-0", "3.5.1"), ("v3.4.23-arm64", "3.4.23"),
    ("latest", None), ("v3.5", None),
])
def test_parse_etcd_version(tag: str, version: str | None) -> None:
    assert parse_etcd_version(tag) == version


@pytest.mark.parametrize("image, version", [
    ("quay.io/coreos/etcd:v3.5.35", "3.5.35"),
    ("gcr.io/etcd-development/etcd:v3.6.16", "3.6.16"),
    ("registry.k8s.io/etcd:3.6.16-0", "3.6.16"),
    ("registry.k8s.io/etcd:3.5.35-0", "3.5.35"),
    ("k8s.gcr.io/etcd:3.4.23-0", "3.4.23"),
    ("quay.io/coreos/etcd:3.4.23", "3.4.23"),
    ("quay.io/coreos/etcd", "3.6.16"),
    ("gcr.io/etcd-development/etcd:latest", "3.6.16"),
    ("registry.k8s.io/etcd@sha256:abc", "3.6.16"),
])
def test_etcd_images_resolve_to_that_versions_binaries(catalog: ImageCatalog, etcd_dirs: dict[str, Path],
                                                       image: str, version: str) -> None:
    runtime = catalog.resolve(image)
    bin_dir = catalog.images_dir / f"etcd-{version}" / "bin"
    assert runtime.path.split(":")[0] == str(bin_dir)
    programs = catalog.images_dir / f"etcd-{version}" / "programs"
    assert dict(runtime.links)[bin_dir / "etcd"] == programs / "etcd"
    assert dict(runtime.copies)[programs / "etcd"] == etcd_dirs[version] / "etcd"
    rewrites = dict(runtime.rewrites)
    assert rewrites["/usr/local/bin/etcd"] == str(bin_dir / "etcd")
    assert rewrites["/usr/local/bin/etcdctl"] == str(bin_dir / "etcdctl")
    assert container_argv(runtime, [], []) == ["/usr/local/bin/etcd"]


@pytest.mark.parametrize("image", ["quay.io/coreos/etcd:v9.9.9", "quay.io/coreos/etcd:v3.5.1",
                                   "registry.k8s.io/etcd:3.6.0-0", "nginx:1.25", "quay.io/coreos/etcd-operator:v0.9.4"])
def test_unknown_images_are_not_available(catalog: ImageCatalog, image: str) -> None:
    with pytest.raises(ImageNotAvailable, match=image.replace(".", r"\.")):
        catalog.resolve(image)


@pytest.mark.parametrize("image", ["etcd-operator-py:dev", "ghcr.io/x/etcd-operator-py:0.1.0"])
def test_operator_image_runs_this_checkouts_entry_points(catalog: ImageCatalog, etcd_dirs: dict[str, Path],
                                                         image: str) -> None:
    runtime = catalog.resolve(image)
    assert runtime.path.startswith(f"{VENV}:")
    # The newest etcd build's directory next (its etcd: trial restores), before the host's PATH.
    assert runtime.path_dirs == (VENV, etcd_dirs["3.6.16"]), sorted(etcd_dirs)
    assert container_argv(runtime, [], []) == ["etcd-operator"]
    assert container_argv(runtime, [], ["--help"]) == ["etcd-operator", "--help"]
    assert container_argv(runtime, ["python", "-m", "x"], ["a"]) == ["python", "-m", "x", "a"]
    assert Rewriter(paths=runtime.rewrites).apply("/usr/local/bin/etcd-operator") == f"{VENV}/etcd-operator"


def test_operator_image_imports_the_checkouts_packages_first(etcd_dirs: dict[str, Path], tmp_path: Path) -> None:
    """The venv's install may be another checkout's (an editable install shared between git
    worktrees): the image's programs import the sandbox's own checkout first."""
    checkout = tmp_path / "checkout"
    catalog = ImageCatalog(etcd_dirs, VENV, tmp_path / "images", checkout)
    assert dict(catalog.resolve("etcd-operator-py:0.1.0").env) == {"PYTHONPATH": str(checkout)}
    assert catalog.resolve("quay.io/coreos/etcd:v3.6.16").env == ()
    assert ImageCatalog(etcd_dirs, VENV, tmp_path / "images").resolve("etcd-operator-py:0.1.0").env == ()


def test_generic_images(catalog: ImageCatalog) -> None:
    busybox = catalog.resolve("busybox:1.28.0-glibc")
    assert [path.name for path, _ in busybox.scripts] == ["nslookup"]  # the CoreOS check-dns init container
    assert busybox.path_dirs == (busybox.scripts[0][0].parent,)
    assert catalog.resolve("debian:bookworm").path_dirs == ()
    python = catalog.resolve("python:3.11-slim")
    assert python.path_dirs == (VENV,)
    assert container_argv(python, [], ["-c", "print(1)"]) == ["-c", "print(1)"]  # no ENTRYPOINT, like Docker


def test_materialize_makes_links_and_the_etcdctl_wrapper(tmp_path: Path, catalog: ImageCatalog,
                                                        etcd_dirs: dict[str, Path]) -> None:
    source = etcd_dirs["3.4.23"]
    runtime = catalog.resolve("quay.io/coreos/etcd:v3.4.23")
    catalog.materialize(runtime)
    catalog.materialize(runtime)  # idempotent
    bin_dir = tmp_path / "images" / "etcd-3.4.23" / "bin"
    assert (bin_dir / "etcd").resolve().samefile(source / "etcd")  # a hard link: any user may run it
    programs = tmp_path / "images" / "etcd-3.4.23" / "programs"
    wrapper = (bin_dir / "etcdctl").read_text()
    assert str(programs / "etcdctl") in wrapper and "SANDBOX_POD_IP" in wrapper
    assert (programs / "etcdctl").samefile(source / "etcdctl")
    assert not (bin_dir / "etcdutl").exists()
    # A rebuilt binary (a new file in the cache) is linked again, not left behind.
    rebuilt = source / ".etcd.new"
    rebuilt.write_text("#!/bin/sh\necho rebuilt\n")
    rebuilt.replace(source / "etcd")
    catalog.materialize(runtime)
    assert (programs / "etcd").samefile(source / "etcd")


@pytest.mark.parametrize("version", ["3.5.35", "3.6.16"])
def test_built_etcd_images_carry_etcdutl(catalog: ImageCatalog, etcd_dirs: dict[str, Path], version: str) -> None:
    runtime = catalog.resolve(f"quay.io/coreos/etcd:v{version}")
    catalog.materialize(runtime)
    bin_dir = catalog.images_dir / f"etcd-{version}" / "bin"
    assert (bin_dir / "etcdutl").resolve().samefile(etcd_dirs[version] / "etcdutl")
    assert dict(runtime.rewrites)["/usr/local/bin/etcdutl"] == str(bin_dir / "etcdutl")


@pytest.mark.parametrize("text, expected", [
    ("--data-dir=/var/etcd/data", "--data-dir=/pod/vol/data"),
    ("/var/etcd", "/pod/vol"),
    ("/var/etcdx", "/var/etcdx"),
    ("/opt/var/etcd", "/opt/var/etcd"),
    ("cat /var/etcd/a /etc/cfg/x", "cat /pod/vol/a /pod/cfg/x"),
    ("/etc/cfg/sub/file", "/pod/sub/file"),  # the longer mount path wins
    ("--listen-client-urls=http://0.0.0.0:2379", "--listen-client-urls=http://127.1.0.5:2379"),
    ("10.0.0.0/8", "10.0.0.0/8"),
    ("http://localhost:2379", "http://localhost:2379"),  # only probes and hooks rewrite loopback
])
def test_rewriter(text: str, expected: str) -> None:
    rewriter = Rewriter(paths=(("/var/etcd/", "/pod/vol"), ("/etc/cfg", "/pod/cfg"), ("/etc/cfg/sub", "/pod/sub")),
                        pod_ip="127.1.0.5")
    assert rewriter.apply(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("http://localhost:2379", "http://127.1.0.5:2379"),
    ("--endpoints=127.0.0.1:2379", "--endpoints=127.1.0.5:2379"),
    ("nc -z localhost 2379", "nc -z 127.1.0.5 2379"),
    ("a,https://127.0.0.1/health", "a,https://127.1.0.5/health"),
    ("127.0.0.10:2379", "127.0.0.10:2379"),
    ("my-localhost:1", "my-localhost:1"),
])
def test_rewriter_inside_the_pod_maps_loopback_to_the_pod_ip(text: str, expected: str) -> None:
    assert Rewriter(pod_ip="127.1.0.5", loopback=True).apply(text) == expected


def test_operator_image_programs_are_this_checkouts_console_scripts(catalog: ImageCatalog) -> None:
    import configparser

    from kube_sandbox.config import CHECKOUT_DIR
    from kube_sandbox.kubelet.images import OPERATOR_PROGRAMS

    setup = configparser.ConfigParser()
    setup.read(CHECKOUT_DIR / "setup.cfg")
    scripts = {line.split("=")[0].strip() for line in setup["options.entry_points"]["console_scripts"].splitlines()
               if line.strip()}
    assert set(OPERATOR_PROGRAMS) <= scripts
    runtime = catalog.resolve("etcd-operator-py:0.1.0")
    for program in OPERATOR_PROGRAMS:
        assert Rewriter(paths=runtime.rewrites).apply(f"/usr/local/bin/{program}") == f"{VENV}/{program}"
def test_busybox_nslookup_answers_from_the_hosts_file_and_fails_for_unknown_names(catalog: ImageCatalog) -> None:
    runtime = catalog.resolve("busybox:1.28.0-glibc")
    ImageCatalog.materialize(runtime)
    nslookup = str(runtime.scripts[0][0])
    found = subprocess.run([nslookup, "localhost"], capture_output=True, text=True, check=False)
    assert found.returncode == 0 and "Address: " in found.stdout, found
    missing = subprocess.run([nslookup, "no-such-member.invalid"], capture_output=True, text=True, check=False)
    assert missing.returncode == 1 and "can't resolve" in missing.stderr, missing
