"""The floor for bring-up: raw etcdctl seed + sequential learner adds against plain local etcd processes.

This is the fastest any operator could bring up a cluster with one membership change at a time,
on this machine, today: no Kubernetes, no pods, just etcd and etcdctl on loopback addresses.
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kube_sandbox import binaries

POLL_SECONDS = 0.05
STEP_TIMEOUT_SECONDS = 60.0
FLOOR_IP_PREFIX = "127.0.70."  # loopback addresses nothing else in the project uses


@dataclass
class RawCluster:
    """Plain etcd processes on 127.0.70.x, grown one member at a time the way the operator does."""

    version: str = "3.5.1"
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="etcd-floor-")))
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    members: list[str] = field(default_factory=list)

    def _bin(self, name: str) -> str:
        return str(binaries.etcd_binaries()[self.version] / name)

    def _peer(self, index: int) -> str:
        return f"http://{FLOOR_IP_PREFIX}{index + 1}:2380"

    def _client(self, index: int) -> str:
        return f"http://{FLOOR_IP_PREFIX}{index + 1}:2379"

    def _etcdctl(self, *args: str, output: str = "json") -> subprocess.CompletedProcess[str]:
        return subprocess.run([self._bin("etcdctl"), f"--endpoints={self._client(0)}", "--dial-timeout=2s",
                               "--command-timeout=5s", "-w", output, *args], capture_output=True, text=True)

    def _start(self, index: int, state: str) -> None:
        name = f"m{index}"
        self.members.append(f"{name}={self._peer(index)}")
        argv = [self._bin("etcd"), f"--name={name}", f"--data-dir={self.workdir / name}",
                f"--listen-client-urls={self._client(index)}", f"--advertise-client-urls={self._client(index)}",
                f"--listen-peer-urls={self._peer(index)}", f"--initial-advertise-peer-urls={self._peer(index)}",
                f"--initial-cluster={','.join(self.members)}", f"--initial-cluster-state={state}",
                "--initial-cluster-token=floor"]
        with open(self.workdir / f"{name}.log", "wb") as out:
            self.processes.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT))

    def _until(self, what: str, attempt: "callable[[], bool]") -> None:  # type: ignore[valid-type]
        deadline = time.monotonic() + STEP_TIMEOUT_SECONDS
        while not attempt():
            if time.monotonic() > deadline:
                raise TimeoutError(f"floor cluster: {what} did not happen in {STEP_TIMEOUT_SECONDS}s")
            time.sleep(POLL_SECONDS)

    def bring_up(self, size: int) -> float:
        started = time.monotonic()
        self._start(0, "new")
        self._until("seed healthy", lambda: self._etcdctl("endpoint", "health").returncode == 0)
        for index in range(1, size):
            self.add_member(index)
        return time.monotonic() - started

    def add_member(self, index: int) -> None:
        added: dict[str, int] = {}

        def add() -> bool:
            result = self._etcdctl("member", "add", f"m{index}", f"--peer-urls={self._peer(index)}", "--learner")
            if result.returncode == 0:
                import json

                added["id"] = json.loads(result.stdout)["member"]["ID"]
            return result.returncode == 0

        self._until(f"member add m{index}", add)
        self._start(index, "existing")
        self._until(f"promote m{index}", lambda: self._promote(added["id"]))

    def _promote(self, member_id: int) -> bool:
        # etcdctl 3.5.1 panics printing `member promote -w json` after a successful promote.
        return self._etcdctl("member", "promote", f"{member_id:x}", output="simple").returncode == 0

    def stop(self) -> None:
        for process in self.processes:
            process.kill()
            process.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)


def measure_bring_up(size: int, version: str = "3.5.1") -> float:
    cluster = RawCluster(version=version)
    try:
        return cluster.bring_up(size)
    finally:
        cluster.stop()


if __name__ == "__main__":
    for n in (1, 3, 5):
        print(n, round(measure_bring_up(n), 2))
