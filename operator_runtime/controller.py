"""A controller for one primary kind: watches it and the kinds its objects own (found by label),
keeps every watched kind in an `ObjectCache`, and runs one worker per primary object (started
on add, woken on any change to it or to what it owns, stopped on delete). A resync wakes every
worker now and then, and restarts one whose thread died."""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kube_adapter.clock import SYSTEM_CLOCK, Clock
from kube_adapter.resources import ResourceClient
from kube_adapter.watching import DELETED, RELISTED, SYNC, object_key
from operator_runtime.cache import Key, ObjectCache
from operator_runtime.liveness import PROCESS_LIVENESS, Liveness

log = logging.getLogger(__name__)

WORKER_JOIN_SECONDS = 10.0
WATCH_RESTART_SECONDS = 1.0
# What `on_error` is told about.
WATCH_FAILED = "watch_failed"
WORKER_DIED = "worker_died"
# /healthz: a watch that neither delivered nor relisted nor ended a quiet stream in the ordinary
# way for this long is stalled (a healthy one does at least every watch timeout, 60 s + 15 s).
WATCH_STALL_SECONDS = 300.0


class Worker(Protocol):
    key: Key

    def start(self) -> None: ...
    def notify(self) -> None: ...
    def stop(self) -> None: ...
    def join(self, timeout: float | None = None) -> None: ...
    def alive(self) -> bool: ...


@dataclass(frozen=True)
class OwnedKind:
    """Objects a primary object owns: those of `client`'s kind matching `label_selector`, whose
    `owner_label` names their owner (in the owner's namespace)."""

    client: ResourceClient
    cache: ObjectCache
    label_selector: str
    owner_label: str


class Controller:
    def __init__(
        self,
        primary: ResourceClient,
        primary_cache: ObjectCache,
        owned: Sequence[OwnedKind],
        *,
        namespace: str | None,
        make_worker: Callable[[Key], Worker],
        resync_seconds: float,
        stop: threading.Event,
        on_workers_changed: Callable[[int], None] = lambda count: None,
        on_deleted: Callable[[Key], None] = lambda key: None,
        on_error: Callable[[str], None] = lambda what: None,
        clock: Clock = SYSTEM_CLOCK,
        liveness: Liveness = PROCESS_LIVENESS,
    ) -> None:
        """`namespace` None watches every namespace. `on_workers_changed(count)` hears how many
        workers run, `on_deleted(key)` that a primary object went, `on_error(WATCH_FAILED or
        WORKER_DIED)` what went wrong. `clock` times the resync and watch restarts (tests pass
        a fake)."""
        self.primary = primary
        self.primary_cache = primary_cache
        self.owned = tuple(owned)
        self.namespace = namespace
        self.stop = stop
        self.resync_seconds = resync_seconds
        self._make_worker = make_worker
        self._on_workers_changed = on_workers_changed
        self._on_deleted = on_deleted
        self._on_error = on_error
        self._clock = clock
        self._liveness = liveness
        self._workers: dict[Key, Worker] = {}
        self._lock = threading.Lock()

    # --- running

    def run(self) -> None:
        """Watch and work until `stop` is set; then stop every worker."""
        ns = self.namespace
        log.info("controller watching %ss in %s", self.primary.resource.kind, ns or "all namespaces")
        primary_progress = self._liveness.expect(f"watch {self.primary.resource.plural}", WATCH_STALL_SECONDS)
        watches: list[tuple[str, Callable[[], None]]] = [
            (kind.client.resource.plural, self._owned_watch(kind)) for kind in self.owned
        ]
        watches.append((self.primary.resource.plural,
                        lambda: self.primary.watch(ns, stop=self.stop, on_event=self._on_primary_event,
                                                   on_progress=primary_progress)))
        self._liveness.expect("resync", max(3 * self.resync_seconds, 60.0))
        self._liveness.add_check("workers", self._dead_workers)
        threads = [threading.Thread(target=self._guard(name, fn), name=f"watch {name}", daemon=True)
                   for name, fn in watches]
        for thread in threads:
            thread.start()
        resync = threading.Thread(target=self._resync_loop, name="resync", daemon=True)
        resync.start()
        self.stop.wait()
        log.info("controller stopping %d workers", len(self._workers))
        with self._lock:
            workers = list(self._workers.values())
        for worker in workers:
            worker.stop()
        for worker in workers:
            worker.join(WORKER_JOIN_SECONDS)

    def _owned_watch(self, kind: OwnedKind) -> Callable[[], None]:
        progress = self._liveness.expect(f"watch {kind.client.resource.plural}", WATCH_STALL_SECONDS)

        def watch() -> None:
            kind.client.watch(self.namespace, kind.label_selector, stop=self.stop,
                              on_event=self._on_owned_event(kind), on_progress=progress)
        return watch

    def _dead_workers(self) -> str | None:
        """/healthz: workers whose thread died (the resync restarts them)."""
        with self._lock:
            dead = [f"{k[0]}/{k[1]}" for k, w in self._workers.items() if not w.alive()]
        return f"worker thread died: {', '.join(sorted(dead)[:5])}" if dead else None

    def _guard(self, name: str, fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            while not self.stop.is_set():
                try:
                    fn()
                except Exception:  # a watch must never die silently
                    log.exception("watch %s failed; restarting it", name)
                    self._on_error(WATCH_FAILED)
                    self._clock.wait(self.stop, WATCH_RESTART_SECONDS)
        return run

    def _resync_loop(self) -> None:
        """Safety net: wake every worker periodically even if no event arrives."""
        while not self._clock.wait(self.stop, self.resync_seconds):
            self._liveness.beat("resync")
            with self._lock:
                workers = list(self._workers.values())
            for worker in workers:
                if not worker.alive():
                    log.error("worker %s/%s died; restarting it", *worker.key)
                    self._on_error(WORKER_DIED)
                    self._restart_worker(worker.key)
                else:
                    worker.notify()

    # --- events

    def _on_primary_event(self, event_type: str, obj: dict[str, Any]) -> None:
        cache = self.primary_cache
        if event_type == RELISTED:
            for key in cache.remove_unlisted(obj.get("keys", []), str(obj.get("resourceVersion") or "")):
                self._stop_worker(key)
            cache.mark_synced()
            return
        if event_type == DELETED:
            if cache.remove(obj):
                self._stop_worker(object_key(obj))
            return
        previous = cache.get(object_key(obj))
        key = cache.upsert(obj)
        worker = self._ensure_worker(key)
        if previous is None or not status_only_change(previous, obj):
            worker.notify()

    def _on_owned_event(self, kind: OwnedKind) -> Callable[[str, dict[str, Any]], None]:
        cache = kind.cache

        def handle(event_type: str, obj: dict[str, Any]) -> None:
            if event_type == RELISTED:
                for key in cache.remove_unlisted(obj.get("keys", []), str(obj.get("resourceVersion") or "")):
                    self._notify_owner(key[0], None)
                cache.mark_synced()
                return
            if event_type == DELETED:
                cache.remove(obj)
            else:
                cache.upsert(obj)
            if event_type != SYNC:
                labels = (obj.get("metadata") or {}).get("labels") or {}
                self._notify_owner(object_key(obj)[0], labels.get(kind.owner_label))
        return handle

    def _notify_owner(self, namespace: str, owner: str | None) -> None:
        """Wake the worker of `owner` in `namespace`; every worker there when it is unknown."""
        with self._lock:
            if owner is None:
                targets = [w for k, w in self._workers.items() if k[0] == namespace]
            else:
                worker = self._workers.get((namespace, owner))
                targets = [worker] if worker else []
        for worker in targets:
            worker.notify()

    # --- workers

    def _ensure_worker(self, key: Key) -> Worker:
        with self._lock:
            worker = self._workers.get(key)
            if worker is None:
                worker = self._make_worker(key)
                self._workers[key] = worker
                worker.start()
                self._on_workers_changed(len(self._workers))
            return worker

    def _restart_worker(self, key: Key) -> None:
        with self._lock:
            self._workers.pop(key, None)
        self._ensure_worker(key).notify()

    def _stop_worker(self, key: Key) -> None:
        with self._lock:
            worker = self._workers.pop(key, None)
            self._on_workers_changed(len(self._workers))
        if worker:
            worker.stop()
            self._on_deleted(key)
            log.info("%s/%s deleted; worker stopped", *key)


# Metadata the API server changes on every write, status writes included.
_WRITE_BOOKKEEPING = ("resourceVersion", "managedFields")


def status_only_change(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Did only the status change (the operator's own status write, echoed by the watch)? Such an
    event wakes no worker: the pass that wrote it already acted on everything else, and with
    status that moves on its own (a member's database size) every write would otherwise wake the
    next pass at once."""
    def rest(obj: dict[str, Any]) -> dict[str, Any]:
        metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _WRITE_BOOKKEEPING}
        return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": metadata}
    return rest(before) == rest(after)
