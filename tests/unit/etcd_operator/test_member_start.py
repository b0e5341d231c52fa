"""Why a member pod does not start, from its container status and FailedMount events: in the
status message, the MemberStartBlocked condition, and one Warning event per incident."""
from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from typing import Any

import pytest

from tests.unit.etcd_operator.etcd_cluster_builders import healthy_cluster, nothing_yet, make_pod, add_pod

from etcd_operator.actions import Wait
from etcd_operator.cluster_status import compute_status
from etcd_operator.member_start import start_problems
from etcd_operator.observed import ObservedCluster, parse_pod

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
POD = "example-abcde"


def _seed_pod(**status: object) -> ObservedCluster:
    """A never-bootstrapped cluster whose seed pod has this container status."""
    observed = nothing_yet()
    pod = parse_pod({
        "metadata": {"name": POD, "uid": "u", "labels": {"etcd_node": POD}},
        "spec": {"containers": [{"name": "etcd", "image": "quay.io/coreos/etcd:v3.6.0"}]},
        "status": {"phase": "Pending", "containerStatuses": [{"name": "etcd", **status}]},
    })
    return dataclasses.replace(observed, pods=(pod,))


def _condition(status: dict[str, Any], kind: str) -> tuple[str, str, str]:
    cond = next(c for c in status["conditions"] if c["type"] == kind)
    return cond["status"], cond["reason"], cond.get("message", "")


@pytest.mark.parametrize(("container_status", "reason", "says"), [
    ({"state": {"waiting": {"reason": "ErrImagePull", "message": "image quay.io/coreos/etcd:v3.6.0 not found"}}},
     "ErrImagePull", "v3.6.0 not found"),
    ({"state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}},
     "ImagePullBackOff", "Back-off pulling image"),
    ({"state": {"waiting": {"reason": "CreateContainerConfigError", "message": 'secret "s" not found'}}},
     "CreateContainerConfigError", 'secret "s" not found'),
    ({"restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s"}},
      "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                                   "message": '{"level":"info"}\n{"msg":"invalid value \\"banana\\" for ETCD_X"}\n'}}},
     "CrashLoopBackOff", 'etcd exited with code 1 (Error): {"msg":"invalid value \\"banana\\" for ETCD_X"}'),
])
def test_the_pods_own_reason_is_in_message_and_condition(container_status: dict[str, object], reason: str, says: str) -> None:
    observed = _seed_pod(**container_status)
    [problem] = start_problems(observed)
    assert (problem.pod, problem.reason) == (POD, reason) and says in problem.message
    status = compute_status(observed, Wait("etcd not reachable yet"), now=NOW)
    assert f"member pod {POD} does not start: {reason}" in status["message"] and says in status["message"]
    assert _condition(status, "MemberStartBlocked")[:2] == ("True", reason)


def test_a_failed_mount_event_is_reported_while_the_pod_sets_up() -> None:
    observed = dataclasses.replace(
        _seed_pod(state={"waiting": {"reason": "ContainerCreating"}}),
        mount_failures={POD: 'MountVolume.SetUp failed for volume "member-peer-tls" : secret "p" not found'})
    [problem] = start_problems(observed)
    assert problem.reason == "FailedMount" and 'secret "p" not found' in problem.message
    status = compute_status(observed, None, now=NOW)
    assert _condition(status, "MemberStartBlocked")[:2] == ("True", "FailedMount")


def test_nothing_is_reported_for_pods_that_start_or_run() -> None:
    assert start_problems(_seed_pod(state={"waiting": {"reason": "ContainerCreating"}})) == ()
    observed = healthy_cluster(3)
    assert start_problems(observed) == ()
    status = compute_status(observed, None, now=NOW)
    assert _condition(status, "MemberStartBlocked")[:2] == ("False", "MembersStarting")
    # An old FailedMount event no longer matters once the pod runs.
    running = dataclasses.replace(observed, mount_failures={observed.pods[0].name: "secret not found"})
    assert start_problems(running) == ()


def test_pulling_and_backing_off_are_one_incident() -> None:
    [pulling] = start_problems(_seed_pod(state={"waiting": {"reason": "ErrImagePull"}}))
    [backing_off] = start_problems(_seed_pod(state={"waiting": {"reason": "ImagePullBackOff"}}))
    assert pulling.incident == backing_off.incident


def test_a_learner_pod_that_cannot_pull_is_named() -> None:
    observed = healthy_cluster(3)
    stuck = dataclasses.replace(make_pod(observed.cluster, "example-new01", index=9, ready=False),
                                phase="Pending", waiting_reason="ImagePullBackOff", waiting_message="no such image")
    observed = add_pod(observed, stuck)
    assert [(p.pod, p.reason) for p in start_problems(observed)] == [("example-new01", "ImagePullBackOff")]
