"""Network partitions between pods: the sandbox's partition fault.

Pods share the host's loopback network, so a partition is made where their packets can still be
told apart: by the v2 cgroup of the socket that sends them (`iptables -m cgroup --path`, each pod
has its own group, see cgroups.py). "A cut from B" drops every packet a process of A sends that
is meant for B:

* on connections A opened to B's address: `-m cgroup --path A -d <B's IP> -j DROP`;
* on connections B opened to A (A's replies go to 127.0.0.1, where B's connections come from):
  B's new connections are marked with B's number (`CONNMARK` in the mangle table, from B's group)
  and A's packets on connections carrying that mark are dropped.

Both ways is the same rule pair the other way round. Established connections between the two
are then destroyed on both ends (`ss -K`), as a partition ends them in a real network once their
packets stop; the programs see a reset connection and can only reconnect into the cut.

The rules live in two chains of our own, jumped to from OUTPUT, and each carries its cut's id as
a comment, so `heal` removes exactly that cut; they are all removed when the kubelet starts and
stops. Only pods are cut: the kubelet's probes and the tests' own clients keep reaching every
pod, as the kubelet's view does in a real partition.
"""
from __future__ import annotations

import logging
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)

CUT_CHAIN = "KUBE-SANDBOX-CUTS"  # filter table: the drops
MARK_CHAIN = "KUBE-SANDBOX-MARKS"  # mangle table: who opened a connection
CUT_PREFIX = "cut-"

Runner = Callable[[Sequence[str]], str]


def run_command(argv: Sequence[str]) -> str:
    """Run `argv`; its stdout, or PartitionError with its stderr."""
    result = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise PartitionError(f"{' '.join(argv)}: exit {result.returncode}: {result.stderr.strip()}")
    return result.stdout


class PartitionError(RuntimeError):
    pass


@dataclass(frozen=True)
class PodAddress:
    """What a partition needs of a running pod: its address and its v2 cgroup."""

    namespace: str
    name: str
    uid: str
    ip: str
    cgroup: str  # e.g. /kube-sandbox/pod<uid>

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class Partitions:
    """The partitions in force; thread-safe."""

    def __init__(self, run: Runner = run_command) -> None:
        self._run = run
        self._lock = threading.Lock()
        self._cuts: dict[str, list[str]] = {}  # cut id -> description
        self._marks: dict[str, int] = {}  # pod uid -> the mark of the connections it opens
        self._next_cut = 1

    # ----------------------------------------------------------------- chains

    def reset(self) -> None:
        """Remove every rule of ours (left by an earlier kubelet too) and start with empty chains."""
        with self._lock:
            self._remove_chains()
            self._run(["iptables", "-w", "-N", CUT_CHAIN])
            self._run(["iptables", "-w", "-I", "OUTPUT", "-j", CUT_CHAIN])
            self._run(["iptables", "-w", "-t", "mangle", "-N", MARK_CHAIN])
            self._run(["iptables", "-w", "-t", "mangle", "-I", "OUTPUT", "-j", MARK_CHAIN])
            self._cuts.clear()
            self._marks.clear()

    def remove(self) -> None:
        with self._lock:
            self._remove_chains()

    def _remove_chains(self) -> None:
        for table, chain in (("filter", CUT_CHAIN), ("mangle", MARK_CHAIN)):
            for argv in (["-D", "OUTPUT", "-j", chain], ["-F", chain], ["-X", chain]):
                try:
                    self._run(["iptables", "-w", "-t", table, *argv])
                except PartitionError:
                    pass  # not there: nothing to remove

    # ----------------------------------------------------------------- cuts

    def cut(self, sources: Sequence[PodAddress], targets: Sequence[PodAddress], both_ways: bool) -> str:
        """Drop what each source sends to each target (and back when `both_ways`); the cut's id."""
        pairs = [(a, b) for a in sources for b in targets if a.uid != b.uid]
        if both_ways:
            pairs += [(b, a) for a, b in pairs]
        if not pairs:
            raise PartitionError("the cut has no pair of distinct pods")
        with self._lock:
            cut_id = f"{CUT_PREFIX}{self._next_cut}"
            self._next_cut += 1
            for sender, receiver in pairs:
                self._drop(cut_id, sender, receiver)
            self._cuts[cut_id] = [f"{a} -> {b}" for a, b in pairs]
        for sender, receiver in pairs:  # one way too: the other way's connections carry no mark yet
            self._end_connections(sender, receiver)
            self._end_connections(receiver, sender)
        log.warning("fault: %s: %s", cut_id, ", ".join(self._cuts[cut_id]))
        return cut_id

    def _drop(self, cut_id: str, sender: PodAddress, receiver: PodAddress) -> None:
        mark = self._mark_of(receiver)
        comment = ["-m", "comment", "--comment", cut_id]
        self._run(["iptables", "-w", "-A", CUT_CHAIN, "-m", "cgroup", "--path", sender.cgroup,
                   "-d", f"{receiver.ip}/32", *comment, "-j", "DROP"])
        self._run(["iptables", "-w", "-A", CUT_CHAIN, "-m", "cgroup", "--path", sender.cgroup,
                   "-m", "connmark", "--mark", str(mark), *comment, "-j", "DROP"])

    def _mark_of(self, pod: PodAddress) -> int:
        """The mark of connections `pod` opens, set from now on (rule added once per pod)."""
        if pod.uid not in self._marks:
            self._marks[pod.uid] = len(self._marks) + 1
            self._run(["iptables", "-w", "-t", "mangle", "-A", MARK_CHAIN, "-m", "cgroup", "--path", pod.cgroup,
                       "-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment", f"mark-{pod.uid}",
                       "-j", "CONNMARK", "--set-mark", str(self._marks[pod.uid])])
        return self._marks[pod.uid]

    def _end_connections(self, sender: PodAddress, receiver: PodAddress) -> None:
        """Destroy the established connections `sender` opened to `receiver`, on both ends."""
        listing = self._run(["ss", "-tnH", "state", "established", "cgroup", sender.cgroup,
                             "dst", receiver.ip])
        for line in listing.splitlines():
            fields = line.split()
            if len(fields) < 4:
                continue
            local = fields[2]  # with a state filter: Recv-Q Send-Q Local Peer
            host, _, port = local.rpartition(":")
            self._run(["ss", "-K", "-tnH", "cgroup", receiver.cgroup, "dst", host, "dport", "=", f":{port}"])
        self._run(["ss", "-K", "-tnH", "cgroup", sender.cgroup, "dst", receiver.ip])

    def heal(self, cut_id: str | None = None) -> list[str]:
        """Remove one cut (or every cut); the ids removed."""
        with self._lock:
            ids = list(self._cuts) if cut_id is None else [cut_id]
            unknown = [i for i in ids if i not in self._cuts]
            if unknown:
                raise PartitionError(f"no cut {unknown[0]}; the cuts in force are {sorted(self._cuts)}")
            rules = [line.split() for line in self._run(["iptables", "-w", "-S", CUT_CHAIN]).splitlines()
                     if line.startswith(f"-A {CUT_CHAIN} ")]
            for number in reversed(range(1, len(rules) + 1)):  # by number, last first: the others keep theirs
                if _comment(rules[number - 1]) in ids:
                    self._run(["iptables", "-w", "-D", CUT_CHAIN, str(number)])
            for i in ids:
                del self._cuts[i]
        log.warning("fault healed: %s", ", ".join(ids) or "nothing was cut")
        return ids

    def in_force(self) -> dict[str, list[str]]:
        with self._lock:
            return {k: list(v) for k, v in self._cuts.items()}


def _comment(rule_fields: list[str]) -> str:
    """The --comment value of an `iptables -S` rule (unquoted: ours have no spaces)."""
    for index, field in enumerate(rule_fields[:-1]):
        if field == "--comment":
            return rule_fields[index + 1].strip('"')
    return ""
