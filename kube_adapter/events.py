"""Kubernetes Events about the objects an operator manages, so `kubectl describe` tells what the operator did.

Events are best-effort: `record` never raises (a failure is logged). Like kubectl's own
recorder, the same reason and message about the same object within a few minutes bumps the
existing Event's count and lastTimestamp instead of creating another one.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import ApiClient, CoreV1Api

from kube_adapter.client import fetch_json_once
from kube_adapter.clock import SYSTEM_CLOCK, Clock
from kube_adapter.errors import NotFound, retry_policy

logger = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
DEDUPE_WINDOW_SECONDS = 300.0
MAX_MESSAGE_LENGTH = 1024
MAX_REMEMBERED_EVENTS = 4096

# Events must not hold a supervisor up for long when the API is struggling.
EVENT_RETRY_ATTEMPTS = 3
EVENT_RETRY_MAX_SECONDS = 5.0


@dataclass
class _Recorded:
    namespace: str
    name: str
    count: int
    last_seen: float  # monotonic


def _timestamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def involved_object_reference(involved: dict[str, Any]) -> dict[str, Any]:
    """The involvedObject of an Event about `involved` (an API object as a dict)."""
    metadata = involved.get("metadata") or {}
    reference = {
        "apiVersion": involved.get("apiVersion"),
        "kind": involved.get("kind"),
        "name": metadata.get("name"),
        "namespace": metadata.get("namespace"),
        "uid": metadata.get("uid"),
        "resourceVersion": metadata.get("resourceVersion"),
    }
    return {key: value for key, value in reference.items() if value}


def build_event(
    involved: dict[str, Any], event_type: str, reason: str, message: str, *, component: str, host: str | None = None
) -> dict[str, Any]:
    """A new core/v1 Event (count 1) about `involved`."""
    reference = involved_object_reference(involved)
    now = _timestamp()
    source = {"component": component}
    if host:
        source["host"] = host
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            # The name scheme of client-go's recorder: unique per object and moment.
            "name": f"{reference.get('name', 'unknown')}.{time.time_ns():x}",
            "namespace": reference.get("namespace") or "default",
        },
        "involvedObject": reference,
        "type": event_type,
        "reason": reason,
        "message": message[:MAX_MESSAGE_LENGTH],
        "source": source,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": host or component,
    }


class EventRecorder:
    """Records Events on behalf of `component`; safe to share between threads."""

    def __init__(
        self,
        api: ApiClient,
        component: str,
        *,
        host: str | None = None,
        dedupe_window_seconds: float = DEDUPE_WINDOW_SECONDS,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """`clock` times the dedupe window and the waits between retries."""
        self._core = CoreV1Api(api)
        self._clock = clock
        self._fetch_json = retry_policy(attempts=EVENT_RETRY_ATTEMPTS, max_seconds=EVENT_RETRY_MAX_SECONDS,
                                        clock=clock)(fetch_json_once)
        self.component = component
        self.host = host
        self.dedupe_window_seconds = dedupe_window_seconds
        self._recent: OrderedDict[tuple[str, str, str, str], _Recorded] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, involved: dict[str, Any], type: str, reason: str, message: str) -> None:
        """Record that `reason: message` happened to `involved`; type is "Normal" or "Warning".
        Never raises."""
        try:
            self._record(involved, type, reason, message)
        except Exception as error:
            metadata = involved.get("metadata") or {}
            logger.warning(
                "could not record event %s %s for %s/%s: %s",
                type, reason, metadata.get("namespace"), metadata.get("name"), error,
            )

    def _record(self, involved: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        metadata = involved.get("metadata") or {}
        key = (
            str(metadata.get("uid") or f"{metadata.get('namespace')}/{metadata.get('name')}"),
            event_type, reason, message[:MAX_MESSAGE_LENGTH],
        )
        now = self._clock.monotonic()
        with self._lock:
            previous = self._recent.get(key)
        if previous is not None and now - previous.last_seen < self.dedupe_window_seconds:
            try:
                self._fetch_json(
                    self._core.patch_namespaced_event,
                    name=previous.name, namespace=previous.namespace,
                    body={"count": previous.count + 1, "lastTimestamp": _timestamp()},
                    _content_type="application/merge-patch+json",
                )
            except NotFound:
                pass  # expired or deleted meanwhile: create a new one below
            else:
                self._remember(key, _Recorded(previous.namespace, previous.name, previous.count + 1, now))
                return
        event = build_event(involved, event_type, reason, message, component=self.component, host=self.host)
        namespace = event["metadata"]["namespace"]
        self._fetch_json(self._core.create_namespaced_event, namespace=namespace, body=event)
        self._remember(key, _Recorded(namespace, event["metadata"]["name"], 1, now))

    def _remember(self, key: tuple[str, str, str, str], recorded: _Recorded) -> None:
        with self._lock:
            self._recent[key] = recorded
            self._recent.move_to_end(key)
            while len(self._recent) > MAX_REMEMBERED_EVENTS:
                self._recent.popitem(last=False)
