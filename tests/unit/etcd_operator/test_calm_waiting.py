"""Calm when waiting: waiting passes back off (bounded), reports and errors count incidents rather
than passes, a failed health call is "health unknown" (never quorum loss), and status is written
only when it changed, against the resourceVersion it was computed from."""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from etcd_common.api.etcd_cluster import EtcdCluster
from etcd_common.etcd import etcdctl as ctl
from etcd_common.etcd import types as etcd_types
from etcd_operator import actions as a
from etcd_operator.manifests import build_service, member_client_url
from etcd_operator.planning import plan_next_action
from etcd_operator.rechecking import WAIT_FAST_PASSES, WAIT_MAX_SECONDS, WAIT_POLL_SECONDS
from etcd_operator.spec import parse_etcd_cluster
from etcd_operator.status import compute_status
from kube_adapter.errors import Forbidden
from tests.unit.etcd_operator.etcd_cluster_builders import UID, make_cluster, raw_cluster
from tests.unit.etcd_operator.observing_fakes import FakeClient, FakeEtcd, observe
from tests.unit.etcd_operator.supervisor_fakes import FakeClusterApi, supervisor_with_fakes

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


class HealthTimesOut(FakeEtcd):
    def probe(self, cluster: EtcdCluster, endpoints: Sequence[str], *, timeout_seconds: float = 2.0) -> Any:
        etcd = self

        class Client(FakeClient):
            def endpoint_health(self, cluster_id: int = 0) -> list[etcd_types.EndpointHealth]:
                etcd.asked.append(("endpoint health", list(endpoints)))
                raise ctl.Unreachable("context deadline exceeded")
        return Client(self, endpoints)


def test_a_failed_health_call_is_health_unknown_not_quorum_loss() -> None:
    cluster = make_cluster(status={"bootstrapped": True, "phase": "Running"})
    observed = observe(cluster, HealthTimesOut(), {member_client_url(cluster, m) for m in
                                                    ("example-aaaaa", "example-bbbbb", "example-ccccc")})
    assert observed.health_error and "deadline" in observed.health_error
    observed = dataclasses.replace(observed, services=frozenset({"example", "example-client"}))
    action = plan_next_action(observed)
    assert isinstance(action, a.Wait) and "health unknown" in action.reason, action
    status = compute_status(observed, action, now=NOW)
    available = next(c for c in status["conditions"] if c["type"] == "Available")
    assert (available["status"], available["reason"]) == ("Unknown", "HealthUnknown")
    assert status["phase"] == "Running" and status["reason"] == "HealthUnknown", status


def _waiting_supervisor() -> Any:
    """A cluster whose only pod never answers: every pass is the same Wait."""
    raw = raw_cluster(status={"bootstrapped": True})
    cluster = parse_etcd_cluster(raw)
    services = [build_service(cluster, "example"), build_service(cluster, "example-client")]
    supervisor, executor, events = supervisor_with_fakes(raw, objects=services)
    supervisor.context.kube.pods.cache.upsert({
        "metadata": {"name": "example-abcde", "namespace": "default", "uid": "p",
                     "labels": {"app": "etcd", "etcd_cluster": "example", "etcd_node": "example-abcde"},
                     "ownerReferences": [{"kind": "EtcdCluster", "name": "example", "uid": UID}]},
        "spec": {"containers": [{"name": "etcd", "image": "quay.io/coreos/etcd:v3.6.16"}]},
        "status": {"phase": "Pending"},
    })
    return supervisor


def test_the_same_wait_backs_off_up_to_a_bound() -> None:
    supervisor = _waiting_supervisor()
    delays = [supervisor.reconcile_once() for _ in range(WAIT_FAST_PASSES + 8)]
    assert delays[:WAIT_FAST_PASSES] == [WAIT_POLL_SECONDS] * WAIT_FAST_PASSES
    assert delays[0] == WAIT_POLL_SECONDS
    assert delays == sorted(delays), delays
    assert delays[-1] == WAIT_MAX_SECONDS > WAIT_POLL_SECONDS, delays


def test_a_report_is_counted_once_as_an_error() -> None:
    raw = raw_cluster({"version": "9.9.9"}, status={})
    supervisor, executor, events = supervisor_with_fakes(raw)
    for _ in range(5):
        supervisor.reconcile_once()
    assert supervisor.context.metrics.errors_total.labels(reason="invalid_spec")._value.get() == 1


def test_the_same_failure_in_a_row_is_one_error() -> None:
    supervisor = _waiting_supervisor()
    error = Forbidden("pods is forbidden: User cannot create")
    for _ in range(3):
        supervisor._count_pass(0.1, error)
    supervisor._count_pass(0.1, None)
    supervisor._count_pass(0.1, error)
    assert supervisor.context.metrics.errors_total.labels(reason="kube_api")._value.get() == 2


def test_a_crashing_pass_is_said_in_status_once_per_failure() -> None:
    """A pass that crashes (a bug) may never reach its status write: status.lastError says so, once
    per new failure; API and etcd failures go through the normal status write instead."""
    supervisor = _waiting_supervisor()
    api: FakeClusterApi = supervisor.context.clusters.client
    crash = KeyError("members")
    for _ in range(3):
        supervisor._count_pass(0.1, crash)
    assert [status for status, _ in api.patches] == [
        {"lastError": "the operator's pass failed: KeyError: 'members'; it retries (its log has the traceback)"}]
    supervisor._count_pass(0.1, Forbidden("pods is forbidden"))
    assert len(api.patches) == 1, "an API failure is not a crash"


def test_status_is_written_against_its_resource_version_and_only_when_changed() -> None:
    raw = raw_cluster({"version": "9.9.9"}, status={})
    raw["metadata"]["resourceVersion"] = "100"
    supervisor, executor, events = supervisor_with_fakes(raw)
    api: FakeClusterApi = supervisor.context.clusters.client
    supervisor.reconcile_once()
    supervisor.reconcile_once()
    assert [version for _, version in api.patches] == ["100"], api.patches
    # A newer writer changed the object; our copy is stale: no overwrite, no failed pass.
    raw2 = {**supervisor.context.clusters.cache.get(("default", "example")), "status": {}}
    supervisor.context.clusters.cache.upsert(raw2)
    api.server_version = "999"
    delay = supervisor.reconcile_once()
    assert len(api.patches) == 2 and delay > 0
