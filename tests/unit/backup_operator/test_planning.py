"""plan_next_action: the backup operator's decision, table-driven. A spec that cannot be acted on
is reported once per generation; otherwise the schedule decides (test_schedule.py has its rules)."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from backup_operator import reasons
from backup_operator.actions import Done, RejectSpec, TakeBackup, Wait
from backup_operator.observed import ObservedBackup, RecordedBackup
from backup_operator.planning import plan_next_action
from tests.unit.backup_operator.etcd_backup_builders import NOW, PERIODIC, observed_backup

# No etcd source: a spec that cannot be acted on (on OSS, as good a storage as S3 now).
NO_SOURCE = {"storageType": "OSS", "oss": {"path": "b/k"}}


NOTHING_RECORDED = RecordedBackup()


def observed(spec: Any, recorded: RecordedBackup = NOTHING_RECORDED, generation: int = 1) -> ObservedBackup:
    return observed_backup(spec, recorded, generation=generation)


def attempted(ago: float, *, generation: int = 1, reason: str = "") -> RecordedBackup:
    return RecordedBackup(observed_generation=generation, succeeded=not reason, consecutive_failures=1 if reason else 0,
                          last_attempt_time=NOW - timedelta(seconds=ago), last_reason=reason)


@pytest.mark.parametrize("case, seen, expected", [
    ("spec without an etcd source: rejected", observed(NO_SOURCE), RejectSpec),
    ("bad spec, reported for this generation: done",
     observed(NO_SOURCE, attempted(10, reason=reasons.INVALID_SPEC)), Done),
    ("bad spec, reported for an older generation: rejected again",
     observed(NO_SOURCE, attempted(10, reason=reasons.INVALID_SPEC), generation=2), RejectSpec),
    ("no spec: rejected", observed(None), RejectSpec),
    ("first backup: now", observed(PERIODIC), TakeBackup),
    ("periodic, taken 100 s ago: wait", observed(PERIODIC, attempted(100)), Wait),
    ("periodic, one interval ago: now", observed(PERIODIC, attempted(600)), TakeBackup),
])
def test_plan(case: str, seen: ObservedBackup, expected: type) -> None:
    action = plan_next_action(seen)
    assert isinstance(action, expected), f"{case}: {action}"


def test_wait_lasts_until_the_next_backup_is_due() -> None:
    action = plan_next_action(observed(PERIODIC, attempted(100)))
    assert isinstance(action, Wait) and action.seconds == 500
