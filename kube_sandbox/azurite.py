"""Azurite's blob service (Azure Blob Storage emulator, from npm) on a free loopback port, with
its well-known development account: for the ABS storage tests, which need no sandbox."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kube_sandbox import binaries
from kube_sandbox.emulator_process import LOOPBACK, free_port, wait_until_listening
from kube_sandbox.processes import ManagedProcess

# Azurite's fixed development account (published in Azurite's README; not a secret).
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@dataclass
class Azurite:
    process: ManagedProcess
    port: int

    @property
    def endpoint(self) -> str:
        """The blob service URL of the development account (path-style, as Azurite serves it)."""
        return f"http://{LOOPBACK}:{self.port}/{ACCOUNT}"

    def stop(self) -> None:
        self.process.stop()


def start_azurite(directory: Path) -> Azurite:
    """Start Azurite's blob service with its data and log in `directory`; stop it with `.stop()`."""
    port = free_port()
    (directory / "data").mkdir(parents=True, exist_ok=True)
    process = ManagedProcess("azurite-blob", [
        str(binaries.emulator("azurite-blob", "azurite")),
        "--blobHost", LOOPBACK, "--blobPort", str(port), "--location", str(directory / "data"),
        "--skipApiVersionCheck", "--disableProductStyleUrl",
    ], directory / "azurite.log")
    process.start()
    wait_until_listening(process, port)
    return Azurite(process, port)
