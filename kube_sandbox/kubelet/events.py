"""Kubernetes Events about pods (Started, Killing, BackOff, ...), so `kubectl describe` explains what
the kubelet did; each names the pod's node as its source host. Sent from one background thread;
losing one is harmless."""
from __future__ import annotations

import logging
import queue
import secrets
import threading
from datetime import UTC, datetime
from typing import Any

from kube_sandbox.kubelet.kube_api import KubeApi, object_path

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
QUEUE_LIMIT = 1000


class EventRecorder:
    def __init__(self, api: KubeApi, stop: threading.Event) -> None:
        self.api = api
        self.stop = stop
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=QUEUE_LIMIT)
        self._thread = threading.Thread(target=self._run, name="kubelet-events", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def record(self, pod: dict[str, Any], event_type: str, reason: str, message: str, field_path: str = "",
               component: str = "kubelet") -> None:
        metadata = pod.get("metadata") or {}
        host = (pod.get("spec") or {}).get("nodeName") or ""
        namespace = metadata.get("namespace", "default")
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        involved = {"kind": "Pod", "apiVersion": "v1", "namespace": namespace, "name": metadata.get("name"),
                    "uid": metadata.get("uid"), "resourceVersion": metadata.get("resourceVersion")}
        if field_path:
            involved["fieldPath"] = field_path
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{metadata.get('name')}.{secrets.token_hex(8)}", "namespace": namespace},
            "involvedObject": involved, "type": event_type, "reason": reason, "message": message,
            "source": {"component": component, "host": host},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
            "reportingComponent": component, "reportingInstance": host,
        }
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            log.debug("event queue full; dropping %s %s", reason, message)

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                event = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                self.api.create(object_path("", "v1", "events", event["metadata"]["namespace"]), event)
            except Exception as e:  # e.g. namespace being deleted
                log.debug("could not record event %s: %s", event["reason"], e)
