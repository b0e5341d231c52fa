"""The daemon's control API on loopback: readiness and fault injection, plus its client."""
from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kube_sandbox.config import HOST_IP, SandboxConfig

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Any]
REQUEST_TIMEOUT_SECONDS = 120.0


class ControlApiServer:
    """Serves GET /status and POST /<action> with a JSON body; each action is a named handler."""

    def __init__(self, port: int, status: Callable[[], dict[str, Any]], actions: dict[str, Handler]) -> None:
        outer = self

        class RequestHandler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server API)
                if self.path == "/status":
                    self._reply(200, outer.status())
                else:
                    self._reply(404, {"error": f"no such path {self.path}"})

            def do_POST(self) -> None:  # noqa: N802
                name = self.path.strip("/")
                handler = outer.actions.get(name)
                if handler is None:
                    self._reply(404, {"error": f"no such action {name}; known: {sorted(outer.actions)}"})
                    return
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                try:
                    self._reply(200, {"result": handler(body)})
                except Exception as e:  # report to the caller instead of killing the daemon
                    log.exception("control action %s failed", name)
                    self._reply(500, {"error": f"{type(e).__name__}: {e}"})

            def _reply(self, code: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("control api: " + format, *args)

        self.status = status
        self.actions = actions
        self._server = ThreadingHTTPServer((HOST_IP, port), RequestHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="control-api", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class ControlApiError(RuntimeError):
    pass


@dataclass(frozen=True)
class ControlClient:
    """What tests use to inject faults into the running sandbox."""

    config: SandboxConfig

    def status(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.config.control_api_url}/status", timeout=5) as r:
            result: dict[str, Any] = json.loads(r.read())
            return result

    def call(self, action: str, **body: Any) -> Any:
        request = urllib.request.Request(
            f"{self.config.control_api_url}/{action}", data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as r:
                return json.loads(r.read())["result"]
        except urllib.error.HTTPError as e:
            raise ControlApiError(f"{action}: {e.read().decode(errors='replace')}") from e

    def crash_container(self, namespace: str, pod: str, container: str) -> None:
        self.call("crash-container", namespace=namespace, pod=pod, container=container)

    def freeze_container(self, namespace: str, pod: str, container: str) -> None:
        self.call("freeze-container", namespace=namespace, pod=pod, container=container)

    def thaw_container(self, namespace: str, pod: str, container: str) -> None:
        self.call("thaw-container", namespace=namespace, pod=pod, container=container)

    def pod_pid(self, namespace: str, pod: str, container: str) -> int | None:
        result = self.call("pod-pid", namespace=namespace, pod=pod, container=container)
        return int(result) if result is not None else None

    def stop_node(self, node: str) -> None:
        """Power cut of `node` (one of config.NODE_NAMES): its pod processes die, its heartbeats stop."""
        self.call("stop-node", node=node)

    def start_node(self, node: str) -> None:
        """Power `node` back on: heartbeats resume, its containers restart per their restart policy."""
        self.call("start-node", node=node)

    def restart_apiserver(self) -> None:
        self.call("restart-apiserver")

    def partition(self, sources: list[tuple[str, str]], targets: list[tuple[str, str]], one_way: bool = False) -> str:
        """Cut the `sources` pods ((namespace, name) each) from the `targets` pods: what a source
        sends to a target is dropped, and back unless `one_way`; their open connections are reset.
        The kubelet and the tests still reach every pod. Returns the cut's id, for `heal`."""
        return str(self.call("partition", oneWay=one_way,
                             **{"from": [{"namespace": ns, "pod": p} for ns, p in sources],
                                "to": [{"namespace": ns, "pod": p} for ns, p in targets]}))

    def isolate_pod(self, namespace: str, pod: str) -> str:
        """Cut one pod from every other running pod, both ways; the cut's id."""
        return str(self.call("isolate-pod", namespace=namespace, pod=pod))

    def heal(self, cut_id: str | None = None) -> list[str]:
        """Remove one cut, or every cut; the ids removed."""
        return list(self.call("heal", id=cut_id))

    def slow_disk(self, namespace: str, pod: str, write_iops: int | None = None,
                  write_bytes_per_second: int | None = None) -> str:
        """Throttle the pod's disk writes (blkio); both None lifts it. Returns the device."""
        return str(self.call("slow-disk", namespace=namespace, pod=pod, writeIops=write_iops,
                             writeBytesPerSecond=write_bytes_per_second))

    def fill_volume(self, namespace: str, claim: str, leave_bytes: int | None = 0) -> str:
        """No space on a sized claim (StorageClass `kube-sandbox-sized`): its volume keeps only
        `leave_bytes` free (rounded up to a page), at once if the claim is bound, else from its
        binding on, before any pod can use it. None lifts it. Refused for any other claim.
        Returns what was done ("filled: ...", "armed: ...", "lifted: ...", "disarmed")."""
        return str(self.call("fill-volume", namespace=namespace, claim=claim, leaveBytes=leave_bytes))

    def cap_memory(self, namespace: str, pod: str, container: str, limit_bytes: int | None) -> None:
        """From the container's next start on, its memory limit is at most `limit_bytes` (None
        lifts the cap): a program that needs more is OOMKilled at each start."""
        self.call("cap-memory", namespace=namespace, pod=pod, container=container, limitBytes=limit_bytes)

    def stop_store(self, store: str) -> None:
        """Outage of one object store (`s3`, `abs` or `gcs`: stores.STORE_NAMES): it stops and
        stays down until `start_store`."""
        self.call("stop-store", store=store)

    def start_store(self, store: str) -> None:
        self.call("start-store", store=store)

    def stop_s3(self) -> None:
        """S3 outage: `stop_store("s3")`."""
        self.stop_store("s3")

    def start_s3(self) -> None:
        self.start_store("s3")
