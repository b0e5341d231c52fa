"""How the client-transparency test (tests/integration/etcd_operator/check_perf_windows.py) tells
that a change was under load from its first to its last moment (the runs it records, each writing
from when its first keys were seen until its fixed duration ended, leave no gap), and which changes
each run is reported with (every one it ran through, in part)."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.integration.etcd_operator.check_perf_windows import Change, _gaps


@dataclass
class Run:
    writing_since: float
    writing_until: float


@pytest.mark.parametrize("runs, ended", [
    ([Run(0, 60)], 40.0),  # a change inside one run
    ([Run(0, 60), Run(53, 113)], 100.0),  # relayed: the next run wrote before the first ended
    ([Run(53, 113), Run(0, 60)], 100.0),  # in any order
])
def test_runs_that_overlap_cover_the_change(runs: list[Run], ended: float) -> None:
    assert _gaps(runs, 10.0, ended) == []  # type: ignore[arg-type]


@pytest.mark.parametrize("runs, gaps", [
    ([Run(0, 60)], ["50.0-90.0s"]),  # the change outlasted its run, nothing relayed it
    ([Run(0, 60), Run(62, 122)], ["50.0-52.0s"]),  # the next run wrote 2 s after the first ended
    ([Run(15, 60), Run(55, 115)], ["0.0-5.0s"]),  # the first run was not writing yet
    ([Run(0, 30)], ["20.0-90.0s"]),  # etcdctl exited early
])
def test_a_moment_no_run_was_writing_is_a_gap(runs: list[Run], gaps: list[str]) -> None:
    assert _gaps(runs, 10.0, 100.0) == gaps  # type: ignore[arg-type]


@dataclass
class Ran:
    started: float
    exited_at: float | None


@pytest.mark.parametrize("run, overlaps", [
    (Ran(0, 62), True),  # the change inside the run
    (Ran(0, 15), True),  # the run ended during the change
    (Ran(25, 85), True),  # the run started during it (relayed)
    (Ran(35, None), False),  # started after it
    (Ran(-70, 5), False),  # ended before it
    (Ran(-30, None), True),  # still running
])
def test_a_run_is_reported_with_every_change_it_ran_through_in_part(run: Ran, overlaps: bool) -> None:
    assert Change("a change", began=10.0, ended=30.0).overlaps(run) is overlaps  # type: ignore[arg-type]
