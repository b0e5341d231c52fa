"""`kube-sandbox up|down|status|exec|kubectl`: run the local Kubernetes sandbox."""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
from collections.abc import Sequence
from pathlib import Path

from kube_sandbox import binaries
from kube_sandbox.certs import ensure_pki, write_kubeconfig
from kube_sandbox.config import AZURITE_ACCOUNT, CHECKOUT_DIR, SandboxConfig
from kube_sandbox.control_api import ControlClient
from kube_sandbox.namespace import (
    INITIAL_HOSTS,
    mount_namespace_id,
    nsenter_prefix,
    processes_in_namespace,
    unshare_prefix,
)

UP_TIMEOUT_SECONDS = 180.0
DOWN_TIMEOUT_SECONDS = 60.0
POLL_SECONDS = 0.2


class SandboxError(RuntimeError):
    pass


def daemon_pid(config: SandboxConfig) -> int | None:
    """The running daemon's pid, or None if it is not running."""
    try:
        pid = int(config.daemon_pid_file.read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None
    try:
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    if b"kube_sandbox.daemon" not in command_line:
        return None  # the pid file is stale and the number went to another process
    return pid


def is_up(config: SandboxConfig) -> bool:
    pid = daemon_pid(config)
    if pid is None:
        return False
    try:
        status = ControlClient(config).status()
    except (urllib.error.URLError, OSError):
        return False
    # Another sandbox could be answering on these ports: it must be ours.
    return bool(status.get("ready")) and status.get("pid") == pid


def up(config: SandboxConfig) -> float:
    """Start the sandbox (or find it running); returns the seconds it took."""
    started = time.monotonic()
    if is_up(config):
        return 0.0
    if daemon_pid(config) is not None:
        raise SandboxError(f"a sandbox daemon is running but not ready; see {config.logs_dir / 'daemon.log'} "
                           "or run `python -m kube_sandbox down` first")
    binaries.kube_bin_dir()  # fail early with install instructions
    binaries.object_store_programs()  # SeaweedFS, Azurite, fake-gcs-server: the same
    for directory in (config.state_dir, config.logs_dir, config.kubelet_dir):
        directory.mkdir(parents=True, exist_ok=True)
    ensure_pki(config)
    write_kubeconfig(config)
    config.hosts_file.write_text(INITIAL_HOSTS)
    # The sandbox is not installed (only the operators are): the daemon imports it from the checkout.
    python_path = os.pathsep.join(p for p in (str(CHECKOUT_DIR), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, SANDBOX_DIR=str(config.state_dir), KUBECONFIG=str(config.kubeconfig),
               PYTHONPATH=python_path)
    with open(config.logs_dir / "daemon.log", "ab") as out:
        process = subprocess.Popen(
            [*unshare_prefix(), sys.executable, "-m", "kube_sandbox.daemon"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True,
        )
    config.daemon_pid_file.write_text(f"{process.pid}\n")
    deadline = time.monotonic() + UP_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SandboxError(f"sandbox daemon exited with {process.returncode}:\n{_log_tail(config)}")
        if is_up(config):
            namespace = mount_namespace_id(process.pid) or ""
            config.daemon_pid_file.write_text(f"{process.pid} {namespace}\n")
            return time.monotonic() - started
        time.sleep(POLL_SECONDS)  # polling a readiness condition with a deadline
    down(config)
    raise SandboxError(f"sandbox not ready after {UP_TIMEOUT_SECONDS:.0f}s:\n{_log_tail(config)}")


def down(config: SandboxConfig) -> int:
    """Stop the daemon and every process in its namespace; returns how many leftovers were killed."""
    pid = daemon_pid(config)
    recorded = config.daemon_pid_file.read_text().split() if config.daemon_pid_file.exists() else []
    namespace = mount_namespace_id(pid) if pid else (recorded[1] if len(recorded) > 1 else None)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + DOWN_TIMEOUT_SECONDS
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(POLL_SECONDS)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    leftovers = processes_in_namespace(namespace, exclude=[os.getpid()]) if namespace else []
    for leftover in leftovers:
        try:
            os.kill(leftover, signal.SIGKILL)
        except ProcessLookupError:
            pass
    config.daemon_pid_file.unlink(missing_ok=True)
    return len(leftovers)


def _alive(pid: int) -> bool:
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)  # reap if it is our child
        if finished == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def run_in_sandbox(config: SandboxConfig, argv: Sequence[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run a command inside the sandbox's DNS namespace (pod and service names resolve there)."""
    pid = daemon_pid(config)
    if pid is None:
        raise SandboxError("the sandbox is not running; start it with `python -m kube_sandbox up`")
    path = f"{config.venv_bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"  # etcdctl, python, ...
    env = dict(os.environ, KUBECONFIG=str(config.kubeconfig), PATH=path)
    result: subprocess.CompletedProcess[str] = subprocess.run(  # type: ignore[call-overload]
        [*nsenter_prefix(pid), *argv], env=env, text=True, **kwargs)
    return result


def _log_tail(config: SandboxConfig, lines: int = 40) -> str:
    try:
        return "\n".join((config.logs_dir / "daemon.log").read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no daemon log)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kube_sandbox",
        description="A local Kubernetes (real kube-apiserver, controller-manager and scheduler; three "
                    "nodes whose pods are local processes). State lives in $SANDBOX_DIR (default: .sandbox "
                    "in the checkout); $SANDBOX_PORT_OFFSET and $SANDBOX_POD_IP_PREFIX move a second sandbox.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("up", help="start the sandbox (no-op if it is running)")
    commands.add_parser("down", help="stop the sandbox and every process it started")
    commands.add_parser("status", help="print whether the sandbox runs, as JSON; exit 1 if not")
    exec_parser = commands.add_parser("exec", help="run a command where pod DNS names resolve: exec -- CMD...")
    exec_parser.add_argument("argv", nargs=argparse.REMAINDER)
    kubectl_parser = commands.add_parser("kubectl", help="run the sandbox's kubectl with its kubeconfig")
    kubectl_parser.add_argument("argv", nargs=argparse.REMAINDER)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["exec"], ["kubectl"]):
        # Everything after the sub-command belongs to the command run, flags included.
        args = argparse.Namespace(command=argv[0], argv=argv[1:])
    else:
        args = parser.parse_args(argv)
    config = SandboxConfig.from_env()
    try:
        if args.command == "up":
            seconds = up(config)
            print(f"sandbox up ({seconds:.1f}s); kubeconfig: {config.kubeconfig}")
            print(f"  export KUBECONFIG={config.kubeconfig}")
            print(f"  S3: {config.s3_endpoint} (access key {config.s3_access_key})")
            print(f"  ABS (Azurite): {config.abs_endpoint} (account {AZURITE_ACCOUNT}, its well-known key)")
            print(f"  GCS (fake-gcs-server): {config.gcs_endpoint} (any credentials)")
            return 0
        if args.command == "down":
            killed = down(config)
            print("sandbox down" + (f" ({killed} leftover processes killed)" if killed else ""))
            return 0
        if args.command == "status":
            running = is_up(config)
            status: dict[str, object] = ControlClient(config).status() if running else {"ready": False}
            status["kubeconfig"] = str(config.kubeconfig)
            print(json.dumps(status, indent=2))
            return 0 if running else 1
        command = [a for a in args.argv if a != "--"] if args.argv[:1] == ["--"] else list(args.argv)
        if args.command == "exec":
            if not command:
                parser.error("exec needs a command: python -m kube_sandbox exec -- CMD ...")
            return run_in_sandbox(config, command).returncode
        kubectl = [str(binaries.kubectl()), f"--kubeconfig={config.kubeconfig}", *command]
        return subprocess.run(kubectl).returncode
    except (SandboxError, binaries.MissingBinary) as e:
        print(f"kube-sandbox: {e}", file=sys.stderr)
        return 1
