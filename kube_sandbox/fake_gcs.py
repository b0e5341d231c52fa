"""fake-gcs-server (a GCS JSON API emulator, built from its Go module) on a free loopback port
over plain HTTP: for the GCS storage tests, which need no sandbox. It accepts any credentials."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kube_sandbox import binaries
from kube_sandbox.emulator_process import LOOPBACK, free_port, wait_until_listening
from kube_sandbox.processes import ManagedProcess


@dataclass
class FakeGcs:
    process: ManagedProcess
    port: int

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def stop(self) -> None:
        self.process.stop()


def start_fake_gcs(directory: Path) -> FakeGcs:
    """Start fake-gcs-server with its objects and log in `directory`; stop it with `.stop()`."""
    port = free_port()
    (directory / "data").mkdir(parents=True, exist_ok=True)
    url = f"http://{LOOPBACK}:{port}"
    process = ManagedProcess("fake-gcs-server", [
        str(binaries.emulator("fake-gcs-server", "fake-gcs-server")),
        "-scheme", "http", "-host", LOOPBACK, "-port", str(port),
        "-backend", "filesystem", "-filesystem-root", str(directory / "data"),
        "-public-host", f"{LOOPBACK}:{port}", "-external-url", url, "-log-level", "warn",
    ], directory / "fake-gcs-server.log")
    process.start()
    wait_until_listening(process, port)
    return FakeGcs(process, port)
