"""The layers of ARCHITECTURE.md section 2 hold: `lint-imports` checks the contracts in setup.cfg
([importlinter]), and every top-level package of the checkout is one it analyses."""
from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Not shipped, so outside the contracts: they may import both the sandbox and the operators.
UNCONSTRAINED_PACKAGES = {"tests", "benchmarks"}


def _lint_imports() -> str:
    beside_python = Path(sys.executable).parent / "lint-imports"
    found = str(beside_python) if beside_python.exists() else shutil.which("lint-imports")
    assert found, "lint-imports not found: install the test extras (pip install -e '.[test]')"
    return found


def test_import_contracts_are_kept() -> None:
    result = subprocess.run(
        [_lint_imports(), "--config", str(REPO / "setup.cfg"), "--no-cache"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, f"import contracts broken:\n{result.stdout}\n{result.stderr}"
    assert "0 broken" in result.stdout


def test_every_top_level_package_is_analysed() -> None:
    """A new package (backup_operator/, restore_operator/) must join root_packages, or the
    contracts would not look at it at all."""
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    analysed = set(config["importlinter"]["root_packages"].split())
    packages = {path.parent.name for path in REPO.glob("*/__init__.py")} - UNCONSTRAINED_PACKAGES
    assert packages <= analysed, f"add {sorted(packages - analysed)} to root_packages in setup.cfg [importlinter]"
