"""`LoadWindows`: etcd's `check perf` (tests/check_perf.py) kept running under a sequence of
changes, recording when each change happened, so that each run is reported with the changes it
overlapped.

A change is begun in a run with at least the time it usually takes left (else a new run is started
first, after the current one ended). A change that outlasts its run is still under load from its
first to its last moment: while it is applied, a relay starts the next run OVERLAP_SECONDS before
the current one ends (check perf's runs last a fixed 60 s), and each change checks that the runs
it records leave no gap."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from kube_sandbox.testing import Sandbox
from tests.check_perf import RUN_SECONDS, CheckPerfResult, CheckPerfRun

# How long before a run ends the relay starts the next (a run writes within 1-3 s of its start:
# the raft term read, etcdctl's 50 clients, its first keys seen).
OVERLAP_SECONDS = 10.0


@dataclass
class Change:
    label: str
    began: float  # time.monotonic()
    ended: float

    @property
    def seconds(self) -> float:
        return self.ended - self.began

    def overlaps(self, run: CheckPerfRun) -> bool:
        """Whether it happened, in part, while `run` ran (from its start until etcdctl exited: the
        span of the run's raft terms, tests/check_perf.py)."""
        return run.started <= self.ended and (run.exited_at is None or run.exited_at >= self.began)


@dataclass
class LoadWindows:
    """Consecutive `check perf` runs through `endpoints` covering a sequence of changes: call
    `change(label, apply, usual)` for each; a change is begun only in a run with `usual` seconds
    left, and is relayed into the next run when it takes longer."""

    sandbox: Sandbox
    endpoints: list[str]
    prefix: str
    runs: list[CheckPerfRun] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)

    def next_run(self) -> CheckPerfRun:
        """End the current run (waiting for it) and start the next."""
        if self.runs:
            self.runs[-1].finish()
        return self._start_run()

    def ensure_time_for(self, usual: float) -> CheckPerfRun:
        """The current run if it has `usual` seconds left, else the next (started after it ended)."""
        current = self.runs[-1] if self.runs else None
        if current is None or not current.running() or current.remaining() < usual:
            current = self.next_run()
        return current

    def change(self, label: str, apply: Callable[[], None], usual: float) -> None:
        assert usual < RUN_SECONDS - 5, f"{label}: no run is long enough for {usual:.0f}s"
        self.ensure_time_for(usual)
        first = len(self.runs) - 1
        began = time.monotonic()
        with self._relayed():
            apply()
        ended = time.monotonic()
        self.changes.append(Change(label, began, ended))
        gaps = _gaps(self.runs[first:], began, ended)
        assert not gaps, f"{label} ({ended - began:.1f}s) was not under load for {gaps}"

    def finish(self) -> list[CheckPerfResult]:
        return [run.finish() for run in self.runs]

    def report(self) -> str:
        lines = []
        for index, run in enumerate(self.runs):
            covered = ", ".join(f"{c.label} ({c.seconds:.1f}s)" for c in self.changes if c.overlaps(run))
            lines.append(f"check perf #{index} [{covered}]: {run.verdict()}")
        return "\n".join(lines)

    def labels_in_run(self, index: int) -> list[str]:
        """The changes run `index` was writing through, in part or whole (runs overlap when one is
        relayed into the next)."""
        return [c.label for c in self.changes if c.overlaps(self.runs[index])]

    def _start_run(self) -> CheckPerfRun:
        run = CheckPerfRun(self.sandbox, self.endpoints, f"{self.prefix}{len(self.runs)}/")
        self.runs.append(run)
        run.start()
        return run

    @contextmanager
    def _relayed(self) -> Iterator[None]:
        stop = threading.Event()
        failures: list[BaseException] = []

        def relay() -> None:
            try:
                while not stop.wait(max(self.runs[-1].remaining() - OVERLAP_SECONDS, 0.0)):
                    self._start_run()
            except BaseException as e:  # reported by the change, not lost in the thread
                failures.append(e)

        thread = threading.Thread(target=relay, name=f"check-perf relay {self.prefix}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(RUN_SECONDS)
        assert not failures, f"the next check perf run did not start: {failures[0]!r}"


def _gaps(runs: list[CheckPerfRun], began: float, ended: float) -> list[str]:
    """The stretches of [began, ended] during which none of `runs` was writing."""
    gaps, covered_until = [], began
    for run in sorted(runs, key=lambda r: r.writing_since):
        if run.writing_since > covered_until:
            gaps.append(f"{covered_until - began:.1f}-{run.writing_since - began:.1f}s")
        covered_until = max(covered_until, run.writing_until)
    if covered_until < ended:
        gaps.append(f"{covered_until - began:.1f}-{ended - began:.1f}s")
    return gaps
