"""Where the sandbox finds its kube binaries: `KUBEBUILDER_ASSETS` (the envtest convention) when it
holds all four, else the cached build of the pinned release; the installer script agrees."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kube_sandbox import binaries
from kube_sandbox.config import CHECKOUT_DIR


def _fake_binaries(directory: Path, names: tuple[str, ...] = binaries.KUBE_BINARIES) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        program = directory / name
        program.write_text("#!/bin/sh\n")
        program.chmod(0o755)
    return directory


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ETCD_OPERATOR_PY_CACHE", str(cache))
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    return cache


def test_kubebuilder_assets_are_used_when_complete(empty_cache: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assets = _fake_binaries(tmp_path / "assets")
    _fake_binaries(empty_cache / f"kube-v{binaries.kube_version()}" / "bin")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    assert binaries.kube_bin_dir() == assets
    assert binaries.kubectl() == assets / "kubectl"


def test_incomplete_kubebuilder_assets_fall_back_to_the_cached_build(empty_cache: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    assets = _fake_binaries(tmp_path / "assets", ("kube-apiserver", "kubectl"))
    cached = _fake_binaries(empty_cache / f"kube-v{binaries.kube_version()}" / "bin")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    assert binaries.kube_bin_dir() == cached


def test_no_binaries_anywhere_is_a_clear_error(empty_cache: Path) -> None:
    with pytest.raises(binaries.MissingBinary, match="install-kube-binaries.sh"):
        binaries.kube_bin_dir()


def test_the_installer_takes_complete_kubebuilder_assets_without_building(empty_cache: Path, tmp_path: Path) -> None:
    assets = _fake_binaries(tmp_path / "assets")
    result = subprocess.run(
        ["bash", str(CHECKOUT_DIR / "scripts" / "install-kube-binaries.sh")],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ETCD_OPERATOR_PY_CACHE": str(empty_cache),
             "KUBEBUILDER_ASSETS": str(assets)},  # no Go on this PATH: building would fail
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == str(assets)
