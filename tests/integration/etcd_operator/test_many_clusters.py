"""Many clusters at once: each has its own supervisor, so ten created together all come up."""
from __future__ import annotations

from typing import Any

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster

COUNT = 10


def test_ten_single_member_clusters_created_at_once_all_run(clusters: Clusters) -> None:
    names = [f"many-{i}" for i in range(COUNT)]
    for name in names:
        clusters.create(etcd_cluster(name, size=1))
    pending: dict[str, Any] = {}

    def all_running() -> bool:
        pending.clear()
        for name in names:
            status = clusters.status(name)
            if not (status.get("phase") == "Running" and status.get("readyCount") == 1 and status.get("size") == 1):
                pending[name] = (status.get("phase"), status.get("readyCount"), status.get("message"))
        return not pending
    try:
        wait_for(all_running, timeout=300, interval=1.0, what=f"{COUNT} clusters Running")
    except AssertionError as e:
        raise AssertionError(f"{e}\nnot running: {pending}") from None

    for name in names:
        assert len(clusters.live_pods(name)) == 1, name
        clusters.put(name, "whoami", name)
    assert [clusters.get_value(name, "whoami") for name in names] == names
