"""The sandbox's S3 server: SeaweedFS `weed mini` on loopback, with one access key and secret;
`start_standalone_s3` runs one on free loopback ports for tests that need no sandbox."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kube_sandbox import binaries
from kube_sandbox.config import HOST_IP, SandboxConfig
from kube_sandbox.emulator_process import LOOPBACK, free_port, wait_until_listening
from kube_sandbox.processes import ManagedProcess


def s3_server(config: SandboxConfig) -> ManagedProcess:
    directory = config.state_dir / "s3"
    return ManagedProcess("s3 (weed mini)", _weed_mini_argv(
        directory, HOST_IP, [config.s3_port + offset for offset in range(6)],
        config.s3_access_key, config.s3_secret_key,
    ), config.logs_dir / "s3.log")


def _weed_mini_argv(directory: Path, ip: str, ports: list[int], access_key: str, secret_key: str) -> list[str]:
    """`weed mini` serving S3 on ports[0]; its master, volume, filer, webdav and admin on the rest."""
    (directory / "data").mkdir(parents=True, exist_ok=True)
    identities = {"identities": [{
        "name": "sandbox",
        "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }]}
    (directory / "s3.json").write_text(json.dumps(identities))
    s3_port, master, volume, filer, webdav, admin = ports
    return [
        str(binaries.weed()), "mini", f"-dir={directory / 'data'}",
        f"-ip={ip}", f"-ip.bind={ip}",
        f"-s3.port={s3_port}", f"-master.port={master}", f"-volume.port={volume}",
        f"-filer.port={filer}", f"-webdav.port={webdav}", f"-admin.port={admin}",
        "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
        "-master.telemetry=false",  # never phone home
        f"-s3.config={directory / 's3.json'}",
    ]


@dataclass
class StandaloneS3:
    process: ManagedProcess
    port: int
    access_key: str
    secret_key: str

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def stop(self) -> None:
        self.process.stop()


START_ATTEMPTS = 3
# SeaweedFS serves gRPC on each server's port + 10000: the ports picked must leave room for it.
MAX_PORT_WITH_GRPC = 65535 - 10000


# What weed says when a port it was given is taken: by another process, or by its own gRPC port
# of another server (a port picked equal to another's + 10000).
PORT_CLASHES = ("address already in use", "reserved for gRPC calculation")


def _weed_ports() -> list[int]:
    """Six distinct free ports, none another's + 10000 (SeaweedFS's gRPC port for that server)."""
    while True:
        ports = [free_port(below=MAX_PORT_WITH_GRPC) for _ in range(6)]
        if len(set(ports)) == len(ports) and not set(ports) & {port + 10000 for port in ports}:
            return ports


def start_standalone_s3(directory: Path, access_key: str = "standalone", secret_key: str = "standalone-secret",
                        timeout_seconds: float = 120.0) -> StandaloneS3:
    """SeaweedFS on free loopback ports with its data and log in `directory`; stop it with `.stop()`.

    Six ports, each free when picked, and SeaweedFS also listens on each server's port + 10000
    (gRPC): another process (a parallel test's) may take one before it binds. It then exits at
    start, and is started again on other ports, at most START_ATTEMPTS times."""
    for attempt in range(1, START_ATTEMPTS + 1):
        ports = _weed_ports()
        process = ManagedProcess("s3 (weed mini, standalone)",
                                 _weed_mini_argv(directory, LOOPBACK, ports, access_key, secret_key),
                                 directory / "s3.log")
        process.start()
        try:
            wait_until_listening(process, ports[0], timeout_seconds)
        except RuntimeError:
            process.stop()
            if attempt == START_ATTEMPTS or not any(clash in process.tail() for clash in PORT_CLASHES):
                raise
            continue
        return StandaloneS3(process, ports[0], access_key, secret_key)
    raise AssertionError("unreachable")
