"""The unit tests of the shipped Python packages pass against the lowest version of every runtime
dependency setup.cfg allows (tests/lowest-versions.txt). The virtualenv is built once per pin set
(from PyPI) and cached outside the repository, like the sandbox's binaries."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from kube_sandbox.binaries import cache_dir

ROOT = Path(__file__).resolve().parents[3]
PINS = ROOT / "tests" / "lowest-versions.txt"
# What the unit tests need besides the runtime dependencies (tool-driven tests are left out: they
# check helm charts, Prometheus rules and typing, which no runtime dependency changes).
TEST_REQUIREMENTS = ("pytest>=7,<9", "pytest-timeout>=2,<3", "hypothesis>=6.100,<7", "cel-python>=0.5,<1")
UNIT_FOLDERS = ("kube_adapter", "operator_runtime", "etcd_common", "etcd_operator", "backup_operator",
                "restore_operator")


def lowest_venv() -> Path:
    digest = hashlib.sha256(PINS.read_bytes() + "\n".join(TEST_REQUIREMENTS).encode()).hexdigest()[:12]
    venv = cache_dir() / f"lowest-deps-{digest}"
    python = venv / "bin" / "python"
    if not (venv / ".complete").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(PINS), *TEST_REQUIREMENTS],
                       check=True, timeout=900)
        (venv / ".complete").write_text("")
    return python


def installed_versions(python: Path) -> dict[str, str]:
    listing = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True,
                             check=True).stdout
    return {name.lower(): version for name, _, version in (line.partition("==") for line in listing.splitlines())}


def test_unit_tests_pass_with_the_lowest_allowed_versions() -> None:
    python = lowest_venv()
    installed = installed_versions(python)
    for line in PINS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            assert installed.get(name.lower()) == version, f"{name}: {installed.get(name.lower())} installed, not {version}"
    environment = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
         *(f"tests/unit/{folder}" for folder in UNIT_FOLDERS)],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=1200, check=False)
    summary = result.stdout.strip().splitlines()[-1:] or [""]
    assert result.returncode == 0, f"unit tests with the lowest versions failed: {summary[0]}\n{result.stdout[-4000:]}"
    assert " passed" in summary[0] and " failed" not in summary[0], summary[0]
