"""The generic controller, fed by fake watches: a worker per primary object (started on add,
woken on changes to it or to what it owns, stopped on delete or when a relist no longer has it),
caches kept current, and every worker stopped with the controller. The resync runs on a fake
clock: it happens exactly when the test moves time past it, never in between."""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kube_adapter.resources import PODS, Resource
from kube_adapter.watching import ADDED, DELETED, MODIFIED, RELISTED, SYNC, ObjectKey
from operator_runtime.cache import Key, ObjectCache
from operator_runtime.controller import WATCH_STALL_SECONDS, WORKER_DIED, Controller, OwnedKind
from operator_runtime.liveness import Liveness
from tests.support.fake_clock import FakeClock

PRIMARY = Resource("example.com", "v1", "widgets", "Widget")
OWNER_LABEL = "widget"
RESYNC_SECONDS = 30.0

Handler = Callable[[str, dict[str, Any]], None]


class FakeWatchedKind:
    """Stands in for a ResourceClient: `watch` registers the handler and blocks until stopped."""

    def __init__(self, resource: Resource) -> None:
        self.resource = resource
        self.handler: Handler | None = None
        self.progress: Callable[[], None] | None = None
        self.watching = threading.Event()

    def watch(self, namespace: str | None, label_selector: str | None = None, *,
              stop: threading.Event, on_event: Handler, on_progress: Callable[[], None] = lambda: None) -> None:
        self.handler = on_event
        self.progress = on_progress
        self.watching.set()
        stop.wait()

    def send(self, event_type: str, obj: dict[str, Any]) -> None:
        assert self.handler is not None
        self.handler(event_type, obj)


class FakeWorker:
    def __init__(self, key: Key) -> None:
        self.key = key
        self.started = self.stopped = False
        self.notified = 0
        self.dead = False

    def start(self) -> None:
        self.started = True

    def notify(self) -> None:
        self.notified += 1

    def stop(self) -> None:
        self.stopped = True

    def join(self, timeout: float | None = None) -> None:
        pass

    def alive(self) -> bool:
        return not self.dead


def obj(name: str, namespace: str = "ns", **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels}}


def versioned(o: dict[str, Any], resource_version: str) -> dict[str, Any]:
    return {**o, "metadata": {**o["metadata"], "resourceVersion": resource_version}}


class Running:
    def __init__(self) -> None:
        self.stop = threading.Event()
        self.clock = FakeClock()
        self.primary = FakeWatchedKind(PRIMARY)
        self.pods = FakeWatchedKind(PODS)
        self.primary_cache, self.pod_cache = ObjectCache(), ObjectCache()
        self.workers: dict[Key, list[FakeWorker]] = {}
        self.counts: list[int] = []
        self.deleted: list[Key] = []
        self.errors: list[str] = []
        self.liveness = Liveness(self.clock)

        def make_worker(key: Key) -> FakeWorker:
            worker = FakeWorker(key)
            self.workers.setdefault(key, []).append(worker)
            return worker

        self.controller = Controller(
            self.primary, self.primary_cache,  # type: ignore[arg-type]
            [OwnedKind(self.pods, self.pod_cache, "app=widget", OWNER_LABEL)],  # type: ignore[arg-type]
            namespace="ns", make_worker=make_worker, resync_seconds=RESYNC_SECONDS, stop=self.stop,
            on_workers_changed=self.counts.append, on_deleted=self.deleted.append, on_error=self.errors.append,
            clock=self.clock, liveness=self.liveness,
        )
        self.thread = threading.Thread(target=self.controller.run, daemon=True)
        self.thread.start()
        assert self.primary.watching.wait(10) and self.pods.watching.wait(10)
        self.clock.wait_until_waiting(1)  # the resync loop

    def worker(self, name: str) -> FakeWorker:
        return self.workers[("ns", name)][-1]


@pytest.fixture
def running() -> Iterator[Running]:
    controller = Running()
    yield controller
    controller.stop.set()
    controller.thread.join(5.0)


def test_a_worker_per_primary_object_started_on_add(running: Running) -> None:
    running.primary.send(SYNC, obj("w1"))
    running.primary.send(ADDED, obj("w2"))

    assert running.worker("w1").started and running.worker("w2").started
    assert running.primary_cache.get(("ns", "w1")) is not None
    assert running.counts[-1] == 2


def test_owned_objects_wake_their_owner_only(running: Running) -> None:
    running.primary.send(ADDED, obj("w1"))
    running.primary.send(ADDED, obj("w2"))
    before = running.worker("w2").notified

    running.pods.send(MODIFIED, obj("w1-pod", widget="w1"))

    assert running.worker("w1").notified == 2 and running.worker("w2").notified == before
    assert running.pod_cache.get(("ns", "w1-pod")) is not None


def test_synced_owned_objects_wake_nobody(running: Running) -> None:
    running.primary.send(ADDED, obj("w1"))
    running.pods.send(SYNC, obj("w1-pod", widget="w1"))
    assert running.worker("w1").notified == 1


def test_delete_stops_the_worker(running: Running) -> None:
    running.primary.send(ADDED, obj("w1"))
    running.primary.send(DELETED, obj("w1"))

    assert running.worker("w1").stopped
    assert running.deleted == [("ns", "w1")]
    assert running.primary_cache.get(("ns", "w1")) is None


def test_a_relist_without_an_object_stops_its_worker(running: Running) -> None:
    running.primary.send(ADDED, obj("w1"))
    running.primary.send(ADDED, obj("w2"))
    running.primary.send(RELISTED, {"keys": [ObjectKey("ns", "w2")], "resourceVersion": "9"})

    assert running.worker("w1").stopped and not running.worker("w2").stopped
    assert running.primary_cache.is_synced()


def test_an_owned_relist_drops_vanished_objects_and_wakes_the_namespace(running: Running) -> None:
    running.primary.send(ADDED, obj("w1"))
    running.pods.send(ADDED, obj("w1-pod", widget="w1"))
    notified = running.worker("w1").notified

    running.pods.send(RELISTED, {"keys": [], "resourceVersion": "9"})

    assert running.pod_cache.get(("ns", "w1-pod")) is None
    assert running.worker("w1").notified == notified + 1
    assert running.pod_cache.is_synced()


def test_a_relist_older_than_a_write_keeps_the_written_object(running: Running) -> None:
    """A pod created (its answer written into the cache at resourceVersion 12) while a relist was
    under way: the list, at 9, does not have it, yet it exists, and the watch from 9 reports it.
    Dropping it would make the next pass create it again (refused: it exists) and, for a pod that
    changes no more, never see it."""
    running.primary.send(ADDED, obj("w1"))
    running.pod_cache.upsert(versioned(obj("w1-learner", widget="w1"), "12"))
    running.pods.send(SYNC, versioned(obj("w1-seed", widget="w1"), "3"))
    running.pods.send(RELISTED, {"keys": [ObjectKey("ns", "w1-seed")], "resourceVersion": "9"})

    assert running.pod_cache.get(("ns", "w1-learner")) is not None
    assert running.pod_cache.get(("ns", "w1-seed")) is not None


def test_a_relist_older_than_a_primary_write_keeps_its_worker(running: Running) -> None:
    running.primary.send(ADDED, versioned(obj("w1"), "3"))
    running.primary_cache.upsert(versioned(obj("w2"), "12"))  # created by this operator, say
    running.primary.send(RELISTED, {"keys": [ObjectKey("ns", "w1")], "resourceVersion": "9"})
    running.primary.send(DELETED, versioned(obj("w1"), "2"))  # an older incarnation's

    assert running.primary_cache.get(("ns", "w2")) is not None
    assert not running.worker("w1").stopped and running.deleted == []


def test_resync_wakes_workers_and_restarts_dead_ones(running: Running) -> None:
    running.primary.send(ADDED, obj("w1"))
    first = running.worker("w1")
    assert first.notified == 1

    running.clock.advance(RESYNC_SECONDS - 0.01)
    assert first.notified == 1, "resynced early"
    running.clock.advance(0.01)
    assert first.notified == 2, "not woken by the resync"

    first.dead = True
    running.clock.advance(RESYNC_SECONDS)
    assert len(running.workers[("ns", "w1")]) == 2 and first.notified == 2
    assert running.worker("w1").started and WORKER_DIED in running.errors
    running.clock.advance(RESYNC_SECONDS)
    assert len(running.workers[("ns", "w1")]) == 2 and running.worker("w1").notified == 2


def test_stopping_the_controller_stops_every_worker(running: Running) -> None:
    running.primary.send(ADDED, obj("w1"))
    running.primary.send(ADDED, obj("w2"))

    running.stop.set()
    running.thread.join(5.0)

    assert not running.thread.is_alive()
    assert running.worker("w1").stopped and running.worker("w2").stopped


def test_a_status_only_change_wakes_no_worker(running: Running) -> None:
    """The operator's own status write comes back through the watch; a status that moves on its
    own (database sizes) would otherwise wake the next pass at once, pass after pass."""
    running.primary.send(ADDED, {**obj("w1"), "spec": {"size": 3}, "status": {"phase": "Creating"}})
    before = running.worker("w1").notified
    written = {**obj("w1"), "spec": {"size": 3}, "status": {"phase": "Running"}}
    written["metadata"]["resourceVersion"] = "2"
    running.primary.send(MODIFIED, written)
    assert running.worker("w1").notified == before
    assert running.primary_cache.get(("ns", "w1")) == written  # the cache still has the newest
    changed = {**written, "spec": {"size": 5}}
    running.primary.send(MODIFIED, changed)
    assert running.worker("w1").notified == before + 1
    relabelled = {**changed, "metadata": {**changed["metadata"], "labels": {"team": "a"}}}
    running.primary.send(MODIFIED, relabelled)
    assert running.worker("w1").notified == before + 2


def test_healthy_while_watches_progress_and_the_resync_runs(running: Running) -> None:
    assert running.liveness.problems() == []
    for _ in range(int(WATCH_STALL_SECONDS // RESYNC_SECONDS) + 2):  # quiet watches that end their streams
        assert running.primary.progress is not None and running.pods.progress is not None
        running.primary.progress()
        running.pods.progress()
        running.clock.advance(RESYNC_SECONDS)
    assert running.liveness.problems() == []


def test_a_watch_that_makes_no_progress_makes_the_operator_unhealthy(running: Running) -> None:
    """A watch failing forever (its list refused, the API unreachable) must not leave /healthz "ok"."""
    for _ in range(int(WATCH_STALL_SECONDS // RESYNC_SECONDS) + 1):
        assert running.primary.progress is not None
        running.primary.progress()
        running.clock.advance(RESYNC_SECONDS)
    problems = running.liveness.problems()
    assert len(problems) == 1 and problems[0].startswith("watch pods: no progress for"), problems
    assert running.pods.progress is not None
    running.pods.progress()
    assert running.liveness.problems() == []


def test_a_dead_worker_thread_is_unhealthy_until_the_resync_restarts_it(running: Running) -> None:
    running.primary.send(ADDED, obj("w1"))
    running.worker("w1").dead = True
    assert running.liveness.problems() == ["workers: worker thread died: ns/w1"]
    running.clock.advance(RESYNC_SECONDS)
    assert running.liveness.problems() == []


def test_a_resync_loop_that_stopped_is_unhealthy() -> None:
    clock = FakeClock()
    liveness = Liveness(clock)
    liveness.expect("resync", 90.0)
    clock.advance(89.0)
    assert liveness.problems() == []
    clock.advance(2.0)
    assert liveness.problems() == ["resync: no progress for 91s (bound 90s)"]
