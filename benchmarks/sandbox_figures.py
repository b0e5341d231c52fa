"""How long `python -m kube_sandbox up` takes with every binary cached (a second sandbox beside the
session's: its own state directory, ports and pod addresses, as the alone phase's extra sandboxes),
against the 30 s the test workflow counts on (docs/dev/testing.md); `down` after each run."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.results import Result, describe_samples, median
from kube_sandbox.config import shifted_sandbox_env

WARM_UP_TARGET_SECONDS = 30.0
CLI_TIMEOUT_SECONDS = 240
# Beyond the alone phase's extra sandboxes (500 per index) and the lifecycle test's (3000).
PORT_SHIFT = 3500
POD_OCTET_SHIFT = 110


def _second_sandbox_env(state_dir: Path) -> dict[str, str]:
    return dict(os.environ, **shifted_sandbox_env(state_dir, PORT_SHIFT, POD_OCTET_SHIFT))


def _cli(env: dict[str, str], command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kube_sandbox", command], env=env, capture_output=True,
                          text=True, timeout=CLI_TIMEOUT_SECONDS)


def measure_sandbox_up(repeat: int) -> list[Result]:
    samples = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as state:
            env = _second_sandbox_env(Path(state) / "sandbox")
            started = time.monotonic()
            try:
                up = _cli(env, "up")
                elapsed = time.monotonic() - started
                if up.returncode != 0:
                    raise RuntimeError(f"kube_sandbox up failed:\n{up.stdout}{up.stderr}")
            finally:
                _cli(env, "down")
            samples.append(elapsed)
    return [Result.alone("sandbox up, binaries cached", "s", median(samples), target=WARM_UP_TARGET_SECONDS,
                         note=describe_samples(samples))]
