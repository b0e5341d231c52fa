"""The supervisor's pass around the planner, with the API faked at our adapter boundary: what it
executes, which events it records and when it writes status."""
from __future__ import annotations

from typing import Any

import pytest

from etcd_operator import actions as a
from etcd_operator.manifests import build_service
from etcd_operator.rechecking import stable_recheck_seconds
from etcd_operator.spec import parse_etcd_cluster
from tests.unit.etcd_operator.etcd_cluster_builders import UID, raw_cluster
from tests.unit.etcd_operator.supervisor_fakes import supervisor_with_fakes as _supervisor


@pytest.mark.parametrize("deleted_with", ["Foreground", "Background"])
def test_a_cluster_being_deleted_is_left_to_the_garbage_collector(deleted_with: str) -> None:
    """Its pods went first (foreground propagation): no MembersLost, nothing recreated."""
    raw = raw_cluster(status={"bootstrapped": True, "phase": "Running"})
    raw["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:00Z"
    if deleted_with == "Foreground":
        raw["metadata"]["finalizers"] = ["foregroundDeletion"]
    supervisor, executor, events = _supervisor(raw)
    for _ in range(3):
        supervisor.reconcile_once()
    assert executor.executed == [] and events.recorded == []


def test_a_deletion_the_cache_has_not_seen_yet_stops_a_report() -> None:
    """The garbage collector deleted the pods (foreground) and the pod watch told us before the
    cluster watch did: the API itself is asked before reporting members lost."""
    raw = raw_cluster(status={"bootstrapped": True, "phase": "Running"})
    cluster = parse_etcd_cluster(raw)
    services = [build_service(cluster, "example"), build_service(cluster, "example-client")]
    supervisor, executor, events = _supervisor(raw, objects=services)
    supervisor.context.clusters.client.server_metadata = {  # type: ignore[attr-defined]
        "deletionTimestamp": "2024-05-01T12:00:00Z", "finalizers": ["foregroundDeletion"]}
    supervisor.reconcile_once()
    supervisor.reconcile_once()
    assert events.recorded == [] and executor.executed == []


def test_a_report_is_one_event_however_many_passes_see_it() -> None:
    raw = raw_cluster({"version": "9.9.9"}, status={})
    supervisor, executor, events = _supervisor(raw)
    for _ in range(5):
        delay = supervisor.reconcile_once()
    assert events.recorded == [("Warning", "InvalidSpec")] and executor.executed == []
    # Nothing to do until the spec changes (an event): re-checked on the stable schedule.
    assert delay == stable_recheck_seconds(10.0, 5)


def test_a_foreign_client_service_fails_the_cluster_with_one_event_and_no_create() -> None:
    raw = raw_cluster(status={})
    foreign = {"metadata": {"name": "example-client", "namespace": "default", "uid": "svc-uid"}}
    supervisor, executor, events = _supervisor(raw, services={"example-client": foreign})
    delays = [supervisor.reconcile_once() for _ in range(5)]
    assert executor.executed == [] and events.recorded == [("Warning", "ServiceNameTaken")]
    assert delays == [stable_recheck_seconds(10.0, n) for n in range(1, 6)]
    status = supervisor.context.clusters.cache.get(("default", "example"))["status"]  # type: ignore[index]
    assert (status["phase"], status["reason"]) == ("Failed", "ServiceNameTaken")


def test_services_of_ours_are_not_looked_up() -> None:
    raw = raw_cluster(status={})
    cluster = parse_etcd_cluster(raw)
    ours = [build_service(cluster, "example"), build_service(cluster, "example-client")]
    supervisor, executor, events = _supervisor(raw, objects=ours)
    supervisor.reconcile_once()
    assert [type(action) for action in executor.executed] == [a.SetDisruptionBudget, a.CreateSeedMember]


def _seed_pod(waiting: str | None) -> dict[str, Any]:
    state = {"waiting": {"reason": waiting, "message": "image not found"}} if waiting else {"running": {}}
    return {
        "metadata": {"name": "example-abcde", "namespace": "default", "uid": "pod-uid",
                     "labels": {"app": "etcd", "etcd_cluster": "example", "etcd_node": "example-abcde"},
                     "ownerReferences": [{"kind": "EtcdCluster", "name": "example", "uid": UID}]},
        "spec": {"containers": [{"name": "etcd", "image": "quay.io/coreos/etcd:v3.6.16"}]},
        "status": {"phase": "Pending", "containerStatuses": [{"name": "etcd", "state": state}]},
    }


def test_a_member_that_does_not_start_is_one_warning_per_incident() -> None:
    raw = raw_cluster(status={})
    cluster = parse_etcd_cluster(raw)
    services = [build_service(cluster, "example"), build_service(cluster, "example-client")]
    supervisor, executor, events = _supervisor(raw, objects=services)
    pods = supervisor.context.kube.pods.cache
    for waiting in ("ErrImagePull", "ErrImagePull", "ImagePullBackOff", "ImagePullBackOff"):
        pods.upsert(_seed_pod(waiting))
        supervisor.reconcile_once()
    assert [r for r in events.recorded if r[1] == "MemberNotStarting"] == [("Warning", "MemberNotStarting")]
    status = supervisor.context.clusters.cache.get(("default", "example"))["status"]  # type: ignore[index]
    blocked = next(c for c in status["conditions"] if c["type"] == "MemberStartBlocked")
    assert (blocked["status"], blocked["reason"]) == ("True", "ImagePullBackOff")
    pods.upsert(_seed_pod(None))  # pulled after all
    supervisor.reconcile_once()
    status = supervisor.context.clusters.cache.get(("default", "example"))["status"]  # type: ignore[index]
    blocked = next(c for c in status["conditions"] if c["type"] == "MemberStartBlocked")
    assert blocked["status"] == "False"
    pods.upsert(_seed_pod("ImagePullBackOff"))  # and lost again: a new incident
    supervisor.reconcile_once()
    assert len([r for r in events.recorded if r[1] == "MemberNotStarting"]) == 2


def test_a_failed_certificate_write_is_one_warning_per_distinct_error() -> None:
    from kube_adapter.errors import Forbidden

    raw = raw_cluster(spec={"size": 3, "TLS": {"issued": {}}}, status={})
    supervisor, executor, events = _supervisor(raw)
    failures = ["secrets is forbidden: cannot create", "secrets is forbidden: cannot create", "exceeded quota: secrets"]
    for message in failures:
        executor.failures[a.IssueCertificates] = Forbidden(message, status=403)
        with pytest.raises(Forbidden):
            supervisor.reconcile_once()
    issued = [action for action in executor.executed if isinstance(action, a.IssueCertificates)]
    assert len(issued) == 3, executor.executed
    warnings = [r for r in events.recorded if r[1] == "CertificateIssueFailed"]
    assert warnings == [("Warning", "CertificateIssueFailed")] * 2, events.recorded


def test_a_changed_report_after_a_waiting_pass_is_news_though_our_status_kept_its_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """While an alarm is raised every pass writes its reason into status, whatever the pass does:
    a report that changes after a pass that only waited is a new event, not taken for the one a
    predecessor's status showed (it hid "no majority agrees" behind an earlier CORRUPT report)."""
    from etcd_common.etcd.alarms import CORRUPT
    from etcd_operator import supervisor as supervisor_module

    plans = iter([a.ReportAlarm(CORRUPT, "the members' keyspace hashes are not known yet"),
                  a.Wait("CORRUPT: asking the members for their hashes again"),
                  a.ReportAlarm(CORRUPT, "no majority of the 3 voting members agrees"),
                  a.ReportAlarm(CORRUPT, "no majority of the 3 voting members agrees")])
    monkeypatch.setattr(supervisor_module, "plan_next_action", lambda observed, policy: next(plans))
    monkeypatch.setattr(supervisor_module, "compute_status", lambda observed, action, **_: {
        "phase": "Running", "reason": "CorruptAlarm", "message": action.describe()})
    supervisor, executor, events = _supervisor(raw_cluster(status={"phase": "Running", "reason": "Running"}))
    for _ in range(4):
        supervisor.reconcile_once()
    assert [r for r in events.recorded if r[1] == "CorruptAlarm"] == [("Warning", "CorruptAlarm")] * 2


def test_a_report_the_predecessors_status_shows_is_not_sent_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A restarted operator whose first pass finds its report in the status it inherits sends no
    second event for it."""
    from etcd_common.etcd.alarms import CORRUPT
    from etcd_operator import supervisor as supervisor_module

    report = a.ReportAlarm(CORRUPT, "no majority of the 3 voting members agrees")
    monkeypatch.setattr(supervisor_module, "plan_next_action", lambda observed, policy: report)
    supervisor, executor, events = _supervisor(raw_cluster(status={"phase": "Running", "reason": "CorruptAlarm"}))
    for _ in range(3):
        supervisor.reconcile_once()
    assert [r for r in events.recorded if r[1] == "CorruptAlarm"] == []
