"""At most `--max-concurrent-backups` backups at once in one operator; EtcdBackups due beyond that
wait in a queue, oldest due first, so none is starved by others.

Every EtcdBackup has a worker thread of its own (`operator_runtime.worker`); a worker whose backup
is due asks for a slot and gets one only when it is among the first `limit - running` of the queue.
Otherwise it returns from its pass (position in hand, written to status once) and is woken when a
slot frees up or the queue ahead of it shrinks. An entry keeps its place until it gets a slot or
leaves (its backup no longer due, the EtcdBackup deleted), so asking again never loses its turn.
Nothing here is persisted: after a restart the queue is rebuilt in order of when each backup was due.
"""
from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from operator_runtime.cache import Key

DEFAULT_MAX_CONCURRENT_BACKUPS: Final = 2

Wake = Callable[[], None]


@dataclass
class _Waiting:
    due: float  # Unix time the backup was due: the queue's order
    sequence: int  # arrival, for backups due at the same instant
    wake: Wake


class BackupSlots:
    """A fair counting gate: `request` -> 0 when granted, else the 1-based queue position."""

    def __init__(self, limit: int, *, on_change: Callable[[int, int], None] = lambda running, queued: None) -> None:
        if limit < 1:
            raise ValueError(f"the backup limit must be at least 1, not {limit}")
        self.limit = limit
        self._on_change = on_change
        self._lock = threading.Lock()
        self._running: set[Key] = set()
        self._waiting: dict[Key, _Waiting] = {}
        self._arrivals = itertools.count()
        on_change(0, 0)

    def request(self, key: Key, due: float, wake: Wake) -> int:
        """A slot for `key`'s backup, due at `due` (kept from its first request while it waits):
        0 when granted (call `release` after the backup), else its position in the queue."""
        with self._lock:
            if key in self._running:
                return 0
            entry = self._waiting.get(key)
            if entry is None:
                entry = self._waiting[key] = _Waiting(due, next(self._arrivals), wake)
            entry.wake = wake
            position = self._order().index(key)
            if position < self.limit - len(self._running):
                del self._waiting[key]
                self._running.add(key)
                position = -1
            running, queued = len(self._running), len(self._waiting)
        self._on_change(running, queued)
        return position + 1

    def release(self, key: Key) -> None:
        """`key`'s backup finished (or failed): its slot goes to the head of the queue."""
        with self._lock:
            self._running.discard(key)
        self._wake_heads()

    def leave(self, key: Key) -> None:
        """`key` no longer waits (not due any more, deleted) nor runs."""
        with self._lock:
            held = key in self._running or key in self._waiting
            self._running.discard(key)
            self._waiting.pop(key, None)
        if held:
            self._wake_heads()

    def running(self) -> int:
        with self._lock:
            return len(self._running)

    def queued(self) -> int:
        with self._lock:
            return len(self._waiting)

    def _order(self) -> list[Key]:
        return sorted(self._waiting, key=lambda k: (self._waiting[k].due, self._waiting[k].sequence))

    def _wake_heads(self) -> None:
        """Wake the waiters a free slot is theirs for (outside the lock: a wake may run anything)."""
        with self._lock:
            free = self.limit - len(self._running)
            heads = [self._waiting[k].wake for k in self._order()[:max(0, free)]]
            running, queued = len(self._running), len(self._waiting)
        self._on_change(running, queued)
        for wake in heads:
            wake()
