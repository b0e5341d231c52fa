"""A container as a local process: its own session/process group, a log file, signals, exit codes.

Every process gets a pid file (pid + kernel start time) so a kubelet that died without cleaning
up can find and kill its orphans on the next start (`reap_orphans`).
"""
from __future__ import annotations

import errno
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger(__name__)

KILL_WAIT_SECONDS = 5.0  # how long to wait for a SIGKILLed process to be reaped


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class ProcessSpec:
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    log_path: Path
    pid_file: Path
    user: int | None = None  # run as this uid (None: the kubelet's own), see `argv_as_user`
    group: int | None = None  # ... with this gid (None: the uid)
    extra_groups: tuple[int, ...] | None = None  # ... and these supplementary groups (None: none)


def argv_as_user(spec: ProcessSpec) -> list[str]:
    """The command that runs `spec.argv` as its user (`setpriv`, util-linux's), or `spec.argv`.
    It goes inside a wrapper that must still be root (joining cgroups)."""
    if spec.user is None:
        return spec.argv
    groups = ",".join(map(str, spec.extra_groups or ()))
    return ["setpriv", f"--reuid={spec.user}", f"--regid={spec.group if spec.group is not None else spec.user}",
            f"--groups={groups}" if groups else "--clear-groups", "--", *spec.argv]


def exit_code_of(returncode: int) -> int:
    """Popen's -SIGNAL becomes 128+SIGNAL, as container runtimes report it."""
    return 128 - returncode if returncode < 0 else returncode


def require_executable(spec: ProcessSpec) -> None:
    """FileNotFoundError as Popen raises it when the command cannot be found or run."""
    command = spec.argv[0]
    if "/" in command:
        path = command if os.path.isabs(command) else os.path.join(spec.cwd, command)
        found = os.path.isfile(path) and os.access(path, os.X_OK)
    else:
        found = shutil.which(command, path=spec.env.get("PATH", os.defpath)) is not None
    if not found:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)


def signal_group(pid: int, sig: int) -> bool:
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


class ContainerProcess:
    """One run of a container. `on_exit` is called (from a waiter thread) when the process ends."""

    def __init__(self, spec: ProcessSpec, on_exit: Callable[[], None]) -> None:
        self.spec = spec
        self.on_exit = on_exit
        self._popen: subprocess.Popen[bytes] | None = None
        self.started_at = ""
        self.finished_at = ""
        self.exited = threading.Event()
        self._returncode: int | None = None

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    @property
    def container_id(self) -> str:
        return f"process://{self.pid}" if self.pid else ""

    @property
    def exit_code(self) -> int | None:
        return exit_code_of(self._returncode) if self._returncode is not None else None

    def start(self) -> int:
        """Start the process; OSError (e.g. executable not found) propagates to the caller."""
        self.spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.spec.cwd.mkdir(parents=True, exist_ok=True)
        with open(self.spec.log_path, "ab") as log_file:
            self._popen = subprocess.Popen(
                argv_as_user(self.spec), env=self.spec.env, cwd=self.spec.cwd, stdin=subprocess.DEVNULL,
                stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
            )
        self.started_at = now_rfc3339()
        _write_pid_file(self.spec.pid_file, self._popen.pid)
        threading.Thread(target=self._wait, name=f"wait-{self._popen.pid}", daemon=True).start()
        return self._popen.pid

    def _wait(self) -> None:
        assert self._popen is not None
        returncode = self._popen.wait()
        # Like a container's PID namespace: when the main process ends, so does everything it started.
        signal_group(self._popen.pid, signal.SIGKILL)
        self.finished_at = now_rfc3339()
        self._returncode = returncode
        try:
            self.spec.pid_file.unlink()
        except FileNotFoundError:
            pass
        self._after_exit()
        self.exited.set()
        try:
            self.on_exit()
        except Exception:
            log.exception("exit callback for pid %s failed", self._popen.pid)

    def _after_exit(self) -> None:
        """What a kind of container cleans up once its process has ended (before `exited` is set)."""

    def running(self) -> bool:
        return self._popen is not None and not self.exited.is_set()

    def send(self, sig: int) -> bool:
        """Signal the whole process group; False when it is already gone."""
        if not self.running() or self.pid is None:
            return False
        return signal_group(self.pid, sig)

    def terminate(self, grace_seconds: float, abort: threading.Event | None = None) -> None:
        """SIGTERM (and SIGCONT, so a frozen process can act on it), then SIGKILL after the grace."""
        if not self.running():
            return
        self.send(signal.SIGTERM)
        self.send(signal.SIGCONT)
        deadline = time.monotonic() + max(grace_seconds, 0.0)
        while not self.exited.wait(min(0.1, max(deadline - time.monotonic(), 0.0))):
            if time.monotonic() >= deadline or (abort is not None and abort.is_set()):
                break
        self.kill()

    def kill(self) -> None:
        if self.send(signal.SIGKILL):
            self.exited.wait(KILL_WAIT_SECONDS)

    def terminate_in_background(self, grace_seconds: float) -> None:
        threading.Thread(target=self.terminate, args=(grace_seconds,), name=f"terminate-{self.pid}",
                         daemon=True).start()


def _start_time(pid: int) -> str | None:
    """Kernel start time of `pid` (field 22 of /proc/pid/stat): tells a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _write_pid_file(pid_file: Path, pid: int) -> None:
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.write_text(f"{pid} {_start_time(pid) or ''}\n")


def reap_orphans(pids_dir: Path) -> list[int]:
    """Kill process groups left behind by a previous kubelet that did not stop cleanly."""
    killed: list[int] = []
    if not pids_dir.is_dir():
        return killed
    for pid_file in pids_dir.glob("*.pid"):
        try:
            pid_text, _, start = pid_file.read_text().strip().partition(" ")
            pid = int(pid_text)
        except (OSError, ValueError):
            pid_file.unlink(missing_ok=True)
            continue
        if start and _start_time(pid) == start and signal_group(pid, signal.SIGKILL):
            killed.append(pid)
        pid_file.unlink(missing_ok=True)
    if killed:
        log.warning("killed %d orphaned container process groups from a previous run: %s", len(killed), killed)
    return killed
