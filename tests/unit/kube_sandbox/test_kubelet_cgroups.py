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
from kube_sandbox.kubelet.partitions import PartitionError, Partitions, PodAddress

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
                                  cpu=Path("/sys/fs/cgroup/cpu"), blkio=Path("/sys/fs/cgroup/blkio"),
                                  others=(Path("/sys/fs/cgroup/cpuacct"),))


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

    def __call__(self, argv: Sequence[str]) -> str:
        self.commands.append(list(argv))
        if argv[0] == "ss" and "-K" not in argv:
            return self.connections
        return ""

    def iptables(self, operation: str) -> list[list[str]]:
        return [c for c in self.commands if c[0] == "iptables" and operation in c]


CUT_CHAIN, MARK_CHAIN = "KUBE-SANDBOX-CUTS", "KUBE-SANDBOX-MARKS"  # the default name
A = PodAddress("ns", "a", "uid-a", "127.1.0.10", "/kube-sandbox/poduid-a")
B = PodAddress("ns", "b", "uid-b", "127.1.0.11", "/kube-sandbox/poduid-b")
C = PodAddress("ns", "c", "uid-c", "127.1.0.12", "/kube-sandbox/poduid-c")


def test_a_one_way_cut_drops_what_a_sends_to_b_on_both_kinds_of_connection() -> None:
    runner = RecordingRunner(connections="0 0 127.0.0.1:40000 127.1.0.11:2380\n")
    cut = Partitions(run=runner).cut([A], [B], both_ways=False)
    assert runner.iptables("-A") == [
        # b's new connections are marked 1, from b's group
        ["iptables", "-w", "-t", "mangle", "-A", MARK_CHAIN, "-m", "cgroup", "--path", B.cgroup, "-m", "conntrack",
         "--ctstate", "NEW", "-m", "comment", "--comment", "mark-uid-b", "-j", "CONNMARK", "--set-mark", "1"],
        # what a sends to b's address, and on b's connections to a
        ["iptables", "-w", "-t", "filter", "-A", CUT_CHAIN, "-m", "cgroup", "--path", A.cgroup, "-d", "127.1.0.11/32",
         "-m", "comment", "--comment", cut, "-j", "DROP"],
        ["iptables", "-w", "-t", "filter", "-A", CUT_CHAIN, "-m", "cgroup", "--path", A.cgroup, "-m", "connmark",
         "--mark", "1", "-m", "comment", "--comment", cut, "-j", "DROP"],
    ]
    kills = [c for c in runner.commands if c[:2] == ["ss", "-K"]]
    # a's connections to b on both ends, and b's connections to a (they carry no mark yet)
    assert ["ss", "-K", "-tnH", "cgroup", B.cgroup, "dst", "127.0.0.1", "dport", "=", ":40000"] in kills
    assert ["ss", "-K", "-tnH", "cgroup", A.cgroup, "dst", B.ip] in kills
    assert ["ss", "-K", "-tnH", "cgroup", B.cgroup, "dst", A.ip] in kills


def test_heal_deletes_exactly_its_cuts_rules_by_their_own_spec() -> None:
    runner = RecordingRunner()
    partitions = Partitions(run=runner)
    first = partitions.cut([A], [B], both_ways=True)
    second = partitions.cut([A], [C], both_ways=False)
    drops = [c for c in runner.iptables("-A") if CUT_CHAIN in c]
    assert len(drops) == 6 and {c[c.index("--path") + 1] for c in drops} == {A.cgroup, B.cgroup}
    assert partitions.heal(first) == [first]
    deleted = runner.iptables("-D")
    # each rule of the first cut deleted with the spec it was added with; the second cut's kept
    assert sorted(c[5:] for c in deleted) == sorted(c[5:] for c in drops if first in c)
    assert not any("-S" in c or "-L" in c for c in runner.commands), "chains are never listed"
    assert partitions.in_force() == {second: ["ns/a -> ns/c"]}
    with pytest.raises(PartitionError, match="no cut"):
        partitions.heal(first)


def test_a_pods_rules_go_before_its_cgroups_do() -> None:
    runner = RecordingRunner()
    partitions = Partitions(run=runner)
    cut = partitions.cut([A], [B, C], both_ways=False)
    partitions.forget_pod(B.uid)

    def names_b(rule: list[str]) -> bool:  # b's cgroup, b's address, or b's connection mark (1)
        return B.cgroup in rule or f"{B.ip}/32" in rule or (
            "--mark" in rule and rule[rule.index("--mark") + 1] == "1")
    added = runner.iptables("-A")
    deleted = runner.iptables("-D")
    assert sorted(c[5:] for c in deleted) == sorted(c[5:] for c in added if names_b(c))
    assert any(MARK_CHAIN in c for c in deleted), "b's mark rule goes too"
    remaining = [c for c in added if c[5:] not in [d[5:] for d in deleted]]
    assert remaining and not any(names_b(c) for c in remaining)
    assert partitions.heal(cut) == [cut]


def test_a_cut_needs_two_distinct_pods() -> None:
    with pytest.raises(PartitionError, match="no pair"):
        Partitions(run=RecordingRunner()).cut([A], [A], both_ways=True)
