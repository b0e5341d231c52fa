"""The operator's limit on backups at once (`slots.py`): never more than the limit running, the
rest served oldest due first, none starved; and the same with 50 EtcdBackups due at once, each
run by its own worker thread as in the operator, with the backup itself faked."""
from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from backup_operator import acting
from backup_operator.slots import BackupSlots
from backup_operator.status import CONDITION_QUEUED
from backup_operator.supervisor import BackupSupervisor, SupervisorContext
from operator_runtime.cache import ObjectCache
from tests.unit.backup_operator.etcd_backup_builders import NOW, PERIODIC, backup_result
from tests.unit.backup_operator.supervisor_fakes import FakeBackupApi, FakeEvents


class Wakes:
    def __init__(self) -> None:
        self.woken: list[str] = []

    def of(self, name: str) -> Any:
        return lambda: self.woken.append(name)


def test_the_limit_holds_and_the_oldest_due_goes_first() -> None:
    changes: list[tuple[int, int]] = []
    slots, wakes = BackupSlots(2, on_change=lambda running, queued: changes.append((running, queued))), Wakes()
    assert slots.request(("ns", "a"), 50.0, wakes.of("a")) == 0
    assert slots.request(("ns", "b"), 40.0, wakes.of("b")) == 0
    assert slots.request(("ns", "late"), 30.0, wakes.of("late")) == 1
    assert slots.request(("ns", "early"), 10.0, wakes.of("early")) == 1  # due earlier: ahead of "late"
    assert slots.request(("ns", "late"), 30.0, wakes.of("late")) == 2
    assert (slots.running(), slots.queued()) == (2, 2) and changes[-1] == (2, 2)
    slots.release(("ns", "a"))
    assert wakes.woken == ["early"]  # only the head: one slot is free
    assert slots.request(("ns", "late"), 30.0, wakes.of("late")) == 2  # cannot jump the woken head
    assert slots.request(("ns", "early"), 10.0, wakes.of("early")) == 0
    assert slots.request(("ns", "late"), 30.0, wakes.of("late")) == 1
    slots.leave(("ns", "b"))  # no longer due (or deleted): its slot goes on
    assert wakes.woken == ["early", "late"]
    assert slots.request(("ns", "late"), 30.0, wakes.of("late")) == 0
    assert (slots.running(), slots.queued()) == (2, 0)


def test_a_waiting_backup_keeps_its_place_and_is_never_starved() -> None:
    """Asking again keeps the first due time; later arrivals (due later) queue behind it."""
    slots, wakes = BackupSlots(1), Wakes()
    assert slots.request(("ns", "running"), 0.0, wakes.of("running")) == 0
    assert slots.request(("ns", "old"), 5.0, wakes.of("old")) == 1
    for turn in range(20):  # other backups come due again and again
        assert slots.request(("ns", f"new-{turn}"), 100.0 + turn, wakes.of("new")) == turn + 2
        assert slots.request(("ns", "old"), 1000.0, wakes.of("old")) == 1  # its later re-ask keeps 5.0
    slots.release(("ns", "running"))
    assert wakes.woken == ["old"] and slots.request(("ns", "old"), 5.0, wakes.of("old")) == 0


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        BackupSlots(0)


BACKUPS = 50
LIMIT = 2


def test_fifty_backups_due_at_once_run_at_most_limit_at_a_time_oldest_due_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache, slots, stop = ObjectCache(), BackupSlots(LIMIT), threading.Event()
    # Periodic EtcdBackups overdue by different amounts, created in an order unrelated to it.
    overdue = {f"b{i:02d}": (i * 37) % BACKUPS for i in range(BACKUPS)}
    for name, late in overdue.items():
        last = NOW - timedelta(seconds=600 + 10 * late)
        cache.upsert({"apiVersion": "etcd.database.coreos.com/v1beta2", "kind": "EtcdBackup",
                      "metadata": {"namespace": "ns", "name": name, "uid": name, "generation": 1}, "spec": PERIODIC,
                      "status": {"observedGeneration": 1, "succeeded": True, "consecutiveFailures": 0,
                                 "lastResult": "Succeeded", "lastAttemptTime": last.strftime("%Y-%m-%dT%H:%M:%SZ")}})
    lock, gate, all_queued = threading.Lock(), threading.Event(), threading.Event()
    running: list[str] = []
    taken: list[str] = []
    most = 0

    def fake_take(request: Any, env: Any, log: Any, now: Any) -> Any:
        nonlocal most
        with lock:
            running.append(request.owner)
            most = max(most, len(running))
            taken.append(request.owner)
            if most > LIMIT:
                all_queued.set()  # the bound broken: no need to wait for a queue
        gate.wait(30)  # the first LIMIT hold their slots until every other one queued
        with lock:
            running.remove(request.owner)
        return backup_result()
    monkeypatch.setattr(acting, "take_backup", fake_take)

    def on_change(now_running: int, queued: int) -> None:
        if queued == BACKUPS - LIMIT:
            all_queued.set()
    slots._on_change = on_change
    api = FakeBackupApi(cache)
    context = SupervisorContext(backups=cache, backup_api=api, environment=None,  # type: ignore[arg-type]
                                events=FakeEvents(), metrics=_metrics(), stop=stop, clock=lambda: NOW, slots=slots)
    supervisors = [BackupSupervisor(("ns", name), context) for name in overdue]
    for supervisor in supervisors:
        supervisor.worker.start()
    try:
        assert all_queued.wait(30), f"queued: {slots.queued()}, running: {slots.running()}"
        assert most <= LIMIT, f"{most} backups ran at once, the limit is {LIMIT}"
        gate.set()

        def all_succeeded() -> bool:
            return all((cache.get(("ns", n)) or {}).get("status", {}).get("lastAttemptTime")
                       == NOW.strftime("%Y-%m-%dT%H:%M:%SZ") for n in overdue)
        for _ in range(300):
            if all_succeeded():
                break
            stop.wait(0.1)
        assert all_succeeded(), f"taken {len(taken)} of {BACKUPS}: {taken}"
    finally:
        stop.set()
        for supervisor in supervisors:
            supervisor.worker.stop()
    assert most <= LIMIT and sorted(taken) == sorted(overdue)  # each once, never more than LIMIT at once
    # After the first LIMIT (whoever came first), the most overdue first: LIMIT slots free up
    # at once, so the ones woken together may start in either order, never more than LIMIT - 1
    # places before their turn.
    waited = taken[LIMIT:]
    fair = sorted(waited, key=lambda name: -overdue[name])
    assert all(fair.index(name) <= turn + LIMIT - 1 for turn, name in enumerate(waited)), (waited, fair)
    # Each waiting one said so once in status; its attempt's own status removed it.
    queued_writes = [p for p in api.patches if any(c.get("type") == CONDITION_QUEUED for c in p.get("conditions", []))]
    assert len(queued_writes) == BACKUPS - LIMIT
    for name in overdue:
        conditions = (cache.get(("ns", name)) or {})["status"]["conditions"]
        assert [c["type"] for c in conditions] == ["Succeeded"]
    assert (slots.running(), slots.queued()) == (0, 0)


def _metrics() -> Any:
    from backup_operator.metrics import BackupMetrics
    return BackupMetrics()
