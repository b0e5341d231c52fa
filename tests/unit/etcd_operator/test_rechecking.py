"""The re-check interval of a converged cluster: one resync period, doubling per quiet pass, capped."""
from __future__ import annotations

import pytest

from etcd_operator.rechecking import CONTROLLER_RESYNC_MULTIPLE, STABLE_RECHECK_MAX_MULTIPLE, stable_recheck_seconds


@pytest.mark.parametrize("quiet_passes, expected", [(0, 10.0), (1, 10.0), (2, 20.0), (3, 30.0), (50, 30.0)])
def test_interval_grows_with_quiet_passes_up_to_the_cap(quiet_passes: int, expected: float) -> None:
    assert stable_recheck_seconds(10.0, quiet_passes) == expected


def test_the_cap_is_a_few_resync_periods() -> None:
    assert 1.0 < STABLE_RECHECK_MAX_MULTIPLE <= 6.0


def test_the_controller_wakes_everyone_less_often_than_any_supervisor_rechecks() -> None:
    assert CONTROLLER_RESYNC_MULTIPLE > STABLE_RECHECK_MAX_MULTIPLE
