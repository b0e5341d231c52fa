"""List-then-watch loops that survive expiry, API restarts and network gaps.

`watch_forever` lists, then watches from the list's resourceVersion with bookmarks; a 410 /
"Expired" means relist, any other ERROR event is logged and followed by a relist after backoff,
and a dropped connection resumes from the last resourceVersion seen. After every (re)list the
consumer also gets the full set of keys, so deletions that happened during a gap are noticed.
It returns only when `stop` is set; a stop closes the open stream at once.
"""
from __future__ import annotations

import json
import logging
import random
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from kube_adapter.client import call_api, fetch_json_once, list_items
from kube_adapter.clock import SYSTEM_CLOCK, Clock
from kube_adapter.errors import Gone, KubeError, translate

logger = logging.getLogger(__name__)

# Event types handed to the consumer. ADDED/MODIFIED/DELETED come from the watch as they are.
SYNC = "SYNC"  # an object as found by a (re)list
RELISTED = "RELISTED"  # after a (re)list: {"keys": [ObjectKey...], "resourceVersion": ...}
ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"

EventHandler = Callable[[str, dict[str, Any]], None]

LIST_PAGE_SIZE = 500
CONNECT_TIMEOUT_SECONDS = 5.0
# The server ends a watch after timeout_seconds; give it this much longer before we give up
# on a silent connection ourselves.
READ_TIMEOUT_MARGIN_SECONDS = 15.0
LIST_READ_TIMEOUT_SECONDS = 60.0


class WatchErrorEvent(KubeError):
    """The watch stream delivered an ERROR event other than 410 Expired."""


class ObjectKey(NamedTuple):
    """Which object: namespace ("" for cluster-scoped kinds) and name. The keys RELISTED carries
    and the keys of `operator_runtime.cache`; prints as "namespace/name" (or "name")."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    metadata = obj.get("metadata") or {}
    return ObjectKey(str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


class _Backoff:
    """Jittered exponential delays, reset once things work again."""

    def __init__(self, initial_seconds: float, max_seconds: float) -> None:
        self._initial = initial_seconds
        self._max = max_seconds
        self._next = initial_seconds

    def next_delay(self) -> float:
        delay = self._next * random.uniform(0.8, 1.2)
        self._next = min(self._next * 2, self._max)
        return min(delay, self._max)

    def reset(self) -> None:
        self._next = self._initial


class _StreamCloser:
    """Shuts the open watch stream's socket down when `stop` is set, so a blocked read returns
    at once instead of at the next event or server timeout."""

    def __init__(self, stop: threading.Event, name: str) -> None:
        self._stop = stop
        self._lock = threading.Lock()
        self._response: Any = None
        threading.Thread(target=self._close_on_stop, name=f"{name}-stream-closer", daemon=True).start()

    def track(self, response: Any) -> None:
        with self._lock:
            self._response = response
        if self._stop.is_set():
            self._shutdown(response)

    def untrack(self) -> None:
        with self._lock:
            self._response = None

    def _close_on_stop(self) -> None:
        self._stop.wait()
        with self._lock:
            response = self._response
        if response is not None:
            self._shutdown(response)

    @staticmethod
    def _shutdown(response: Any) -> None:
        try:
            response.shutdown()
            return
        except Exception:  # older urllib3 or a released connection: try the socket itself
            pass
        try:
            response.connection.sock.shutdown(socket.SHUT_RDWR)
        except Exception:
            pass


def _lines(response: Any) -> Iterator[bytes]:
    """Complete newline-terminated lines of a streamed response body, as they arrive."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=True):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


class _ListWatch:
    def __init__(
        self,
        list_fn: Callable[..., Any],
        *,
        stop: threading.Event,
        on_event: EventHandler,
        name: str,
        timeout_seconds: int,
        backoff: _Backoff,
        clock: Clock,
        list_kwargs: dict[str, Any],
        on_progress: Callable[[], None] = lambda: None,
    ) -> None:
        self.on_progress = on_progress
        self.list_fn = list_fn
        self.stop = stop
        self.on_event = on_event
        self.name = name
        self.timeout_seconds = timeout_seconds
        self.backoff = backoff
        self.clock = clock
        self.list_kwargs = list_kwargs
        self.resource_version: str | None = None

    def run(self) -> None:
        closer = _StreamCloser(self.stop, self.name)
        logger.info("watch %s: starting", self.name)
        while not self.stop.is_set():
            if self.resource_version is None:
                try:
                    self.relist()
                except Exception as error:
                    self._pause(f"list failed: {error}")
                    continue
            try:
                self.watch(closer)
            except Gone:
                logger.info("watch %s: resourceVersion %s expired; relisting", self.name, self.resource_version)
                self.resource_version = None
            except WatchErrorEvent as error:
                logger.error("watch %s: %s", self.name, error)
                self.resource_version = None
                self._pause("relisting after the error")
            except KubeError as error:
                if self.stop.is_set():
                    break
                self._pause(f"watch interrupted: {error}; resuming from resourceVersion {self.resource_version}")
            except Exception:
                # A bug must not end the watch silently: say so, then start over from a list.
                logger.exception("watch %s: unexpected failure", self.name)
                self.resource_version = None
                self._pause("relisting after the unexpected failure")
        logger.info("watch %s: stopped", self.name)

    def _pause(self, why: str) -> None:
        delay = self.backoff.next_delay()
        logger.warning("watch %s: %s; retrying in %.1fs", self.name, why, delay)
        self.clock.wait(self.stop, delay)

    def relist(self) -> None:
        items: list[dict[str, Any]] = []
        continue_token: str | None = None
        while True:
            page = fetch_json_once(
                self.list_fn,
                **self.list_kwargs,
                limit=LIST_PAGE_SIZE,
                _continue=continue_token,
                _request_timeout=(CONNECT_TIMEOUT_SECONDS, LIST_READ_TIMEOUT_SECONDS),
            )
            items.extend(list_items(page))
            metadata = page.get("metadata") or {}
            continue_token = metadata.get("continue") or None
            if continue_token is None:
                resource_version = str(metadata.get("resourceVersion") or "")
                break
        if not resource_version:
            raise KubeError(f"list for {self.name} returned no resourceVersion")
        for item in items:
            self._emit(SYNC, item)
        self._emit(RELISTED, {"keys": sorted(object_key(item) for item in items), "resourceVersion": resource_version})
        logger.info("watch %s: listed %d objects at resourceVersion %s", self.name, len(items), resource_version)
        self.resource_version = resource_version
        self.on_progress()

    def watch(self, closer: _StreamCloser) -> None:
        response = call_api(
            self.list_fn,
            **self.list_kwargs,
            watch=True,
            resource_version=self.resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=self.timeout_seconds,
            _request_timeout=(CONNECT_TIMEOUT_SECONDS, self.timeout_seconds + READ_TIMEOUT_MARGIN_SECONDS),
            _preload_content=False,
        )
        closer.track(response)
        delivered = 0
        try:
            for line in _lines(response):
                if self.stop.is_set():
                    return
                self._handle_line(line)
                delivered += 1
        except KubeError:
            raise
        except Exception as error:
            if self.stop.is_set():
                return
            raise translate(error) from error
        finally:
            closer.untrack()
            response.release_conn()
        # The server closed the stream at timeout_seconds: an ordinary, healthy end.
        self.backoff.reset()
        self.on_progress()
        logger.debug("watch %s: stream ended after %d events; rewatching", self.name, delivered)

    def _handle_line(self, line: bytes) -> None:
        try:
            event = json.loads(line)
            event_type = str(event["type"])
            obj = event["object"]
        except (ValueError, KeyError, TypeError) as error:
            raise KubeError(f"unreadable watch event: {line[:200]!r}") from error
        if event_type == "ERROR":
            code = obj.get("code") if isinstance(obj, dict) else None
            message = obj.get("message", "") if isinstance(obj, dict) else str(obj)
            reason = obj.get("reason", "") if isinstance(obj, dict) else ""
            if code == 410 or reason in ("Expired", "Gone"):
                raise Gone(f"watch expired: {message}", status=410, reason=str(reason))
            raise WatchErrorEvent(f"ERROR event {code} {reason}: {message}", status=code, reason=str(reason))
        resource_version = (obj.get("metadata") or {}).get("resourceVersion")
        if resource_version:
            self.resource_version = str(resource_version)
        self.on_progress()
        if event_type == "BOOKMARK":
            return
        self.backoff.reset()
        self._emit(event_type, obj)

    def _emit(self, event_type: str, obj: dict[str, Any]) -> None:
        try:
            self.on_event(event_type, obj)
        except Exception:
            # One object the consumer chokes on must not stop the watch for all the others.
            logger.exception("watch %s: handling %s %s failed", self.name, event_type, object_key(obj))


def watch_forever(
    list_fn: Callable[..., Any],
    *,
    stop: threading.Event,
    on_event: EventHandler,
    name: str,
    timeout_seconds: int = 60,
    backoff_seconds: float = 1.0,
    max_backoff_seconds: float = 30.0,
    clock: Clock = SYSTEM_CLOCK,
    on_progress: Callable[[], None] = lambda: None,
    **list_kwargs: Any,
) -> None:
    """List and watch whatever `list_fn` lists (e.g. `CoreV1Api.list_namespaced_pod` with
    namespace= and label_selector=, or `CustomObjectsApi.list_cluster_custom_object` with
    group=/version=/plural=) until `stop` is set, calling `on_event(type, object)` for:

    - SYNC for each object a (re)list found, then RELISTED {"keys": [...], "resourceVersion"}
    - ADDED / MODIFIED / DELETED from the watch.

    Objects are plain API dicts. `on_event` runs in this thread; its exceptions are logged.
    `on_progress()` hears that the watch is working: after each (re)list, event or bookmark, and
    each stream the server ended in the ordinary way (a quiet watch, at least every
    `timeout_seconds`); a watch that keeps failing calls it no more (the operator's /healthz).
    The backoff after a failure waits on `clock` (tests pass a fake).
    """
    _ListWatch(
        list_fn,
        stop=stop,
        on_event=on_event,
        name=name,
        timeout_seconds=timeout_seconds,
        backoff=_Backoff(backoff_seconds, max_backoff_seconds),
        clock=clock,
        list_kwargs=list_kwargs,
        on_progress=on_progress,
    ).run()
