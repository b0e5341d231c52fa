"""A throwaway one-member etcd on 127.0.0.1, served from a data directory `etcdutl snapshot
restore` made, for as long as a `with` block: what a snapshot really holds is read from a running
etcd (the backup operator's trial restores). It listens on free loopback ports, talks to no
cluster, and is killed (with its process group) when the block ends."""
from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

from etcd_common.etcd import etcdctl as ctl

logger = logging.getLogger(__name__)

MEMBER_NAME: Final = "trial"
POLL_SECONDS: Final = 0.1
STOP_SECONDS: Final = 5.0
LOG_TAIL_BYTES: Final = 2000


def free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 now (the kernel's choice; etcd binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def peer_url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


@contextmanager
def serve_data_dir(data_dir: str, peer_port: int, *, remaining: Callable[[], float], binary: str | None = None,
                   etcdctl_binary: str | None = None) -> Iterator[ctl.Etcdctl]:
    """Run etcd on `data_dir` (restored as member MEMBER_NAME with peer URL on `peer_port`) and
    yield a client once it answers; raises EtcdctlError if it does not before `remaining()` runs
    out (or exits). The process is killed when the block ends, whatever happened."""
    client_url = peer_url(free_loopback_port())
    command = [
        binary or ctl.default_etcd_binary(), "--name", MEMBER_NAME, "--data-dir", data_dir,
        "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
        "--listen-peer-urls", peer_url(peer_port), "--initial-advertise-peer-urls", peer_url(peer_port),
        "--initial-cluster", f"{MEMBER_NAME}={peer_url(peer_port)}",
        "--listen-metrics-urls", "", "--log-level", "warn",
    ]
    log_path = os.path.join(os.path.dirname(data_dir), "etcd.log")
    with open(log_path, "wb") as log_file:
        try:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file,
                                       start_new_session=True)
        except OSError as error:
            raise ctl.EtcdctlError(f"cannot run etcd {command[0]!r}: {error}", command=command) from error
    try:
        client = ctl.Etcdctl([client_url], binary=etcdctl_binary, command_timeout_seconds=30.0)
        _wait_until_serving(process, client, log_path, remaining)
        yield client
    finally:
        _kill(process)


def _wait_until_serving(process: subprocess.Popen[bytes], client: ctl.Etcdctl, log_path: str,
                        remaining: Callable[[], float]) -> None:
    while True:
        if process.poll() is not None:
            raise ctl.EtcdctlError(f"the throwaway etcd exited with status {process.returncode}: "
                                   f"{_log_tail(log_path)}")
        try:
            client.endpoint_status()
            return
        except ctl.EtcdctlError:
            pass
        if remaining() <= POLL_SECONDS:
            raise ctl.EtcdctlError(f"the throwaway etcd did not answer in time: {_log_tail(log_path)}")
        time.sleep(POLL_SECONDS)


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        process.wait(STOP_SECONDS)
    except subprocess.TimeoutExpired:
        logger.warning("throwaway etcd (pid %d) did not exit after SIGKILL", process.pid)


def _log_tail(log_path: str) -> str:
    try:
        with open(log_path, "rb") as log_file:
            log_file.seek(max(0, os.path.getsize(log_path) - LOG_TAIL_BYTES))
            return log_file.read().decode(errors="replace").strip() or "(no output)"
    except OSError:
        return "(no log)"
