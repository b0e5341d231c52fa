"""scripts/test.sh (`make test`, CI) runs the shared phase, then the alone phase (on as many sandboxes
as $TEST_ALONE_SANDBOXES says, the extra ones started beside the shared phase), then the latency
phase on the first sandbox with the extra ones stopped, and fails if any fails; a shared phase that
did not run its tests (interrupted, killed, nothing collected) ends the suite before the others. Run with a stand-in Python that records each pytest call and each
sandbox it is asked to start."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kube_sandbox.config import CHECKOUT_DIR

FAKE_PYTHON = """#!/bin/sh
# A stand-in venv python: the first sandbox is "up", an extra one (named by $SANDBOX_DIR) is not and
# starts with $EXTRA_UP_EXIT, and is stopped (recorded with the number of pytest calls before);
# each pytest call is recorded and exits as told.
if [ "$2" = tests.sandbox_sharing ]; then echo "SANDBOX_DIR=/extra-$4 SANDBOX_PORT_OFFSET=500"; exit 0; fi
if [ "$2" = kube_sandbox ]; then
  if [ -z "$SANDBOX_DIR" ]; then exit 0; fi
  if [ "$3" = down ]; then echo "down $SANDBOX_DIR after $(cat "$CALLS" 2>/dev/null | wc -l)" >> "$CALLS.sandboxes"; exit 0; fi
  echo "$3 $SANDBOX_DIR" >> "$CALLS.sandboxes"
  if [ "$3" = up ]; then exit "$EXTRA_UP_EXIT"; else exit 1; fi
fi
echo "$*" >> "$CALLS"
case "$*" in *"-m alone"*) exit "$ALONE_EXIT" ;; *"-m latency"*) exit "$LATENCY_EXIT" ;; *) exit "$SHARED_EXIT" ;; esac
"""


def run_suite(tmp_path: Path, shared_exit: int, alone_exit: int, alone_sandboxes: int = 2,
              extra_up_exit: int = 0, latency_exit: int = 0) -> tuple[int, list[str]]:
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    python = venv_bin / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    calls = tmp_path / "calls"
    result = subprocess.run(
        ["bash", str(CHECKOUT_DIR / "scripts" / "test.sh"), "-x"], capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "VENV": str(tmp_path / "venv"), "CALLS": str(calls),
             "SHARED_EXIT": str(shared_exit), "ALONE_EXIT": str(alone_exit), "TEST_WORKERS": "3",
             "TEST_ALONE_SANDBOXES": str(alone_sandboxes), "EXTRA_UP_EXIT": str(extra_up_exit),
             "LATENCY_EXIT": str(latency_exit)},
        cwd=tmp_path)
    return result.returncode, calls.read_text().splitlines() if calls.exists() else []


def sandboxes_stopped(tmp_path: Path) -> list[str]:
    started = tmp_path / "calls.sandboxes"
    return [line for line in started.read_text().splitlines() if line.startswith("down ")] if started.exists() else []


def sandboxes_started(tmp_path: Path) -> list[str]:
    started = tmp_path / "calls.sandboxes"
    return [line for line in started.read_text().splitlines() if line.startswith("up ")] if started.exists() else []


def test_the_phases_run_with_the_workers_the_markers_and_the_arguments(tmp_path: Path) -> None:
    status, calls = run_suite(tmp_path, 0, 0)
    assert status == 0
    shared, alone, latency = calls
    assert "-n 3" in shared and '-m not alone' in shared and "--durations=25" in shared and shared.endswith("-x")
    assert "-n 2 " in alone and "--sandbox-per-worker" in alone and "-m alone and not latency" in alone
    assert "--durations=25" in alone and alone.endswith("-x")
    assert "-p no:xdist" in latency and "--sandbox-per-worker" not in latency and "-m latency" in latency
    assert "--durations=25" in latency and latency.endswith("-x")
    assert sandboxes_started(tmp_path) == ["up /extra-1"]
    # The extra sandbox stops after the alone phase, before the latency phase, and only then.
    assert sandboxes_stopped(tmp_path) == ["down /extra-1 after 2"]


def test_one_alone_sandbox_runs_the_alone_phase_without_workers(tmp_path: Path) -> None:
    status, calls = run_suite(tmp_path, 0, 0, alone_sandboxes=1)
    assert status == 0
    assert "-p no:xdist" in calls[1] and "--sandbox-per-worker" not in calls[1]
    assert sandboxes_started(tmp_path) == []


def test_three_alone_sandboxes_start_two_extra_ones(tmp_path: Path) -> None:
    status, calls = run_suite(tmp_path, 0, 0, alone_sandboxes=3)
    assert status == 0 and "-n 3 " in calls[1]
    assert sandboxes_started(tmp_path) == ["up /extra-1", "up /extra-2"]


def test_an_extra_sandbox_that_did_not_start_leaves_the_alone_phase_on_the_first(tmp_path: Path) -> None:
    status, calls = run_suite(tmp_path, 0, 0, extra_up_exit=1)
    assert status == 0
    assert "-p no:xdist" in calls[1] and "--sandbox-per-worker" not in calls[1]


@pytest.mark.parametrize("shared_exit, alone_exit, latency_exit", [(1, 0, 0), (0, 1, 0), (0, 5, 0), (0, 0, 1), (0, 0, 5)])
def test_a_failure_in_any_phase_fails_the_suite(tmp_path: Path, shared_exit: int, alone_exit: int,
                                                latency_exit: int) -> None:
    status, calls = run_suite(tmp_path, shared_exit, alone_exit, latency_exit=latency_exit)
    assert status != 0 and len(calls) == 3, (status, calls)


@pytest.mark.parametrize("shared_exit", [2, 5, 143])
def test_a_shared_phase_that_did_not_run_its_tests_stops_the_suite(tmp_path: Path, shared_exit: int) -> None:
    status, calls = run_suite(tmp_path, shared_exit, 0)
    assert status == shared_exit and len(calls) == 1, (status, calls)
