"""The only place the kubelet talks to the Kubernetes API: raw JSON dicts over the client's transport.

Raw dicts, not generated models, because the kubelet copies whole pod specs and statuses around
and must not lose fields a model does not know. HTTP errors become the exceptions below.
"""
from __future__ import annotations

import copy
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_SECONDS = 15.0
CONNECTION_POOL_SIZE = 64  # one connection per watch plus pod workers
JSON = "application/json"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
MERGE_PATCH = "application/merge-patch+json"


class ApiError(Exception):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    """409: the object exists already, or a precondition/resourceVersion did not match."""


class Gone(ApiError):
    """410: the watch's resourceVersion is too old; relist."""


class Forbidden(ApiError):
    pass


class Unavailable(ApiError):
    """The apiserver could not be reached or answered 5xx/429; retry later."""


_BY_STATUS: dict[int, type[ApiError]] = {403: Forbidden, 404: NotFound, 409: Conflict, 410: Gone}


def error_for(status: int, body: bytes | str | None) -> ApiError:
    reason, message = "", ""
    try:
        parsed = json.loads(body or b"{}")
        reason, message = parsed.get("reason", ""), parsed.get("message", "")
    except (ValueError, AttributeError):
        message = (body.decode(errors="replace") if isinstance(body, bytes) else str(body or ""))[:500]
    if status >= 500 or status == 429 or status == 0:
        return Unavailable(status, reason or "Unavailable", message)
    return _BY_STATUS.get(status, ApiError)(status, reason, message)


def pod_path(namespace: str, name: str = "", subresource: str = "") -> str:
    return object_path("", "v1", "pods", namespace, name, subresource)


def object_path(group: str, version: str, plural: str, namespace: str = "", name: str = "",
                subresource: str = "") -> str:
    path = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    if namespace:
        path += f"/namespaces/{quote(namespace, safe='')}"
    path += f"/{plural}"
    if name:
        path += f"/{quote(name, safe='')}"
    if subresource:
        path += f"/{subresource}"
    return path


class KubeApi:
    """Thin JSON client reusing the given ApiClient's configuration (address, CA, token)."""

    def __init__(self, api_client: k8s.ApiClient) -> None:
        configuration = copy.copy(api_client.configuration)
        configuration.connection_pool_maxsize = CONNECTION_POOL_SIZE
        self._client = k8s.ApiClient(configuration)
        self._watches: set[Any] = set()
        self._lock = threading.Lock()

    def close(self) -> None:
        """Interrupt open watches (so their threads end promptly) and close connections."""
        with self._lock:
            watches = list(self._watches)
        for raw in watches:
            try:
                raw.shutdown()
            except Exception:  # already finished
                pass
        try:
            self._client.close()  # type: ignore[no-untyped-call]
        except Exception:  # closing is best effort at shutdown
            log.debug("closing the API client failed", exc_info=True)

    def _send(self, method: str, path: str, *, query: dict[str, Any] | None = None, body: Any = None,
              content_type: str = JSON, timeout: float | tuple[float, float] = REQUEST_TIMEOUT_SECONDS) -> Any:
        params = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        headers = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            method, url, headers, body, _ = self._client.param_serialize(
                method=method, resource_path=path, query_params=params, header_params=headers, body=body,
                auth_settings=["BearerToken"],
            )
            return self._client.rest_client.request(  # type: ignore[no-untyped-call]
                method, url, headers=headers, body=body, _request_timeout=timeout)
        except ApiException as e:
            raise error_for(e.status or 0, e.body or e.reason) from e
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise Unavailable(0, "Unavailable", f"{method} {path}: {e}") from e

    def request(self, method: str, path: str, *, query: dict[str, Any] | None = None, body: Any = None,
                content_type: str = JSON, timeout: float = REQUEST_TIMEOUT_SECONDS) -> dict[str, Any]:
        response = self._send(method, path, query=query, body=body, content_type=content_type, timeout=timeout)
        try:
            data = response.response.data
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise Unavailable(0, "Unavailable", f"{method} {path}: {e}") from e
        if not 200 <= response.status < 300:
            raise error_for(response.status, data)
        result: dict[str, Any] = json.loads(data) if data else {}
        return result

    def get(self, path: str, **query: Any) -> dict[str, Any]:
        return self.request("GET", path, query=query)

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", path, body=body)

    def patch(self, path: str, body: dict[str, Any], *, content_type: str = STRATEGIC_MERGE) -> dict[str, Any]:
        return self.request("PATCH", path, body=body, content_type=content_type)

    def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("PUT", path, body=body)

    def delete(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.request("DELETE", path, body=body)

    def watch(self, path: str, resource_version: str, timeout_seconds: int) -> Iterator[dict[str, Any]]:
        """Watch events ({type, object}) from `resource_version` until the server ends the call.

        ERROR events are raised as ApiError (410 as Gone)."""
        query = {"watch": "true", "resourceVersion": resource_version, "timeoutSeconds": timeout_seconds,
                 "allowWatchBookmarks": "true"}
        response = self._send("GET", path, query=query, timeout=(REQUEST_TIMEOUT_SECONDS, timeout_seconds + 15))
        raw = response.response
        with self._lock:
            self._watches.add(raw)
        try:
            if not 200 <= response.status < 300:
                raise error_for(response.status, raw.data)
            buffer = b""
            for chunk in raw.stream(amt=None, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        raise error_for(int(status.get("code") or 500), json.dumps(status))
                    yield event
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise Unavailable(0, "Unavailable", f"watch {path}: {e}") from e
        finally:
            with self._lock:
                self._watches.discard(raw)
            raw.close()
            raw.release_conn()


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
