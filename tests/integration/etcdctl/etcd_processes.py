"""Real etcd processes on loopback for the etcdctl wrapper tests (3.5 and 3.6 built from etcd's Go
modules, 3.4.23 from Debian: kube_sandbox.binaries finds them), each member on an address of its
own so no test meets another's leftovers."""
from __future__ import annotations

import itertools
import json
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

from etcd_common.etcd.etcdctl import ClusterUnhealthy, Etcdctl, LearnerNotReady
from etcd_common.etcd.types import Member
from kube_sandbox.binaries import DEBIAN_ETCD_VERSION, built_etcd_versions, etcd_binaries

# Every version the tests run against, oldest first: the upgrade source 3.4 and the supported ones.
ETCD_VERSIONS: tuple[str, ...] = (DEBIAN_ETCD_VERSION, *built_etcd_versions())


def etcd_dir(version: str) -> Path:
    """The directory of `version`'s etcd, etcdctl (and etcdutl); skips the test if not installed."""
    found = etcd_binaries()
    if version not in found:
        pytest.skip(f"etcd {version} not installed (have {sorted(found)}); see scripts/install-etcd-binaries.sh")
    return found[version]


CLIENT_PORT = 23790
PEER_PORT = 23800
START_TIMEOUT_SECONDS = 20.0

# A fresh loopback address for every member started in the session: 127.0.50.1, 127.0.50.2, ... in
# the first pytest-xdist worker (or without xdist); ten /24 blocks of their own for every other
# worker from 127.0.80.0 on (gw1 80-89, gw2 90-99, ...), so parallel workers never bind or ask each
# other's members. 127.0.49.x holds addresses nothing listens on; 127.0.70.x is the benchmarks'.
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
_FIRST_BLOCK = 50 if _WORKER == 0 else 80 + 10 * (_WORKER - 1)
_addresses = (f"127.0.{_FIRST_BLOCK + n // 250}.{1 + n % 250}" for n in itertools.count())

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
    scheme: str = "http"  # "https" with TLS `flags` (test_static_tls_layout.py)
    flags: tuple[str, ...] = ()

    @property
    def client_url(self) -> str:
        return f"{self.scheme}://{self.address}:{CLIENT_PORT}"

    @property
    def peer_url(self) -> str:
        return f"{self.scheme}://{self.address}:{PEER_PORT}"

    def start(self, initial_cluster: str, state: str, token: str, *, env: dict[str, str] | None = None) -> None:
        """Start etcd; `env`: variables added to its environment (etcd reads ETCD_* as its flags)."""
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
            *self.flags,
        ]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env={**os.environ, **env} if env else None)

    def healthy(self) -> bool:
        """A linearizable v3 read answers (the gRPC gateway's range, on every version). Not /health:
        etcd 3.4 serves it with a v2 QGET through the raft log, which etcd 3.6 panics replaying
        (the operator probes 3.4 members with `etcdctl endpoint health` for the same reason)."""
        request = urllib.request.Request(
            f"{self.client_url}/v3/kv/range", data=b'{"key": "aGVhbHRo"}', method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=1) as response:
                return response.status == 200 and b'"header"' in response.read()
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

    def new_member(self, name: str, *, binary: str | None = None) -> EtcdMember:
        """A member (not started) running `binary`, by default the cluster's."""
        member = EtcdMember(
            name=name,
            address=next(_addresses),
            binary=binary or self.binary,
            data_dir=self.workdir / name,
            log_path=self.workdir / f"{name}.log",
        )
        self.members.append(member)
        return member

    def describe(self) -> str:
        return "\n".join(member.log_tail() for member in self.members)

    def wait_healthy(self, member: EtcdMember) -> None:
        wait_for(member.healthy, timeout=START_TIMEOUT_SECONDS, what=f"{member.name} healthy", describe=self.describe)

    def start_seed(self, name: str = "m1", *, env: dict[str, str] | None = None) -> EtcdMember:
        seed = self.new_member(name)
        seed.start(f"{name}={seed.peer_url}", "new", self.token, env=env)
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

    def running(self) -> list[EtcdMember]:
        return [m for m in self.members if m.process is not None and m.process.poll() is None]

    def add_learner(self, etcdctl: Etcdctl, name: str, peer_url: str) -> Member:
        """`member add --learner`, retried while etcd says "not now" (ClusterUnhealthy: a seed that
        has just started is not yet counted as connected to its peers), as the operator retries it."""
        added: Member = wait_for(
            lambda: _retrying(ClusterUnhealthy, lambda: etcdctl.member_add(name, [peer_url], learner=True)),
            timeout=30, what=f"member add {name}", interval=0.2, describe=self.describe,
        )
        return added

    def join(self, name: str, *, binary: str | None = None) -> tuple[EtcdMember, dict[str, float]]:
        """Learner add + start + promote, the way the operator adds a member (retrying while etcd
        says "not now"). Returns the member and how long each step waited on etcd."""
        member = self.new_member(name, binary=binary)
        etcdctl = self.etcdctl(*[m for m in self.running() if m is not member])
        timings: dict[str, float] = {}
        started_adding = time.monotonic()
        added = self.add_learner(etcdctl, name, member.peer_url)
        timings[f"add {name}"] = time.monotonic() - started_adding
        self.start_added_member(member, etcdctl.member_list())
        started_promoting = time.monotonic()
        wait_for(
            lambda: _retrying(LearnerNotReady, lambda: etcdctl.member_promote(added.id) or True),
            timeout=30, what=f"promote {name}", interval=0.2, describe=self.describe,
        )
        timings[f"promote {name}"] = time.monotonic() - started_promoting
        self.wait_healthy(member)
        return member, timings

    def grow(self, size: int) -> tuple[list[EtcdMember], dict[str, float]]:
        """Seed, then join members until `size` voting members."""
        timings: dict[str, float] = {}
        self.start_seed()
        while len(self.members) < size:
            _, step = self.join(f"m{len(self.members) + 1}")
            timings.update(step)
        return self.members, timings

    def remove(self, member: EtcdMember) -> None:
        """Remove `member` through the others (leadership moved off it first), then stop it."""
        others = [m for m in self.running() if m is not member]
        etcdctl = self.etcdctl(*others)
        [entry] = [m for m in etcdctl.member_list() if m.name == member.name]
        leader = next((s for s in self.etcdctl(*self.running()).endpoint_status() if s.is_leader), None)
        if leader is not None and leader.member_id == entry.id:
            target = next(m for m in etcdctl.member_list() if m.id != entry.id and not m.is_learner)
            self.etcdctl(*self.running()).move_leader(target.id)
        wait_for(
            lambda: _retrying(ClusterUnhealthy, lambda: etcdctl.member_remove(entry.id) or True),
            timeout=30, what=f"member remove {member.name}", interval=0.2, describe=self.describe,
        )
        member.stop()

    def stop(self) -> None:
        for member in self.members:
            member.stop()


def _retrying(expected: type[Exception], action: Callable[[], T]) -> T | None:
    try:
        return action()
    except expected:
        return None


def cluster_version_decided(url: str) -> bool:
    """The member's /version names a cluster version: etcd has made its last start-up write (the
    leader proposes the cluster version some time after it starts serving; "not_decided" before)."""
    with urllib.request.urlopen(url + "/version", timeout=5) as response:
        version = json.loads(response.read()).get("etcdcluster")
    return bool(version) and version != "not_decided"


def post_json(url: str, path: str, body: dict[str, object]) -> dict[str, object]:
    """POST `body` to a member's gRPC gateway (`url` + `path`); its JSON answer."""
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        document: dict[str, object] = json.loads(response.read())
        return document
