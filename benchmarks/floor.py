"""The floors: the same membership changes the operator makes, done with raw etcdctl against plain
local etcd processes (no Kubernetes, no pods), one change at a time, on loopback addresses, until
the same end state the operator's figures wait for: every member serving clients.

This is the fastest any operator could do them on this machine, today, with these binaries.
Every `measure_*` function starts a fresh cluster on 127.0.70.x and stops it before returning.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from etcd_common.etcd.probe import EtcdProbe
from etcd_common.etcd.tcp_probe import accepting_connections
from kube_sandbox import binaries

POLL_SECONDS = 0.05
STEP_TIMEOUT_SECONDS = 60.0
EXIT_TIMEOUT_SECONDS = 30.0
CONNECT_TIMEOUT_SECONDS = 0.5
SERVING_CHECK_TIMEOUT_SECONDS = 0.5
FLOOR_IP_PREFIX = "127.0.70."  # loopback addresses nothing else in the project uses
# etcd refuses membership changes ("unhealthy cluster") until every voting member has been
# connected for its HealthInterval (5 s). A cluster that has run this long since its last change
# is "settled": what a user's long-running cluster looks like when they scale it or lose a pod.
SETTLED_AFTER_SECONDS = 5.0


def wait_settled_since(changed_at: float) -> None:
    """Let a cluster run SETTLED_AFTER_SECONDS past its last change at `changed_at` (monotonic)."""
    remaining = changed_at + SETTLED_AFTER_SECONDS - time.monotonic()
    if remaining > 0:
        time.sleep(remaining)  # ageing the cluster is part of the scenario, not synchronisation


class MemberProcess(Protocol):
    """What the floor needs of a running member: a local process (subprocess.Popen), or a pod
    running it (benchmarks.pod_floor)."""

    def terminate(self) -> None: ...

    def kill(self) -> None: ...

    def wait(self, timeout: float | None = None) -> int | None: ...


# (member name, etcd command line, log file) -> the running member.
Launcher = Callable[[str, list[str], Path], MemberProcess]


def start_local_process(name: str, argv: list[str], log_path: Path) -> MemberProcess:
    """The floors' usual member: a plain etcd process started right here."""
    with open(log_path, "ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)


@dataclass
class RawMember:
    index: int
    process: MemberProcess
    member_id: int | None = None

    @property
    def name(self) -> str:
        return f"m{self.index}"


@dataclass
class RawCluster:
    """Plain etcd processes on 127.0.70.x, changed one member at a time the way the operator does."""

    version: str = field(default_factory=binaries.newest_etcd_version)
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="etcd-floor-")))
    members: dict[int, RawMember] = field(default_factory=dict)  # running members by index
    changed_at: float = 0.0  # time.monotonic() when the last membership change completed
    launch: Launcher = start_local_process  # how a member's etcd is started
    etcd_flags: tuple[str, ...] = ()  # added to every member's command line (e.g. a backend quota)
    _next_index: int = 0
    _last_error: str = ""

    # --- the changes, each returning the seconds it took

    def bring_up(self, size: int) -> float:
        """Seed member (state new), then `size - 1` learner adds + promotes."""
        started = time.monotonic()
        seed = self._start(self._new_index(), "new", {})
        # etcdctl dialling a port nobody listens on yet backs off for ~1 s: wait for the listener first.
        self._until("seed listening", lambda: _accepts_connections(self._client(seed.index)))
        self._until("seed healthy", lambda: self._etcdctl("endpoint", "health").returncode == 0)
        seed.member_id = self._member_ids()[seed.name]
        for _ in range(1, size):
            self._add_one()
        self._until_all_serve()
        self.changed_at = time.monotonic()
        return self.changed_at - started

    def add_members(self, count: int) -> float:
        """Add `count` members to the running cluster, one learner add + start + promote at a time."""
        started = time.monotonic()
        for _ in range(count):
            self._add_one()
        self._until_all_serve()
        self.changed_at = time.monotonic()
        return self.changed_at - started

    def remove_members(self, count: int) -> float:
        """`member remove` `count` non-leader members (newest first, one change at a time), then stop
        their processes together (SIGTERM, as a graceful pod deletion does) and wait until they exited."""
        started = time.monotonic()
        removed: list[RawMember] = []
        for _ in range(count):
            member = self._newest_follower()
            self._remove(member)
            removed.append(self.members.pop(member.index))
        for member in removed:
            member.process.terminate()
        for member in removed:
            member.process.wait(EXIT_TIMEOUT_SECONDS)
        self.changed_at = time.monotonic()
        return self.changed_at - started

    def replace_member(self) -> float:
        """A follower is stopped (SIGTERM, as a pod deletion does); remove it, add a learner in its
        place, start it, promote it. Done when the replacement votes and the old process has exited
        (the operator's figure likewise waits until the deleted pod is gone)."""
        member = self._newest_follower()
        started = time.monotonic()
        member.process.terminate()
        del self.members[member.index]
        self._remove(member)
        self._add_one()
        self._until_all_serve()
        member.process.wait(EXIT_TIMEOUT_SECONDS)
        self.changed_at = time.monotonic()
        return self.changed_at - started

    def wait_settled(self) -> None:
        wait_settled_since(self.changed_at)

    def client_urls(self) -> list[str]:
        """The running members' client URLs, in the order they were added."""
        return [self._client(i) for i in sorted(self.members)]

    def stop(self) -> None:
        for member in self.members.values():
            member.process.kill()
            member.process.wait()
        self.members.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)

    # --- etcd processes

    def _new_index(self) -> int:
        index, self._next_index = self._next_index, self._next_index + 1
        return index

    @staticmethod
    def _peer(index: int) -> str:
        return f"http://{FLOOR_IP_PREFIX}{index + 1}:2380"

    @staticmethod
    def _client(index: int) -> str:
        return f"http://{FLOOR_IP_PREFIX}{index + 1}:2379"

    def _bin(self, name: str) -> str:
        return str(binaries.etcd_binaries()[self.version] / name)

    def _start(self, index: int, state: str, existing: dict[int, RawMember]) -> RawMember:
        name = f"m{index}"
        if _accepts_connections(self._client(index)):  # a stray etcd there would answer for ours
            raise RuntimeError(f"floor cluster: {self._client(index)} is already in use by another process")
        initial = [f"m{i}={self._peer(i)}" for i in sorted(existing)] + [f"{name}={self._peer(index)}"]
        argv = [self._bin("etcd"), f"--name={name}", f"--data-dir={self.workdir / name}",
                f"--listen-client-urls={self._client(index)}", f"--advertise-client-urls={self._client(index)}",
                f"--listen-peer-urls={self._peer(index)}", f"--initial-advertise-peer-urls={self._peer(index)}",
                f"--initial-cluster={','.join(initial)}", f"--initial-cluster-state={state}",
                "--initial-cluster-token=floor", *self.etcd_flags]
        member = RawMember(index, self.launch(name, argv, self.workdir / f"{name}.log"))
        self.members[index] = member
        return member

    # --- membership through etcdctl

    def _etcdctl(self, *args: str, output: str = "json") -> subprocess.CompletedProcess[str]:
        endpoints = ",".join(self._client(i) for i in sorted(self.members))
        result = subprocess.run([self._bin("etcdctl"), f"--endpoints={endpoints}", "--dial-timeout=2s",
                                 "--command-timeout=5s", "-w", output, *args], capture_output=True, text=True)
        if result.returncode != 0:
            self._last_error = f"etcdctl {' '.join(args)}: {result.stderr.strip()[-300:]}"
        return result

    def _until(self, what: str, attempt: Callable[[], bool]) -> None:
        deadline = time.monotonic() + STEP_TIMEOUT_SECONDS
        while not attempt():
            if time.monotonic() > deadline:
                raise TimeoutError(f"floor cluster: {what} did not happen in {STEP_TIMEOUT_SECONDS}s; "
                                   f"last error: {self._last_error}")
            time.sleep(POLL_SECONDS)  # polling a condition with a deadline

    def _add_one(self) -> RawMember:
        index = self._new_index()
        added: dict[str, int] = {}

        def add() -> bool:
            result = self._etcdctl("member", "add", f"m{index}", f"--peer-urls={self._peer(index)}", "--learner")
            if result.returncode == 0:
                added["id"] = json.loads(result.stdout)["member"]["ID"]
            return result.returncode == 0

        self._until(f"member add m{index}", add)
        member = self._start(index, "existing", dict(self.members))
        member.member_id = added["id"]
        # etcdctl 3.5.1 panics printing `member promote -w json` after a successful promote.
        self._until(f"promote m{index}",
                    lambda: self._etcdctl("member", "promote", f"{added['id']:x}", output="simple").returncode == 0)
        return member

    def _until_all_serve(self) -> None:
        """Every member answers a health check (a linearizable read): the end state the operator's
        figures wait for (status Running with readyCount == size counts healthy members only). A
        new etcd 3.6 member serves clients only once it has published its attributes, which a
        snapshot arriving at its start can delay by etcd's 7 s request timeout; etcd lets the next
        learner be added and promoted meanwhile, so this is checked once, after the last step."""
        probe = EtcdProbe([self._client(i) for i in sorted(self.members)],
                          timeout_seconds=SERVING_CHECK_TIMEOUT_SECONDS)
        self._until("every member serving clients", lambda: all(h.healthy for h in probe.endpoint_health()))

    def _remove(self, member: RawMember) -> None:
        assert member.member_id is not None

        def remove() -> bool:
            result = self._etcdctl("member", "remove", f"{member.member_id:x}", output="simple")
            # An answer lost while the removed member shuts down leaves a retry that finds it gone.
            return result.returncode == 0 or "member not found" in result.stderr

        self._until(f"member remove {member.name}", remove)

    def _member_ids(self) -> dict[str, int]:
        result = self._etcdctl("member", "list")
        if result.returncode != 0:
            raise RuntimeError(f"floor cluster: member list failed: {result.stderr.strip()}")
        members: list[dict[str, Any]] = json.loads(result.stdout).get("members", [])
        return {m["name"]: int(m["ID"]) for m in members if m.get("name")}

    def _leader_id(self) -> int:
        result = self._etcdctl("endpoint", "status")
        if result.returncode != 0:
            raise RuntimeError(f"floor cluster: endpoint status failed: {result.stderr.strip()}")
        statuses: list[dict[str, Any]] = json.loads(result.stdout)
        return int(statuses[0]["Status"]["leader"])

    def _newest_follower(self) -> RawMember:
        leader = self._leader_id()
        followers = [m for m in self.members.values() if m.member_id != leader]
        return max(followers, key=lambda m: m.index)


def _accepts_connections(url: str) -> bool:
    return url in accepting_connections([url], CONNECT_TIMEOUT_SECONDS)


def _measured(change: Callable[[RawCluster], float], setup: Callable[[RawCluster], None],
              version: str | None, launch: Launcher = start_local_process) -> float:
    cluster = RawCluster(version=version or binaries.newest_etcd_version(), launch=launch)
    try:
        setup(cluster)
        return change(cluster)
    finally:
        cluster.stop()


def measure_bring_up(size: int, version: str | None = None) -> float:
    """Seconds from starting the seed to `size` voting members."""
    return _measured(lambda c: c.bring_up(size), lambda c: None, version)


def measure_scale(from_size: int, to_size: int, version: str | None = None,
                  launch: Launcher = start_local_process) -> float:
    """Seconds to grow or shrink a settled `from_size` cluster to `to_size` members (each member
    started by `launch`: a local process, or a pod as in benchmarks.pod_floor)."""
    def setup(cluster: RawCluster) -> None:
        cluster.bring_up(from_size)
        cluster.wait_settled()

    def change(cluster: RawCluster) -> float:
        if to_size >= from_size:
            return cluster.add_members(to_size - from_size)
        return cluster.remove_members(from_size - to_size)

    return _measured(change, setup, version, launch)


def measure_scale_round_trip(small: int, large: int, version: str | None = None) -> tuple[float, float]:
    """(seconds to grow a settled `small` cluster to `large`, seconds to shrink it back once settled):
    the same cluster both ways, as the operator's figure does it."""
    cluster = RawCluster(version=version or binaries.newest_etcd_version())
    try:
        cluster.bring_up(small)
        cluster.wait_settled()
        grow = cluster.add_members(large - small)
        cluster.wait_settled()
        return grow, cluster.remove_members(large - small)
    finally:
        cluster.stop()


def measure_replace_member(size: int = 3, version: str | None = None) -> float:
    """Seconds from a follower's death to its replacement promoted, in a settled `size` cluster."""
    def setup(cluster: RawCluster) -> None:
        cluster.bring_up(size)
        cluster.wait_settled()

    return _measured(lambda c: c.replace_member(), setup, version)


if __name__ == "__main__":
    for n in (1, 3, 5):
        print(f"bring-up {n}: {measure_bring_up(n):.2f}s")
    grow, shrink = measure_scale_round_trip(3, 5)
    print(f"scale 3->5: {grow:.2f}s, 5->3: {shrink:.2f}s")
    print(f"replace member of 3: {measure_replace_member(3):.2f}s")
