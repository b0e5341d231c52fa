"""The code base type-checks under mypy --strict (configuration in setup.cfg).

mypy's incremental cache lives beside the sandbox's binaries (outside the checkout, like the
lowest-versions virtualenv): a fresh clone on a machine that ran the suite before re-checks only
the modules whose contents changed (mypy compares a cached module's hash when its mtime differs),
about a second instead of a minute or two of CPU beside the other tests."""
from __future__ import annotations

import subprocess
import sys

from kube_sandbox.binaries import cache_dir
from kube_sandbox.config import CHECKOUT_DIR


def test_mypy_strict_passes() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache_dir() / "mypy-cache")],
                            cwd=CHECKOUT_DIR, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]
