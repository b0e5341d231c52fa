"""Scale-down loses no client write: each member to be removed first leaves the client service
(its serving label removed, its endpoint gone from the service's EndpointSlices), so continuous
writes through the client service see no failure while 5 members become 3, and every
acknowledged write is kept."""
from __future__ import annotations

import time

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.client_writes import Writer
from tests.integration.etcd_operator.etcd_data import read_prefix
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster

PREFIX = "drain/"


def _event_order(clusters: Clusters, name: str) -> list[tuple[str, str]]:
    """(reason, message) of the draining and removal events, in the order they were first recorded."""
    events = [e for e in clusters.events(name) if e.reason in ("MemberDraining", "MemberRemoved")]
    events.sort(key=lambda e: (str(e.first_timestamp or e.event_time or ""), e.metadata.creation_timestamp))
    return [(e.reason, e.message or "") for e in events]


def test_scale_down_drains_each_member_before_removing_it_and_no_write_fails(clusters: Clusters) -> None:
    name = "drained"
    clusters.create(etcd_cluster(name, size=5))
    clusters.wait_running(name, ready=5, timeout=300)
    writer = Writer(clusters.sandbox, clusters.client_url(name), PREFIX)
    writer.start()
    try:
        wait_for(lambda: writer.progressed(5), timeout=30, what="writes flowing before the scale-down")
        started = time.monotonic()
        clusters.patch_spec(name, {"size": 3})
        clusters.wait_running(name, ready=3, timeout=240)
        finished = time.monotonic()
        count = len(writer.acknowledged)
        wait_for(lambda: writer.progressed(count + 5), timeout=30, what="writes flowing after the scale-down")
    finally:
        writer.finish()
    gap = writer.longest_gap(started, finished)
    print(f"\n5 -> 3 in {finished - started:.1f}s: {len(writer.acknowledged)} writes acknowledged, "
          f"{len(writer.failures)} failed, longest gap {gap:.1f}s")
    assert not writer.failures, "writes failed:\n  " + "\n  ".join(e for _, e in writer.failures[-5:])
    stored = read_prefix(clusters.sandbox, clusters.member_urls(name), PREFIX)
    lost = {k: v for k, v in writer.acknowledged.items() if stored.get(k) != v}
    assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {sorted(lost)[:5]}"

    removed = [m for reason, m in _event_order(clusters, name) if reason == "MemberRemoved"]
    assert len(removed) == 2, removed
    for message in removed:
        member = message.split()[2]  # "remove member <name> (<id>): ..."
        drained = [m for reason, m in _event_order(clusters, name) if reason == "MemberDraining" and member in m]
        assert drained, f"{member} was removed without being drained first"
    serving = [p.metadata.name for p in clusters.live_pods(name)
               if (p.metadata.labels or {}).get("etcd.database.coreos.com/serving") == "true"]
    assert len(serving) == 3, f"pods serving clients after the scale-down: {serving}"
