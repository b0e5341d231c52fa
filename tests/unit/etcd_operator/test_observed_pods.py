"""Parsing raw pod/PVC dicts into observations, and the facts derived from an observation."""
from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from etcd_common.api import constants as c
from etcd_common.api.versions import EtcdVersion
from etcd_common.etcd.types import EndpointStatus, Member
from etcd_operator.manifests import build_member_pod, build_member_pvc
from etcd_operator.observed import (
    MemberHealth,
    as_utc,
    format_timestamp,
    new_name_suffix,
    parse_pod,
    parse_pvc,
    parse_timestamp,
    version_from_image,
)
from tests.unit.etcd_operator.etcd_cluster_builders import PVC_SPEC, healthy_cluster, make_cluster, member_id, name, unhealthy


def _api_pod(status: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    """A pod as the API returns it: our manifest plus server-set metadata and a status."""
    cluster = make_cluster()
    pod = build_member_pod(cluster, "example-abcde", state="existing", initial_cluster=[])
    pod["metadata"].update({"creationTimestamp": "2024-05-01T12:00:00Z", "uid": "p-1", **metadata})
    pod["status"] = status
    return pod


RUNNING = {
    "phase": "Running",
    "podIP": "127.1.0.7",
    "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
    "containerStatuses": [{"name": "etcd", "ready": True, "restartCount": 2, "state": {"running": {}},
                           "lastState": {"terminated": {"reason": "Error", "exitCode": 1}}}],
}


def test_parse_running_pod() -> None:
    pod = parse_pod(_api_pod(RUNNING))
    assert pod.name == pod.member_name == "example-abcde"
    assert (pod.phase, pod.ready, pod.deleting, pod.ip) == ("Running", True, False, "127.1.0.7")
    assert pod.created_at == datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    assert pod.image == "quay.io/coreos/etcd:v3.6.16" and pod.etcd_version == EtcdVersion(3, 6, 16)
    assert pod.initial_cluster_state == "existing"
    assert pod.pod_policy_hash and pod.restart_count == 2 and pod.last_termination_reason == "Error"
    assert pod.problem is None and not pod.never_ran


@pytest.mark.parametrize("status, metadata, check", [
    pytest.param({"phase": "Pending", "containerStatuses": [
        {"name": "etcd", "restartCount": 0, "state": {"waiting": {"reason": "ErrImagePull", "message": "not found"}}}]},
        {}, lambda p: p.image_pull_failed and p.never_ran and p.problem == "ErrImagePull: not found",
        id="image-pull-failed"),
    pytest.param({"phase": "Running", "containerStatuses": [
        {"name": "etcd", "restartCount": 5, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]},
        {}, lambda p: p.waiting_reason == "CrashLoopBackOff" and not p.ready and not p.never_ran, id="crashloop"),
    pytest.param({"phase": "Pending", "containerStatuses": [
        {"name": "etcd", "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}]},
        {}, lambda p: p.problem is None, id="container-creating-is-no-problem"),
    pytest.param({"phase": "Failed", "reason": "Evicted"}, {}, lambda p: p.terminal and p.problem == "phase Failed",
                 id="evicted"),
    pytest.param(RUNNING, {"deletionTimestamp": "2024-05-01T12:05:00Z"}, lambda p: p.deleting, id="terminating"),
    pytest.param({}, {}, lambda p: p.phase == "Pending" and not p.ready and p.ip is None, id="no-status-yet"),
    pytest.param(RUNNING, {"annotations": {}}, lambda p: p.etcd_version == EtcdVersion(3, 6, 16)
                 and p.initial_cluster_state is None, id="version-from-image-without-annotations"),
])
def test_parse_pod_states(status: dict[str, Any], metadata: dict[str, Any], check: Any) -> None:
    assert check(parse_pod(_api_pod(status, **metadata)))


def test_parse_coreos_pod() -> None:
    """A pod made by the CoreOS operator: bare `etcd.version` annotation, no state annotation."""
    pod = parse_pod({
        "metadata": {"name": "example-etcd-cluster-dp8nqtjznc", "annotations": {"etcd.version": "3.2.13"},
                     "labels": {"app": "etcd", "etcd_cluster": "example-etcd-cluster",
                                "etcd_node": "example-etcd-cluster-dp8nqtjznc"}},
        "spec": {"containers": [{"name": "etcd", "image": "quay.io/coreos/etcd:v3.2.13"}]},
        "status": {"phase": "Running"},
    })
    assert pod.member_name == "example-etcd-cluster-dp8nqtjznc"
    assert pod.etcd_version == EtcdVersion(3, 2, 13) and pod.pod_policy_hash is None


def test_parse_pvc() -> None:
    cluster = make_cluster({"pod": {"persistentVolumeClaimSpec": PVC_SPEC}})
    raw = build_member_pvc(cluster, "example-abcde")
    pvc = parse_pvc(raw)
    assert (pvc.name, pvc.member_name, pvc.deleting) == ("example-abcde", "example-abcde", False)
    raw["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:00Z"
    assert parse_pvc(raw).deleting


@pytest.mark.parametrize("image, version", [
    ("quay.io/coreos/etcd:v3.5.1", EtcdVersion(3, 5, 1)),
    ("registry:5000/etcd:3.4.23", EtcdVersion(3, 4, 23)),
    ("registry:5000/etcd", None),
    ("quay.io/coreos/etcd@sha256:abc", None),
    ("quay.io/coreos/etcd:latest", None),
])
def test_version_from_image(image: str, version: EtcdVersion | None) -> None:
    assert version_from_image(image) == version


def test_parse_timestamp_accepts_client_serialisation() -> None:
    assert parse_timestamp("2024-05-01T12:00:00+00:00") == parse_timestamp("2024-05-01T12:00:00Z")
    assert parse_timestamp("yesterday") is None and parse_timestamp(None) is None


def test_format_timestamp_writes_utc_whole_seconds_that_parse_back() -> None:
    """What the status, annotations and certificate messages write: naive is UTC, offsets are
    converted, fractions dropped, the year always four digits (RFC 3339)."""
    assert format_timestamp(datetime(2024, 1, 2, 3, 4, 5, 999)) == "2024-01-02T03:04:05Z"
    assert format_timestamp(datetime(2024, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2)))) == "2024-01-02T03:04:05Z"
    assert format_timestamp(datetime(1, 1, 1, tzinfo=UTC)) == "0001-01-01T00:00:00Z"
    moment = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_timestamp(format_timestamp(moment)) == moment
    assert as_utc(datetime(2024, 5, 1, 12)) == moment and as_utc(moment) is moment


def test_unstarted_member_named_from_peer_url() -> None:
    member = Member(0xABC, "", ("http://example-zz9zz.example.default.svc:2380",))
    assert not member.started and member.member_name == "example-zz9zz" and member.hex_id == "abc"
    assert Member(0xABC, "", ("http://10.0.0.1:2380",)).member_name == "unstarted-abc"


def test_name_suffix_shape() -> None:
    suffixes = {new_name_suffix() for _ in range(50)}
    assert all(re.fullmatch(f"[a-z0-9]{{{c.NAME_SUFFIX_LENGTH}}}", s) for s in suffixes)
    assert len(suffixes) > 1


def test_quorum_and_leader() -> None:
    observed = healthy_cluster(5, leader=3)
    assert observed.has_quorum and observed.quorum == 3
    assert observed.leader is not None and observed.leader.member_name == name(3)
    assert unhealthy(observed, name(1), name(2)).has_quorum
    assert not unhealthy(observed, name(1), name(2), name(3)).has_quorum


def test_health_missing_counts_as_unhealthy() -> None:
    observed = dataclasses.replace(healthy_cluster(3), health={name(1): MemberHealth(True)})
    assert not observed.has_quorum and len(observed.unhealthy_voters) == 2


def test_leader_is_the_majority_report_of_a_current_member() -> None:
    observed = healthy_cluster(3, leader=1)
    statuses = dict(observed.endpoint_status)
    statuses[name(3)] = EndpointStatus(member_id(3), 0xDEAD, "3.5.1")  # stale view, not a member
    assert dataclasses.replace(observed, endpoint_status=statuses).leader_id == member_id(1)
    assert dataclasses.replace(observed, endpoint_status={}).leader is None


def test_learners_do_not_count_for_quorum() -> None:
    observed = healthy_cluster(1, size=2)
    learner = Member(7, "", ("http://example-zz9zz.example.default.svc:2380",), is_learner=True)
    observed = dataclasses.replace(observed, members=(*(observed.members or ()), learner))
    assert observed.quorum == 1 and observed.has_quorum
    assert observed.initial_cluster()[-1] == ("example-zz9zz", "http://example-zz9zz.example.default.svc:2380")


def test_pod_age() -> None:
    observed = healthy_cluster(1)
    pod = observed.pods[0]
    assert observed.pod_age_seconds(pod) == 59 * 60
    assert dataclasses.replace(observed, observed_at=None).pod_age_seconds(pod) is None


def test_an_in_place_restart_is_pending_until_the_restart_count_grows() -> None:
    pod = _api_pod(RUNNING, deletionTimestamp=None)
    pod["metadata"]["annotations"].update({c.ANNOTATION_RESTARTED_AT: "2024-05-01T12:05:00Z",
                                           c.ANNOTATION_RESTARTED_FROM_COUNT: "2"})
    observed = parse_pod(pod)
    assert observed.restarted_at == datetime(2024, 5, 1, 12, 5, tzinfo=UTC) and observed.restarted_from_count == 2
    assert observed.restart_pending, "restart count 2 is the count before the image change"
    restarted = dataclasses.replace(observed, restart_count=3)
    assert not restarted.restart_pending
    unpullable = dataclasses.replace(observed, waiting_reason="ErrImagePull")
    assert not unpullable.restart_pending, "an image that cannot be pulled never restarts it"
    assert parse_pod(_api_pod(RUNNING)).restarted_from_count is None


def test_a_terminating_pod_carries_the_end_of_its_grace_period() -> None:
    observed = parse_pod(_api_pod(RUNNING, deletionTimestamp="2024-05-01T12:00:30Z"))
    assert observed.deleting and observed.deletion_deadline == datetime(2024, 5, 1, 12, 0, 30, tzinfo=UTC)


def test_a_volume_marked_leaving_is_read_as_such() -> None:
    cluster = make_cluster({"size": 3, "pod": {"persistentVolumeClaimSpec": PVC_SPEC}})
    pvc = build_member_pvc(cluster, "example-abcde")
    assert not parse_pvc(pvc).leaving
    pvc["metadata"].setdefault("annotations", {})[c.ANNOTATION_LEAVING_AT] = "2024-05-01T12:00:00Z"
    assert parse_pvc(pvc).leaving
