"""What the storage emulators' launchers share: a free loopback port and waiting for a port to
accept connections (the emulator's log shown when it does not)."""
from __future__ import annotations

import socket
import time

from kube_sandbox.processes import ManagedProcess

LOOPBACK = "127.0.0.1"
START_TIMEOUT_SECONDS = 60.0


def free_port(below: int = 65536) -> int:
    """A loopback port free now (the kernel's pick), below `below`."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((LOOPBACK, 0))
            port = int(probe.getsockname()[1])
        if port < below:
            return port


def wait_until_listening(process: ManagedProcess, port: int, timeout_seconds: float = START_TIMEOUT_SECONDS) -> None:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if not process.running():
            raise RuntimeError(f"{process.name} exited at start; its log:\n{process.tail()}")
        try:
            with socket.create_connection((LOOPBACK, port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.1)
    process.stop()
    raise RuntimeError(f"{process.name} did not listen on {LOOPBACK}:{port} within {timeout_seconds:.0f}s; "
                       f"its log:\n{process.tail()}")
