"""Azurite's blob service (Azure Blob Storage emulator, from npm) on loopback, with its well-known
development account: the sandbox's ABS store (`azurite_argv`), or one on a free port for the ABS
storage tests, which need no sandbox (`start_azurite`)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kube_sandbox import binaries
from kube_sandbox.config import AZURITE_ACCOUNT as ACCOUNT
from kube_sandbox.config import AZURITE_ACCOUNT_KEY as ACCOUNT_KEY
from kube_sandbox.emulator_process import LOOPBACK, free_port, wait_until_listening
from kube_sandbox.processes import ManagedProcess

__all__ = ["ACCOUNT", "ACCOUNT_KEY", "Azurite", "azurite_argv", "blob_endpoint", "start_azurite"]


def blob_endpoint(host: str, port: int, *, https: bool = False) -> str:
    """The blob service URL of the development account (path-style, as Azurite serves it)."""
    return f"{'https' if https else 'http'}://{host}:{port}/{ACCOUNT}"


def azurite_argv(directory: Path, host: str, port: int, *, tls: tuple[Path, Path] | None = None,
                 oauth: bool = False) -> list[str]:
    """Azurite's blob service on host:port with its data in `directory`/data. Telemetry off: Azurite
    otherwise sends usage data, and asks the cloud metadata address 169.254.169.254 (network rule:
    nothing leaves loopback; the sandbox test of every connection caught it)."""
    (directory / "data").mkdir(parents=True, exist_ok=True)
    return [
        str(binaries.emulator("azurite-blob", "azurite")),
        "--blobHost", host, "--blobPort", str(port), "--location", str(directory / "data"),
        "--skipApiVersionCheck", "--disableProductStyleUrl", "--disableTelemetry",
        # HTTPS with (certificate, key); OAuth bearer tokens checked the "basic" way (issuer,
        # audience, times; not the signature), which Azurite accepts over HTTPS only.
        *(["--cert", str(tls[0]), "--key", str(tls[1])] if tls else []),
        *(["--oauth", "basic"] if oauth else []),
    ]


@dataclass
class Azurite:
    process: ManagedProcess
    port: int
    https: bool = False

    @property
    def endpoint(self) -> str:
        return blob_endpoint(LOOPBACK, self.port, https=self.https)

    def stop(self) -> None:
        self.process.stop()


def start_azurite(directory: Path, *, tls: tuple[Path, Path] | None = None, oauth: bool = False) -> Azurite:
    """Start Azurite's blob service with its data and log in `directory` (over HTTPS with `tls`,
    (certificate, key) PEM files; accepting OAuth bearer tokens with `oauth`, which needs `tls`);
    stop it with `.stop()`."""
    if oauth and tls is None:
        raise ValueError("Azurite accepts OAuth bearer tokens over HTTPS only: give tls")
    port = free_port()
    process = ManagedProcess("azurite-blob", azurite_argv(directory, LOOPBACK, port, tls=tls, oauth=oauth),
                             directory / "azurite.log")
    process.start()
    wait_until_listening(process, port)
    return Azurite(process, port, https=tls is not None)
