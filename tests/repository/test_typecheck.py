"""The code base type-checks under mypy --strict (configuration in setup.cfg)."""
from __future__ import annotations

import subprocess
import sys

from kube_sandbox.config import CHECKOUT_DIR


def test_mypy_strict_passes() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=CHECKOUT_DIR, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]
