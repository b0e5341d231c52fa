"""The sandbox's object stores, each a process on a fixed loopback port: SeaweedFS (S3, and OSS
through its S3 API), Azurite (ABS) and fake-gcs-server (GCS); the outage fault stops one by name
and the daemon's watchdog leaves it down until it is started again."""
from __future__ import annotations

import logging
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass

from kube_sandbox.azurite import azurite_argv
from kube_sandbox.config import HOST_IP, SandboxConfig
from kube_sandbox.fake_gcs import fake_gcs_argv
from kube_sandbox.processes import ManagedProcess
from kube_sandbox.s3 import s3_server

log = logging.getLogger(__name__)

# The names the control API's stop-store/start-store and `status` use.
STORE_NAMES = ("s3", "abs", "gcs")
LISTEN_POLL_SECONDS = 0.1


@dataclass
class Store:
    name: str
    process: ManagedProcess
    port: int
    endpoint: str
    # Set by the outage fault (stop-store): the watchdog does not restart it.
    stopped: bool = False

    def listening(self) -> bool:
        try:
            with socket.create_connection((HOST_IP, self.port), timeout=1.0):
                return True
        except OSError:
            return False


def sandbox_stores(config: SandboxConfig) -> dict[str, Store]:
    """The three stores with their state under the sandbox's state dir and logs in its logs dir
    (not started). Raises binaries.MissingBinary, naming how to install it, when one is missing."""
    return {
        "s3": Store("s3", s3_server(config), config.s3_port, config.s3_endpoint),
        "abs": Store("abs", ManagedProcess("abs (azurite-blob)", azurite_argv(
            config.state_dir / "abs", HOST_IP, config.abs_port), config.logs_dir / "abs.log"),
            config.abs_port, config.abs_endpoint),
        "gcs": Store("gcs", ManagedProcess("gcs (fake-gcs-server)", fake_gcs_argv(
            config.state_dir / "gcs", HOST_IP, config.gcs_port), config.logs_dir / "gcs.log"),
            config.gcs_port, config.gcs_endpoint),
    }


def wait_until_listening(stores: Mapping[str, Store], timeout_seconds: float) -> list[str]:
    """Wait for every started store to accept connections; the names of those that did not in time."""
    deadline = time.monotonic() + timeout_seconds
    waiting = [store for store in stores.values() if not store.stopped]
    while waiting and time.monotonic() < deadline:
        waiting = [store for store in waiting if store.process.running() and not store.listening()]
        if waiting:
            time.sleep(LISTEN_POLL_SECONDS)  # polling a port with a deadline
    return [store.name for store in stores.values() if not store.stopped and not store.listening()]


def store_named(stores: Mapping[str, Store], name: str) -> Store:
    if name not in stores:
        raise ValueError(f"no store {name!r}; the sandbox's stores: {', '.join(stores)}")
    return stores[name]
