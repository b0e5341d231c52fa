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

The rules live in two chains of this sandbox's own (`KSB-<instance>-CUTS` and `-MARKS`; see
KubeletSettings.instance), jumped to from OUTPUT; each carries its cut's id as a
comment (for people reading `iptables -S`), `heal` deletes exactly the rules of that cut, and they
are all removed when the kubelet starts and stops. Only pods are cut: the kubelet's probes and the
tests' own clients keep reaching every pod, as the kubelet's view does in a real partition.
"""
from __future__ import annotations

import logging
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)

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


@dataclass(frozen=True)
class Rule:
    """One rule of ours, kept so it can be deleted by its own spec (never by listing the chain)."""

    owner: str  # the cut id, or "mark-<uid>"
    table: str
    chain: str
    spec: tuple[str, ...]
    pods: frozenset[str]  # uids of the pods whose cgroups it names

    def argv(self, operation: str) -> list[str]:
        return ["iptables", "-w", "-t", self.table, operation, self.chain, *self.spec]


class Partitions:
    """The partitions in force; thread-safe.

    A rule naming a cgroup that no longer exists makes iptables-nft refuse to read its chain
    ("incompatible, use 'nft' tool"), which would break every later change: the rules naming a
    pod are deleted before its cgroups are (`forget_pod`), and rules are deleted by their own
    spec, kept here, not found by listing."""

    def __init__(self, run: Runner = run_command, name: str = "KUBE-SANDBOX") -> None:
        self._run = run
        self.cut_chain = f"{name}-CUTS"  # filter table: the drops
        self.mark_chain = f"{name}-MARKS"  # mangle table: who opened a connection
        self._lock = threading.Lock()
        self._cuts: dict[str, list[str]] = {}  # cut id -> description
        self._marks: dict[str, int] = {}  # pod uid -> the mark of the connections it opens
        self._rules: list[Rule] = []
        self._next_cut = 1
        self._next_mark = 1

    # ----------------------------------------------------------------- chains

    def reset(self) -> None:
        """Remove every rule of ours (left by an earlier kubelet too) and start with empty chains."""
        with self._lock:
            self._remove_chains()
            self._run(["iptables", "-w", "-N", self.cut_chain])
            self._run(["iptables", "-w", "-I", "OUTPUT", "-j", self.cut_chain])
            self._run(["iptables", "-w", "-t", "mangle", "-N", self.mark_chain])
            self._run(["iptables", "-w", "-t", "mangle", "-I", "OUTPUT", "-j", self.mark_chain])
            self._cuts.clear()
            self._marks.clear()
            self._rules.clear()

    def remove(self) -> None:
        with self._lock:
            self._remove_chains()

    def _remove_chains(self) -> None:
        for table, chain in (("filter", self.cut_chain), ("mangle", self.mark_chain)):
            for argv in (["-D", "OUTPUT", "-j", chain], ["-F", chain], ["-X", chain]):
                try:
                    self._run(["iptables", "-w", "-t", table, *argv])
                except PartitionError:
                    pass  # not there: nothing to remove

    def _add(self, rule: Rule) -> None:
        self._run(rule.argv("-A"))
        self._rules.append(rule)

    def _delete(self, rules: list[Rule]) -> None:
        for rule in rules:
            self._run(rule.argv("-D"))
            self._rules.remove(rule)

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
        pods = frozenset({sender.uid, receiver.uid})
        comment = ("-m", "comment", "--comment", cut_id)
        self._add(Rule(cut_id, "filter", self.cut_chain, ("-m", "cgroup", "--path", sender.cgroup,
                                                           "-d", f"{receiver.ip}/32", *comment, "-j", "DROP"), pods))
        self._add(Rule(cut_id, "filter", self.cut_chain, ("-m", "cgroup", "--path", sender.cgroup, "-m", "connmark",
                                                           "--mark", str(mark), *comment, "-j", "DROP"), pods))

    def _mark_of(self, pod: PodAddress) -> int:
        """The mark of connections `pod` opens, set from now on (rule added once per pod)."""
        if pod.uid not in self._marks:
            self._marks[pod.uid] = self._next_mark
            self._next_mark += 1
            self._add(Rule(f"mark-{pod.uid}", "mangle", self.mark_chain,
                           ("-m", "cgroup", "--path", pod.cgroup, "-m", "conntrack", "--ctstate", "NEW",
                            "-m", "comment", "--comment", f"mark-{pod.uid}",
                            "-j", "CONNMARK", "--set-mark", str(self._marks[pod.uid])), frozenset({pod.uid})))
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
            self._delete([rule for rule in self._rules if rule.owner in ids])
            for i in ids:
                del self._cuts[i]
        log.warning("fault healed: %s", ", ".join(ids) or "nothing was cut")
        return ids

    def forget_pod(self, uid: str) -> None:
        """Before the pod's cgroups go: delete every rule naming it (its cut pairs and its mark)."""
        with self._lock:
            self._delete([rule for rule in self._rules if uid in rule.pods])
            self._marks.pop(uid, None)

    def in_force(self) -> dict[str, list[str]]:
        with self._lock:
            return {k: list(v) for k, v in self._cuts.items()}
