"""List-then-watch loops that survive apiserver restarts: 410 Gone relists, other errors back off."""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kube_sandbox.kubelet.kube_api import ApiError, Gone, KubeApi

log = logging.getLogger(__name__)

WATCH_TIMEOUT_SECONDS = 60
RETRY_SECONDS = 1.0

OnList = Callable[[list[dict[str, Any]]], None]  # the full current set, after every (re)list
OnEvent = Callable[[str, dict[str, Any]], None]  # ADDED / MODIFIED / DELETED, object


def list_and_watch(api: KubeApi, path: str, stop: threading.Event, on_list: OnList, on_event: OnEvent,
                   what: str) -> None:
    """Run until `stop` is set. Handler errors are logged and never end the loop."""
    resource_version: str | None = None
    while not stop.is_set():
        try:
            if resource_version is None:
                listing = api.get(path)
                resource_version = listing["metadata"]["resourceVersion"]
                _guarded(on_list, what, listing.get("items") or [])
            for event in api.watch(path, resource_version, WATCH_TIMEOUT_SECONDS):
                if stop.is_set():
                    return
                obj = event.get("object") or {}
                resource_version = (obj.get("metadata") or {}).get("resourceVersion") or resource_version
                if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    _guarded(on_event, what, event["type"], obj)
        except Gone:
            log.info("watch of %s expired (410); relisting", what)
            resource_version = None
        except ApiError as e:
            if stop.is_set():
                return
            log.warning("watch of %s failed (%s); retrying in %.0fs", what, e, RETRY_SECONDS)
            stop.wait(RETRY_SECONDS)
        except Exception:
            if stop.is_set():
                return
            log.exception("watch of %s failed; relisting in %.0fs", what, RETRY_SECONDS)
            resource_version = None
            stop.wait(RETRY_SECONDS)


def _guarded(handler: Callable[..., None], what: str, *args: Any) -> None:
    try:
        handler(*args)
    except Exception:
        log.exception("handling %s failed; continuing with the next one", what)
