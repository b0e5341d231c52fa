"""Why a member pod does not start, from its container status and FailedMount events: in the
status message, the MemberStartBlocked condition, and one Warning event per incident."""
from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from etcd_operator.actions import Wait
from etcd_operator.member_start import start_problems
from etcd_operator.observed import ObservedCluster, parse_pod
from etcd_operator.status import compute_status
from tests.unit.etcd_operator.etcd_cluster_builders import add_pod, healthy_cluster, make_pod, nothing_yet

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
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
    ({"restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s"}},
      "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}},
     "CrashLoopBackOff", "etcd exited with code 137 (OOMKilled); it needs more memory than its limit "
                         "(spec.pod.resources.limits.memory) allows"),
])
def test_the_pods_own_reason_is_in_message_and_condition(container_status: dict[str, object], reason: str, says: str) -> None:
    observed = _seed_pod(**container_status)
    [problem] = start_problems(observed)
    assert (problem.pod, problem.reason) == (POD, reason) and says in problem.message
    status = compute_status(observed, Wait("etcd not reachable yet"), now=NOW)
    assert f"member pod {POD} does not start: {reason}" in status["message"] and says in status["message"]
    assert _condition(status, "MemberStartBlocked")[:2] == ("True", reason)


def test_the_memory_advice_survives_a_long_last_log_line() -> None:
    """etcd's last line before an OOM kill is often a long JSON log line: it is clipped, the advice
    naming spec.pod.resources.limits.memory is not (measured in the sandbox: it was cut off)."""
    line = '{"level":"info","msg":"now serving peer/client/metrics","urls":["' + "x" * 600 + '"]}'
    observed = _seed_pod(restartCount=4, state={"waiting": {"reason": "CrashLoopBackOff"}},
                         lastState={"terminated": {"exitCode": 137, "reason": "OOMKilled", "message": line}})
    [problem] = start_problems(observed)
    assert problem.message.startswith('etcd exited with code 137 (OOMKilled): {"level":"info"'), problem.message
    assert problem.message.endswith("(spec.pod.resources.limits.memory) allows") and "..." in problem.message
    assert len(problem.message) <= 400, len(problem.message)


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


def test_a_crash_loop_stays_one_incident_while_the_kubelet_runs_it_again() -> None:
    """Between back-offs the container runs for a moment (no waiting reason): still the crash loop,
    so MemberStartBlocked does not flap to False and back (a new incident, a new event)."""
    crashed = {"terminated": {"exitCode": 1, "reason": "Error", "message": "invalid value"}}
    [waiting] = start_problems(_seed_pod(restartCount=3, lastState=crashed,
                                         state={"waiting": {"reason": "CrashLoopBackOff"}}))
    [running] = start_problems(_seed_pod(restartCount=4, lastState=crashed, state={"running": {}}))
    assert running.incident == waiting.incident and running.reason == "CrashLoopBackOff", running
    assert "etcd exited with code 1 (Error)" in running.message
    # One crash is not a loop; nor is a member running again that exited cleanly.
    assert start_problems(_seed_pod(restartCount=1, lastState=crashed, state={"running": {}})) == ()
    clean = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    assert start_problems(_seed_pod(restartCount=5, lastState=clean, state={"running": {}})) == ()


def test_a_learner_pod_that_cannot_pull_is_named() -> None:
    observed = healthy_cluster(3)
    stuck = dataclasses.replace(make_pod(observed.cluster, "example-new01", index=9, ready=False),
                                phase="Pending", waiting_reason="ImagePullBackOff", waiting_message="no such image")
    observed = add_pod(observed, stuck)
    assert [(p.pod, p.reason) for p in start_problems(observed)] == [("example-new01", "ImagePullBackOff")]


def _unschedulable_seed(age_seconds: float) -> ObservedCluster:
    created = datetime(2024, 5, 1, 11, 59, 0, tzinfo=UTC)
    observed = nothing_yet()
    pod = parse_pod({
        "metadata": {"name": POD, "uid": "u", "labels": {"etcd_node": POD},
                     "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ")},
        "spec": {"containers": [{"name": "etcd", "image": "quay.io/coreos/etcd:v3.6.16"}]},
        "status": {"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: etcd}, "
                       "2 node(s) didn't match Pod's node affinity/selector."}]},
    })
    return dataclasses.replace(observed, pods=(pod,), observed_at=created + timedelta(seconds=age_seconds))


def test_a_pod_no_node_fits_is_reported_in_the_schedulers_words() -> None:
    observed = _unschedulable_seed(age_seconds=30)
    assert observed.pods[0].unschedulable and observed.pods[0].never_ran
    [problem] = start_problems(observed)
    assert problem.reason == "Unschedulable" and "untolerated taint {dedicated: etcd}" in problem.message
    status = compute_status(observed, Wait("etcd not reachable yet"), now=NOW)
    assert _condition(status, "MemberStartBlocked")[:2] == ("True", "Unschedulable")
    assert f"member pod {POD} does not start: Unschedulable: 0/3 nodes are available" in status["message"]


def test_a_pod_just_created_is_given_a_moment_to_be_scheduled() -> None:
    # e.g. "pod has unbound immediate PersistentVolumeClaims" until its claim is bound
    assert start_problems(_unschedulable_seed(age_seconds=2)) == ()


def test_a_scheduled_pod_is_not_unschedulable() -> None:
    pod = parse_pod({"metadata": {"name": POD}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True"}]}})
    assert not pod.unschedulable and pod.unschedulable_message is None and not pod.never_ran


def _seed_pod_with_init(*init_statuses: dict[str, Any]) -> ObservedCluster:
    """A restore's seed pod: its etcd container waits for the init containers."""
    pod = parse_pod({
        "metadata": {"name": POD, "uid": "u", "labels": {"etcd_node": POD}},
        "spec": {"containers": [{"name": "etcd", "image": "quay.io/coreos/etcd:v3.4.23"}]},
        "status": {"phase": "Pending", "initContainerStatuses": list(init_statuses),
                   "containerStatuses": [{"name": "etcd", "state": {"waiting": {"reason": "PodInitializing"}}}]},
    })
    return dataclasses.replace(nothing_yet(), pods=(pod,))


@pytest.mark.parametrize(("init_statuses", "reason", "says"), [
    ([{"name": "restore-fetch", "state": {"terminated": {"exitCode": 0}}},
      {"name": "restore-snapshot", "restartCount": 18, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
       "lastState": {"terminated": {"exitCode": 128, "message": "Error: unknown command \"snapshot\"\n"}}}],
     "CrashLoopBackOff", 'init container restore-snapshot exited with code 128: Error: unknown command "snapshot"'),
    ([{"name": "restore-fetch", "state": {"terminated": {"exitCode": 0}}},
      {"name": "restore-snapshot", "state": {"waiting": {"reason": "ImagePullBackOff",
                                                          "message": "Back-off pulling image etcd:v3.6.0"}}}],
     "ImagePullBackOff", "init container restore-snapshot: Back-off pulling image etcd:v3.6.0"),
])
def test_a_failing_init_container_is_the_pods_reason(init_statuses: list[dict[str, Any]], reason: str,
                                                     says: str) -> None:
    status = compute_status(_seed_pod_with_init(*init_statuses), None, now=NOW)
    assert _condition(status, "MemberStartBlocked") == ("True", reason, f"member pod {POD} does not start: "
                                                                          f"{reason}: {says}")
    assert says in status["message"]


def test_an_init_container_waiting_its_turn_is_no_problem() -> None:
    observed = _seed_pod_with_init({"name": "restore-fetch", "state": {"running": {}}},
                                   {"name": "restore-snapshot", "state": {"waiting": {"reason": "PodInitializing"}}})
    assert start_problems(observed) == ()
