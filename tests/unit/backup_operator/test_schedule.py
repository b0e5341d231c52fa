"""When the next backup is due, from spec + status + now only (so restarts neither skip nor repeat)."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from backup_operator import reasons
from backup_operator.actions import Action, Done, TakeBackup, Wait
from backup_operator.observed import RecordedBackup
from backup_operator.schedule import DEFAULT_TIMEOUT_SECONDS, RETRY_MAX_SECONDS, next_backup, retry_backoff_seconds
from etcd_common.api.etcd_backup import BackupPolicy, BackupSpec
from etcd_common.api.storage_locations import S3Location, StorageLocation

NOW = datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)


def due_in(action: Action) -> float | None:
    """0: take one now; None: nothing until the spec changes."""
    if isinstance(action, TakeBackup):
        return 0.0
    if isinstance(action, Wait):
        return action.seconds
    assert isinstance(action, Done), action
    return None


def spec(interval: int = 0, timeout: int = 0) -> BackupSpec:
    return BackupSpec(storage=StorageLocation("S3", s3=S3Location("b/k")), etcd_endpoints=("http://e:2379",),
                      policy=BackupPolicy(timeout_seconds=timeout, backup_interval_seconds=interval))


def recorded(ago: float | None, *, generation: int = 1, failures: int = 0, reason: str = "",
             first_ago: float | None = None, succeeded: bool | None = None) -> RecordedBackup:
    return RecordedBackup(
        observed_generation=generation, succeeded=failures == 0 if succeeded is None else succeeded,
        last_attempt_time=None if ago is None else NOW - timedelta(seconds=ago),
        first_attempt_time=None if first_ago is None else NOW - timedelta(seconds=first_ago),
        consecutive_failures=failures, last_reason=reason,
    )


@pytest.mark.parametrize("interval", [0, 600])
def test_first_backup_at_once(interval: int) -> None:
    assert due_in(next_backup(spec(interval), 1, RecordedBackup(), NOW)) == 0


@pytest.mark.parametrize("ago, due", [(100, 500), (600, 0), (700, 0)])  # overdue: now
def test_periodic_next_is_one_interval_after_the_last_attempt(ago: float, due: float) -> None:
    assert due_in(next_backup(spec(600), 1, recorded(ago), NOW)) == due


def test_periodic_after_failure_retries_sooner_than_the_interval() -> None:
    action = next_backup(spec(600), 1, recorded(0, failures=3, reason=reasons.ETCD_UNREACHABLE), NOW)
    assert due_in(action) == retry_backoff_seconds(3) == 20


def test_periodic_retry_never_later_than_the_interval() -> None:
    action = next_backup(spec(30), 1, recorded(0, failures=10, reason="S3Unreachable"), NOW)
    assert due_in(action) == 30


def test_spec_change_takes_a_backup_at_once() -> None:
    assert due_in(next_backup(spec(600), 2, recorded(10, generation=1), NOW)) == 0


def test_one_shot_done_once() -> None:
    assert due_in(next_backup(spec(), 1, recorded(10), NOW)) is None


def test_one_shot_done_by_coreos_is_not_taken_again() -> None:
    coreos = RecordedBackup(observed_generation=0, succeeded=True)
    assert due_in(next_backup(spec(), 1, coreos, NOW)) is None


def test_one_shot_transient_failure_retried_with_backoff() -> None:
    action = next_backup(spec(), 1, recorded(1, failures=2, reason=reasons.ETCD_UNREACHABLE, first_ago=10), NOW)
    assert due_in(action) == retry_backoff_seconds(2) - 1


def test_one_shot_transient_failure_given_up_after_the_timeout() -> None:
    action = next_backup(spec(timeout=60), 1, recorded(1, failures=4, reason="S3Unreachable", first_ago=61), NOW)
    assert due_in(action) is None and "gave up" in action.why


def test_one_shot_default_timeout_suits_large_databases() -> None:
    assert DEFAULT_TIMEOUT_SECONDS >= 1800
    action = next_backup(spec(), 1, recorded(1, failures=2, reason="S3Unreachable", first_ago=1700), NOW)
    assert due_in(action) is not None


def test_one_shot_problem_a_person_fixes_keeps_being_retried() -> None:
    action = next_backup(spec(timeout=60), 1, recorded(1, failures=20, reason="S3AccessDenied", first_ago=3600), NOW)
    due = due_in(action)
    assert due is not None and due <= 300


def test_one_shot_spec_problem_waits_for_a_spec_change() -> None:
    action = next_backup(spec(), 1, recorded(1, failures=1, reason=reasons.INVALID_SPEC), NOW)
    assert due_in(action) is None


def test_backoff_doubles_up_to_five_minutes() -> None:
    assert [retry_backoff_seconds(n) for n in (1, 2, 3, 10)] == [5, 10, 20, 300]


@pytest.mark.parametrize("interval, minimum, due", [
    (5, 60, 60.0),  # below the operator's minimum: raised to it
    (125, 60, 125.0),  # CoreOS's example: kept
    (60, 60, 60.0),
    (5, 0, 5.0),  # no minimum
])
def test_a_periodic_interval_below_the_minimum_is_raised_to_it(interval: int, minimum: float, due: float) -> None:
    assert due_in(next_backup(spec(interval), 1, recorded(0), NOW, minimum)) == due


def test_a_backup_due_says_since_when_so_backups_due_at_once_queue_oldest_first() -> None:
    action = next_backup(spec(600), 1, recorded(700), NOW)
    assert isinstance(action, TakeBackup) and action.due == NOW - timedelta(seconds=100)
    assert next_backup(spec(600), 1, recorded(None), NOW) == TakeBackup("first backup")  # due from now


def test_a_one_shot_refused_for_lack_of_work_space_keeps_being_retried() -> None:
    action = next_backup(spec(0, timeout=60), 1, recorded(10, failures=9, reason=reasons.WORK_DIRECTORY_FULL,
                                                              first_ago=7200), NOW)
    assert due_in(action) == RETRY_MAX_SECONDS - 10  # not given up after timeoutInSecond
