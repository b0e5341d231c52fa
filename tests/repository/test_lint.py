"""The code base passes ruff (lint and import order; configuration in pyproject.toml)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kube_sandbox.config import CHECKOUT_DIR

RUFF = Path(sys.executable).with_name("ruff")


def test_ruff_passes() -> None:
    result = subprocess.run([str(RUFF), "check", "--no-cache", "."], cwd=CHECKOUT_DIR, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]


def test_ruff_finds_an_unsorted_import(tmp_path: Path) -> None:
    """The check can fail: the project's configuration flags imports out of order."""
    module = tmp_path / "unsorted.py"
    module.write_text("import sys\nimport os\n\nprint(os, sys)\n")
    result = subprocess.run([str(RUFF), "check", "--no-cache", "--config", str(CHECKOUT_DIR / "pyproject.toml"),
                             str(module)], capture_output=True, text=True)
    assert result.returncode == 1 and "I001" in result.stdout, result.stdout + result.stderr
