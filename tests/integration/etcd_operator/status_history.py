"""Records every status an EtcdCluster had, from a watch: a condition that is True for a single
reconcile pass would slip between two polls, but never past a watch."""
from __future__ import annotations

import threading
from typing import Any

from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from tests.integration.etcd_operator.operator_clusters import GROUP, PLURAL, VERSION, Clusters

WATCH_WINDOW_SECONDS = 2  # the server ends each watch after this; we resume from the last version


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """type -> (status, reason)."""
    return {c["type"]: (c.get("status", ""), c.get("reason", "")) for c in status.get("conditions") or []}


def summary(status: dict[str, Any]) -> str:
    """One line per status: phase, ready count and each condition."""
    parts = [f"{status.get('phase')} {status.get('readyCount')}/{status.get('size')}"]
    parts += [f"{kind}={value}({reason})" for kind, (value, reason) in sorted(conditions(status).items())]
    return " ".join(parts)


class StatusHistory:
    """`with StatusHistory(clusters, name) as history:` records into `history.statuses`."""

    def __init__(self, clusters: Clusters, name: str) -> None:
        self.clusters = clusters
        self.name = name
        self.statuses: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"status history {name}", daemon=True)

    def __enter__(self) -> StatusHistory:
        self._resource_version = self._record_current()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(WATCH_WINDOW_SECONDS * 3)
        self._record_current()

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.statuses)

    def distinct_summaries(self) -> list[str]:
        """The recorded sequence without consecutive repeats, for failure messages."""
        lines: list[str] = []
        for status in self.snapshot():
            line = summary(status)
            if not lines or lines[-1] != line:
                lines.append(line)
        return lines

    def _record(self, obj: dict[str, Any]) -> None:
        with self._lock:
            self.statuses.append(obj.get("status") or {})

    def _record_current(self) -> str:
        obj = self.clusters.get(self.name)
        self._record(obj)
        return str(obj["metadata"]["resourceVersion"])

    def _run(self) -> None:
        custom = self.clusters.custom
        while not self._stop.is_set():
            stream = watch.Watch()
            try:
                for event in stream.stream(
                    custom.list_namespaced_custom_object, GROUP, VERSION, self.clusters.namespace, PLURAL,
                    field_selector=f"metadata.name={self.name}", resource_version=self._resource_version,
                    timeout_seconds=WATCH_WINDOW_SECONDS,
                ):
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        raise ApiException(status=obj.get("code"), reason=obj.get("message"))
                    self._resource_version = str(obj["metadata"]["resourceVersion"])
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._record(obj)
                    if self._stop.is_set():
                        stream.stop()
            except ApiException as e:
                self.errors.append(f"{e.status}: {e.reason}")
                if e.status == 410:  # too old: carry on from the current object
                    self._resource_version = self._record_current()
            except Exception as e:  # keep recording; the test reports errors if it fails
                self.errors.append(repr(e))
                self._stop.wait(0.2)
