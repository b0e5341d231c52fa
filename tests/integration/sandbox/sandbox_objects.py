"""Helpers the sandbox integration tests share: apply and read objects through kubectl, pod states."""
from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Callable
from typing import Any

from kube_sandbox.testing import Sandbox, wait_for

Obj = dict[str, Any]


def wait_for_object(condition: Callable[[], Obj | None], *, timeout: float, what: str) -> Obj:
    """wait_for, typed for conditions that return the object they waited for."""
    found = wait_for(condition, timeout=timeout, what=what)
    assert found is not None
    return found


def apply(sandbox: Sandbox, namespace: str, manifest: str | Obj) -> None:
    text = json.dumps(manifest) if isinstance(manifest, dict) else textwrap.dedent(manifest)
    sandbox.kubectl("apply", "-n", namespace, "-f", "-", input=text)


def get(sandbox: Sandbox, namespace: str, kind: str, name: str = "", selector: str = "") -> Any:
    """The object (or list) as JSON, or None when it does not exist. namespace "" for cluster objects."""
    args = ["get", *(["-n", namespace] if namespace else []), kind, *([name] if name else []),
            *(["-l", selector] if selector else []), "-o", "json"]
    result = sandbox.kubectl(*args, check=False)
    if result.returncode != 0:
        if "NotFound" in result.stderr:
            return None
        raise AssertionError(f"kubectl {' '.join(args)}: {result.stderr}")
    return json.loads(result.stdout)


def condition_status(obj: Obj, kind: str) -> str | None:
    """The status ("True"/"False"/"Unknown") of the condition `kind` of a pod or node, None if absent."""
    return next((str(c["status"]) for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind),
                None)


def is_ready(pod: Obj) -> bool:
    return condition_status(pod, "Ready") == "True"


def running_and_ready(sandbox: Sandbox, namespace: str, name: str) -> Obj | None:
    pod = get(sandbox, namespace, "pod", name)
    return pod if pod and pod["status"].get("phase") == "Running" and is_ready(pod) else None


def phase_is(sandbox: Sandbox, namespace: str, name: str, phase: str) -> Obj | None:
    pod = get(sandbox, namespace, "pod", name)
    return pod if pod and pod["status"].get("phase") == phase else None


def container_status(pod: Obj, index: int = 0) -> Obj:
    statuses = pod["status"].get("containerStatuses") or [{}]
    status: Obj = statuses[index]
    return status


def logs(sandbox: Sandbox, namespace: str, name: str, *args: str) -> str:
    return sandbox.kubectl("logs", "-n", namespace, name, *args).stdout


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def busybox_pod(name: str, script: str, *, volumes: list[Obj] | None = None, mounts: list[Obj] | None = None,
                restart_policy: str = "Always", grace: int = 30, node: str = "", **container: Any) -> Obj:
    """A busybox pod running `script`; `node` pins it to one node by its hostname label."""
    spec: Obj = {
        "restartPolicy": restart_policy, "terminationGracePeriodSeconds": grace, "volumes": volumes or [],
        "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", script],
                        "volumeMounts": mounts or [], **container}],
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}}, "spec": spec}
