"""The kubelet publishes its pod status again when someone else changed it in the API: the
node-lifecycle controller marks every pod of a node whose heartbeat lapsed (an apiserver restart
can make it lapse) Ready=False, and a kubelet comparing only with its own last report left the pod
unready for good (an operator's rollout then never completed)."""
from __future__ import annotations

from typing import Any

from kube_sandbox.kubelet.pods import status_overwritten


def _status(ready: str, phase: str = "Running") -> dict[str, Any]:
    return {"phase": phase, "conditions": [
        {"type": "PodScheduled", "status": "True"},
        {"type": "ContainersReady", "status": ready},
        {"type": "Ready", "status": ready},
    ]}


def test_ready_set_false_by_the_node_lifecycle_controller_is_published_again() -> None:
    published = _status("True")
    pod = {"status": {**_status("True"), "conditions": [
        {"type": "PodScheduled", "status": "True"},
        {"type": "ContainersReady", "status": "True"},
        {"type": "Ready", "status": "False", "reason": "NodeNotReady"},
    ]}}
    assert status_overwritten(published, pod)


def test_the_kubelets_own_status_echoed_by_the_watch_is_left_alone() -> None:
    published = _status("True")
    echoed = {"status": {**_status("True"), "podIP": "127.1.0.5", "startTime": "2026-11-29T00:00:00Z"}}
    assert not status_overwritten(published, echoed)


def test_a_phase_changed_in_the_api_is_published_again() -> None:
    assert status_overwritten(_status("True"), {"status": _status("True", phase="Pending")})


def test_nothing_published_yet_is_not_an_overwrite() -> None:
    assert not status_overwritten(None, {"status": _status("False")})
