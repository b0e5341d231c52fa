"""`up` and `down` of a whole sandbox: every component ready, nothing left behind. (How fast `up`
is with the binaries cached is a benchmark figure, `make bench` `sandbox-up`: a timed assertion
here failed whenever the shared phase loaded the machine.)

Runs a second sandbox (own state dir, ports and pod IPs shifted from the session's) so the
session's shared one is untouched.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from kube_sandbox.config import NODE_NAMES, shifted_sandbox_env
from kube_sandbox.namespace import processes_in_namespace


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kube_sandbox", *args], env=env, capture_output=True,
                          text=True, timeout=240)


# Ports beyond those of the alone phase's extra sandboxes (EXTRA_SANDBOX_PORT_STEP each), which
# scripts/test.sh starts while this test runs in the shared phase.
PORT_SHIFT = 3000
POD_OCTET_SHIFT = 100


def second_sandbox_env(state_dir: Path) -> dict[str, str]:
    return dict(os.environ, **shifted_sandbox_env(state_dir, PORT_SHIFT, POD_OCTET_SHIFT))


def test_up_starts_every_component_and_down_leaves_no_process(tmp_path: Path) -> None:
    env = second_sandbox_env(tmp_path / "second")
    started = time.monotonic()
    up = run_cli(env, "up")
    up_seconds = time.monotonic() - started
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        print(f"\nwarm up took {up_seconds:.1f}s (the benchmark's sandbox-up figure judges it)")
        status = run_cli(env, "status")
        assert status.returncode == 0, status.stdout + status.stderr
        report = json.loads(status.stdout)
        assert report["ready"] and all(report["components"].values()), report
        nodes = run_cli(env, "kubectl", "get", "nodes", "--no-headers")
        assert nodes.stdout.count(" Ready ") == len(NODE_NAMES), nodes.stdout + nodes.stderr

        daemon_pid = int((tmp_path / "second" / "daemon.pid").read_text().split()[0])
        namespace = os.readlink(f"/proc/{daemon_pid}/ns/mnt")
        processes = processes_in_namespace(namespace)
        assert len(processes) >= 6, processes  # daemon, etcd, apiserver, controller-manager, scheduler, s3
    finally:
        down = run_cli(env, "down")
    assert down.returncode == 0, down.stdout + down.stderr
    leftovers = [pid for pid in processes if Path(f"/proc/{pid}").exists()
                 and os.readlink(f"/proc/{pid}/ns/mnt") == namespace]
    assert not leftovers, f"processes left behind: {leftovers}"
    assert run_cli(env, "status").returncode == 1
