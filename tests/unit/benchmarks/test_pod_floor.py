"""The pod floor runs the raw floor's own etcd command line in a bare pod: only the binary's path
changes (to the image's, which the sandbox maps to the same local binary)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks import floor
from benchmarks.pod_floor import FLOOR_POD_LABEL, IMAGE_BIN, floor_pod, pod_launcher


class RecordingCore:
    def __init__(self) -> None:
        self.created: list[tuple[str, dict[str, Any]]] = []

    def create_namespaced_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.created.append((namespace, body))
        return body


def test_a_floor_member_pod_runs_the_same_command_on_the_host_network() -> None:
    argv = ["/home/u/.cache/etcd-v3.6.16/etcd", "--name=m3", "--listen-client-urls=http://127.0.70.4:2379"]
    pod = floor_pod("floor-ab12-m3", argv, "3.6.16")
    [container] = pod["spec"]["containers"]
    assert container["image"] == "quay.io/coreos/etcd:v3.6.16"
    assert container["command"] == [IMAGE_BIN, *argv[1:]]
    assert pod["spec"]["hostNetwork"] is True and pod["spec"]["restartPolicy"] == "Never"
    assert pod["metadata"]["labels"] == {"app": FLOOR_POD_LABEL}  # not app=etcd: not counted as a member


def test_the_raw_floor_starts_its_members_through_the_launcher_it_is_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(floor, "_accepts_connections", lambda url: False)  # no network in unit tests
    monkeypatch.setattr(floor.RawCluster, "_bin", lambda self, name: f"/cache/etcd-v3.6.16/{name}")
    core = RecordingCore()
    cluster = floor.RawCluster(version="3.6.16", workdir=tmp_path,
                               launch=pod_launcher(core, "bench-scale-x", "3.6.16"))  # type: ignore[arg-type]
    cluster._start(cluster._new_index(), "new", {})
    [(namespace, body)] = core.created
    assert namespace == "bench-scale-x" and body["metadata"]["name"].endswith("-m0")
    command = body["spec"]["containers"][0]["command"]
    assert command[0] == IMAGE_BIN and "--initial-cluster-state=new" in command
