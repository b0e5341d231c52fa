"""The process kubelet's cgroup layout, container limits, the joining wrapper and the partition rules."""
from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from kube_sandbox.kubelet.cgroups import (
    CgroupLayout,
    PodCgroups,
    container_limits,
    detect_layout,
    join_argv,
)
from kube_sandbox.kubelet.partitions import CUT_CHAIN, MARK_CHAIN, PartitionError, Partitions, PodAddress

HYBRID_MOUNTS = """\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/blkio cgroup rw,relatime,blkio 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""


def test_the_hybrid_layout_is_found_from_the_mounts() -> None:
    layout = detect_layout(HYBRID_MOUNTS, writable=True)
    assert layout == CgroupLayout(unified=Path("/sys/fs/cgroup/unified"), memory=Path("/sys/fs/cgroup/memory"),
                                  cpu=Path("/sys/fs/cgroup/cpu"), blkio=Path("/sys/fs/cgroup/blkio"))


@pytest.mark.parametrize("mounts, writable", [
    (HYBRID_MOUNTS, False),  # not root
    (HYBRID_MOUNTS.replace("cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n", ""), True),  # v1 only
    ("cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n", True),  # pure v2: not this kubelet's layout
    (HYBRID_MOUNTS.replace(",blkio", ",pids"), True),
])
def test_without_the_hybrid_layout_pods_run_without_cgroups(mounts: str, writable: bool) -> None:
    assert detect_layout(mounts, writable=writable) is None


def test_container_limits_as_the_kubelet_writes_them() -> None:
    limits = container_limits({"resources": {"limits": {"memory": "64Mi", "cpu": "250m"},
                                             "requests": {"cpu": "100m"}}})
    assert (limits.memory_bytes, limits.cpu_quota_microseconds, limits.cpu_shares) == (64 << 20, 25_000, 103)
    only_limit = container_limits({"resources": {"limits": {"cpu": "2"}}})  # the request defaults to the limit
    assert (only_limit.memory_bytes, only_limit.cpu_quota_microseconds, only_limit.cpu_shares) == (None, 200_000, 2048)
    nothing = container_limits({})
    assert (nothing.memory_bytes, nothing.cpu_quota_microseconds, nothing.cpu_shares) == (None, None, None)


def test_the_wrapper_joins_every_group_before_the_command_runs(tmp_path: Path) -> None:
    procs = [tmp_path / "a b" / "cgroup.procs", tmp_path / "c" / "cgroup.procs"]
    for path in procs:
        path.parent.mkdir()
    argv = join_argv(procs, ["sh", "-c", 'echo "$$ $0 $1"', "name", "it's"])
    result = subprocess.run(argv, capture_output=True, text=True, check=True)
    pid, *rest = result.stdout.split()
    assert rest == ["name", "it's"]
    assert [path.read_text().strip() for path in procs] == [pid, pid], "the command ran as the process that joined"


def test_pod_groups_get_the_limits_and_count_oom_kills(tmp_path: Path) -> None:
    layout = CgroupLayout(*(tmp_path / name for name in ("unified", "memory", "cpu", "blkio")))
    pod = PodCgroups(layout, "u1")
    procs = pod.prepare("main", container_limits({"resources": {"limits": {"memory": "1Gi"}}}))
    assert procs == [tmp_path / "unified/kube-sandbox/podu1/cgroup.procs", tmp_path / "blkio/kube-sandbox/podu1/cgroup.procs",
                     tmp_path / "memory/kube-sandbox/podu1/main/cgroup.procs", tmp_path / "cpu/kube-sandbox/podu1/main/cgroup.procs"]
    assert (tmp_path / "memory/kube-sandbox/podu1/main/memory.limit_in_bytes").read_text() == str(1 << 30)
    assert (tmp_path / "cpu/kube-sandbox/podu1/main/cpu.cfs_quota_us").read_text() == "-1"
    assert pod.net_path == "/kube-sandbox/podu1"
    (tmp_path / "memory/kube-sandbox/podu1/main/memory.oom_control").write_text(
        "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    assert pod.oom_kills("main") == 3
    assert pod.oom_kills("other") == 0


class RecordingRunner:
    """Records commands; `ss` listings answer from `connections`."""

    def __init__(self, connections: str = "") -> None:
        self.commands: list[list[str]] = []
        self.connections = connections
        self.rules: list[str] = []

    def __call__(self, argv: Sequence[str]) -> str:
        self.commands.append(list(argv))
        if list(argv[:3]) == ["iptables", "-w", "-S"]:
            return "\n".join([f"-N {CUT_CHAIN}", *self.rules]) + "\n"
        if argv[0] == "ss" and "-K" not in argv:
            return self.connections
        return ""


A = PodAddress("ns", "a", "uid-a", "127.1.0.10", "/kube-sandbox/poduid-a")
B = PodAddress("ns", "b", "uid-b", "127.1.0.11", "/kube-sandbox/poduid-b")


def test_a_one_way_cut_drops_what_a_sends_to_b_on_both_kinds_of_connection() -> None:
    runner = RecordingRunner(connections="0 0 127.0.0.1:40000 127.1.0.11:2380\n")
    cut = Partitions(run=runner).cut([A], [B], both_ways=False)
    iptables = [c for c in runner.commands if c[0] == "iptables"]
    assert iptables == [
        # b's new connections are marked 1, from b's group
        ["iptables", "-w", "-t", "mangle", "-A", MARK_CHAIN, "-m", "cgroup", "--path", B.cgroup, "-m", "conntrack",
         "--ctstate", "NEW", "-m", "comment", "--comment", "mark-uid-b", "-j", "CONNMARK", "--set-mark", "1"],
        # what a sends to b's address, and on b's connections to a
        ["iptables", "-w", "-A", CUT_CHAIN, "-m", "cgroup", "--path", A.cgroup, "-d", "127.1.0.11/32",
         "-m", "comment", "--comment", cut, "-j", "DROP"],
        ["iptables", "-w", "-A", CUT_CHAIN, "-m", "cgroup", "--path", A.cgroup, "-m", "connmark", "--mark", "1",
         "-m", "comment", "--comment", cut, "-j", "DROP"],
    ]
    kills = [c for c in runner.commands if c[:2] == ["ss", "-K"]]
    # a's connections to b on both ends, and b's connections to a (they carry no mark yet)
    assert ["ss", "-K", "-tnH", "cgroup", B.cgroup, "dst", "127.0.0.1", "dport", "=", ":40000"] in kills
    assert ["ss", "-K", "-tnH", "cgroup", A.cgroup, "dst", B.ip] in kills
    assert ["ss", "-K", "-tnH", "cgroup", B.cgroup, "dst", A.ip] in kills


def test_both_ways_adds_the_mirror_rules_and_heal_removes_only_its_cut() -> None:
    runner = RecordingRunner()
    partitions = Partitions(run=runner)
    cut = partitions.cut([A], [B], both_ways=True)
    drops = [c for c in runner.commands if c[:4] == ["iptables", "-w", "-A", CUT_CHAIN]]
    assert {c[c.index("--path") + 1] for c in drops} == {A.cgroup, B.cgroup}
    assert len(drops) == 4
    runner.rules = [f"-A {CUT_CHAIN} -d 127.1.0.11/32 -m cgroup --path \"x\" -m comment --comment {cut} -j DROP",
                    f"-A {CUT_CHAIN} -m cgroup --path \"y\" -m comment --comment cut-99 -j DROP",
                    f"-A {CUT_CHAIN} -m cgroup --path \"x\" -m connmark --mark 0x1 -m comment --comment {cut} -j DROP"]
    assert partitions.heal(cut) == [cut]
    deletes = [c for c in runner.commands if c[:3] == ["iptables", "-w", "-D"]]
    assert deletes == [["iptables", "-w", "-D", CUT_CHAIN, "3"], ["iptables", "-w", "-D", CUT_CHAIN, "1"]]
    assert partitions.in_force() == {}
    with pytest.raises(PartitionError, match="no cut"):
        partitions.heal(cut)


def test_a_cut_needs_two_distinct_pods() -> None:
    with pytest.raises(PartitionError, match="no pair"):
        Partitions(run=RecordingRunner()).cut([A], [A], both_ways=True)
