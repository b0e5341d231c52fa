"""`LoadWindows`: etcd's `check perf` (tests/check_perf.py) kept running under a sequence of
changes, starting the next run when the current one has too little time left for the next change,
and recording which run covered which change."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from kube_sandbox.testing import Sandbox
from tests.check_perf import RUN_SECONDS, CheckPerfResult, CheckPerfRun


@dataclass
class Change:
    label: str
    seconds: float
    run: int  # index of the CheckPerfRun that covered it


@dataclass
class LoadWindows:
    """Consecutive `check perf` runs through `endpoints` covering a sequence of changes: call
    `change(label, apply, longest)` for each; a change is begun only in a run with `longest`
    seconds left, and must end within that run."""

    sandbox: Sandbox
    endpoints: list[str]
    prefix: str
    runs: list[CheckPerfRun] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)

    def next_run(self) -> CheckPerfRun:
        """End the current run (waiting for it) and start the next."""
        if self.runs:
            self.runs[-1].finish()
        run = CheckPerfRun(self.sandbox, self.endpoints, f"{self.prefix}{len(self.runs)}/")
        self.runs.append(run)
        run.start()
        return run

    def change(self, label: str, apply: Any, longest: float) -> None:
        assert longest < RUN_SECONDS - 5, f"{label}: no run is long enough for {longest:.0f}s"
        current = self.runs[-1] if self.runs else None
        if current is None or not current.running() or current.remaining() < longest:
            current = self.next_run()
        began = time.monotonic()
        apply()
        ended = time.monotonic()
        self.changes.append(Change(label, ended - began, len(self.runs) - 1))
        assert current.running() and current.remaining() > 0, (
            f"{label} took {ended - began:.1f}s, longer than the {longest:.0f}s it was given: check perf "
            f"#{len(self.runs) - 1} ended before it did")

    def finish(self) -> list[CheckPerfResult]:
        return [run.finish() for run in self.runs]

    def report(self) -> str:
        lines = []
        for index, run in enumerate(self.runs):
            covered = ", ".join(f"{c.label} ({c.seconds:.1f}s)" for c in self.changes if c.run == index)
            lines.append(f"check perf #{index} [{covered}]: {run.verdict()}")
        return "\n".join(lines)
