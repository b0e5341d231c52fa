"""Leader fencing in the supervisor: no action, status write or event unless the lease is
surely held, and no action unless it stays held for as long as the action may take."""
from __future__ import annotations

from etcd_operator.supervisor import ACTION_MAX_SECONDS
from tests.unit.etcd_operator.etcd_cluster_builders import raw_cluster
from tests.unit.etcd_operator.supervisor_fakes import supervisor_with_fakes


class Lease:
    def __init__(self, seconds_left: float) -> None:
        self.seconds_left = seconds_left
        self.asked: list[float] = []

    def __call__(self, for_seconds: float = 0.0) -> bool:
        self.asked.append(for_seconds)
        return for_seconds < self.seconds_left


def test_without_the_lease_no_status_and_no_event() -> None:
    raw = raw_cluster({"version": "9.9.9"}, status={})
    supervisor, executor, events = supervisor_with_fakes(raw, may_act=Lease(0.0))
    supervisor.reconcile_once()
    assert events.recorded == [] and supervisor.context.clusters.client.patches == []  # type: ignore[attr-defined]


def test_an_action_that_could_outlast_the_lease_is_not_started() -> None:
    raw = raw_cluster(status={})  # a new cluster: the first action creates its services
    lease = Lease(ACTION_MAX_SECONDS - 1)
    supervisor, executor, events = supervisor_with_fakes(raw, may_act=lease)
    supervisor.reconcile_once()
    assert executor.executed == [] and ACTION_MAX_SECONDS in lease.asked
    lease.seconds_left = ACTION_MAX_SECONDS + 1
    supervisor.reconcile_once()
    assert executor.executed, "with enough lease left it acts"
