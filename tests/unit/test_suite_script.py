"""scripts/test.sh (`make test`, CI) runs the shared phase, then the alone phase, and fails if
either fails; a shared phase that did not run its tests (interrupted, killed, nothing collected)
ends the suite before the alone phase. Run with a stand-in Python that records each pytest call."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kube_sandbox.config import CHECKOUT_DIR

FAKE_PYTHON = """#!/bin/sh
# A stand-in venv python: the sandbox is "up"; each pytest call is recorded and exits as told.
if [ "$2" = kube_sandbox ]; then exit 0; fi
echo "$*" >> "$CALLS"
case "$*" in *"-m alone"*) exit "$ALONE_EXIT" ;; *) exit "$SHARED_EXIT" ;; esac
"""


def run_suite(tmp_path: Path, shared_exit: int, alone_exit: int) -> tuple[int, list[str]]:
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    python = venv_bin / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    calls = tmp_path / "calls"
    result = subprocess.run(
        ["bash", str(CHECKOUT_DIR / "scripts" / "test.sh"), "-x"], capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "VENV": str(tmp_path / "venv"), "CALLS": str(calls),
             "SHARED_EXIT": str(shared_exit), "ALONE_EXIT": str(alone_exit), "TEST_WORKERS": "3"})
    return result.returncode, calls.read_text().splitlines() if calls.exists() else []


def test_both_phases_run_with_the_workers_the_markers_and_the_arguments(tmp_path: Path) -> None:
    status, calls = run_suite(tmp_path, 0, 0)
    assert status == 0
    shared, alone = calls
    assert "-n 3" in shared and '-m not alone' in shared and "--durations=25" in shared and shared.endswith("-x")
    assert "-p no:xdist" in alone and "-m alone" in alone and "--durations=25" in alone and alone.endswith("-x")


@pytest.mark.parametrize("shared_exit, alone_exit", [(1, 0), (0, 1), (0, 5)])
def test_a_failure_in_either_phase_fails_the_suite(tmp_path: Path, shared_exit: int, alone_exit: int) -> None:
    status, calls = run_suite(tmp_path, shared_exit, alone_exit)
    assert status != 0 and len(calls) == 2, (status, calls)


@pytest.mark.parametrize("shared_exit", [2, 5, 143])
def test_a_shared_phase_that_did_not_run_its_tests_stops_the_suite(tmp_path: Path, shared_exit: int) -> None:
    status, calls = run_suite(tmp_path, shared_exit, 0)
    assert status == shared_exit and len(calls) == 1, (status, calls)
