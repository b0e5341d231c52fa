"""`up` and `down` of a whole sandbox: fast when the binaries are cached, nothing left behind.

Runs a second sandbox (own state dir, ports shifted) so the session's shared one is untouched.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from kube_sandbox.namespace import processes_in_namespace

WARM_UP_LIMIT_SECONDS = 30.0


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kube_sandbox", *args], env=env, capture_output=True,
                          text=True, timeout=240)


def test_up_is_fast_with_cached_binaries_and_down_leaves_no_process(tmp_path: Path) -> None:
    env = dict(os.environ, SANDBOX_DIR=str(tmp_path / "second"), SANDBOX_PORT_OFFSET="1000")
    started = time.monotonic()
    up = run_cli(env, "up")
    up_seconds = time.monotonic() - started
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        print(f"\nwarm up took {up_seconds:.1f}s")
        assert up_seconds < WARM_UP_LIMIT_SECONDS
        status = run_cli(env, "status")
        assert status.returncode == 0, status.stdout + status.stderr
        report = json.loads(status.stdout)
        assert report["ready"] and all(report["components"].values()), report
        nodes = run_cli(env, "kubectl", "get", "nodes", "--no-headers")
        assert " Ready " in nodes.stdout, nodes.stdout + nodes.stderr

        daemon_pid = int((tmp_path / "second" / "daemon.pid").read_text().split()[0])
        namespace = os.readlink(f"/proc/{daemon_pid}/ns/mnt")
        processes = processes_in_namespace(namespace)
        assert len(processes) >= 5, processes  # daemon, etcd, apiserver, controller-manager, s3
    finally:
        down = run_cli(env, "down")
    assert down.returncode == 0, down.stdout + down.stderr
    leftovers = [pid for pid in processes if Path(f"/proc/{pid}").exists()
                 and os.readlink(f"/proc/{pid}/ns/mnt") == namespace]
    assert not leftovers, f"processes left behind: {leftovers}"
    assert run_cli(env, "status").returncode == 1
