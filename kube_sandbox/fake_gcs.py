"""fake-gcs-server (a GCS JSON API emulator, built from its Go module) on loopback over plain
HTTP; it accepts any credentials. The sandbox's GCS store (`fake_gcs_argv`), or one on a free port
for the GCS storage tests, which need no sandbox (`start_fake_gcs`)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kube_sandbox import binaries
from kube_sandbox.emulator_process import LOOPBACK, free_port, wait_until_listening
from kube_sandbox.processes import ManagedProcess


def fake_gcs_argv(directory: Path, host: str, port: int) -> list[str]:
    """fake-gcs-server on host:port with its objects in `directory`/data."""
    (directory / "data").mkdir(parents=True, exist_ok=True)
    return [
        str(binaries.emulator("fake-gcs-server", "fake-gcs-server")),
        "-scheme", "http", "-host", host, "-port", str(port),
        "-backend", "filesystem", "-filesystem-root", str(directory / "data"),
        "-public-host", f"{host}:{port}", "-external-url", f"http://{host}:{port}", "-log-level", "warn",
    ]


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
    process = ManagedProcess("fake-gcs-server", fake_gcs_argv(directory, LOOPBACK, port),
                             directory / "fake-gcs-server.log")
    process.start()
    wait_until_listening(process, port)
    return FakeGcs(process, port)
