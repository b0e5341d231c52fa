"""A real Prometheus, configured with the shipped scrape config and rules (deploy/prometheus/),
scrapes an etcd member through the job etcd-members, and pages EtcdAlarmActive and
EtcdDatabaseNearQuota when the cluster's database fills its quota (etcd's NOSPACE alarm); both
resolve once the operator has recovered the cluster by itself (compaction, defragmentation,
disarm)."""
from __future__ import annotations

from typing import Any

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.monitoring.prometheus_server import Prometheus

NAME = "filled"
MEMBERS_JOB = "etcd-members"
QUOTA_BYTES = 16 * 1024 * 1024
# The day-two spec fields of issue 21: no automatic compaction (old revisions stay until the
# operator's NOSPACE recovery compacts), a small quota, defragmentation as soon as anything is free,
# and the operator's NOSPACE recovery off until the alerts have fired: with it on, the operator may
# disarm within a second (the data fits after compaction), between two scrapes.
MAINTENANCE_SPEC: dict[str, Any] = {"compaction": {"mode": "disabled"}, "backendQuota": "16Mi",
                                   "defragmentation": {"minimumFreeSize": "1Mi"},
                                   "alarms": {"recoverNoSpace": False}}
# Under the 128 KiB one argv string may hold and etcd's 1.5 MiB request limit.
VALUE = "x" * 100_000
MAX_PUTS = 2 * QUOTA_BYTES // len(VALUE)
NOSPACE = "database space exceeded"
FILL_PREFIX = "fill/"
# EtcdDatabaseNearQuota waits `for: 2m`; discovery, scrapes (2 s) and evaluation add seconds.
FIRE_TIMEOUT = 240
# The operator's recovery (compact, defragment, disarm) and a scrape of the smaller database.
RESOLVE_TIMEOUT = 240


class Filler:
    """Writes distinct keys of VALUE through the cluster's client Service until etcd refuses one
    for lack of space: live keys that no compaction can free."""

    def __init__(self, clusters: Clusters) -> None:
        self.clusters = clusters
        self.written = 0

    def fill_until_refused(self) -> int:
        """Puts until etcd answers NOSPACE (which raises the alarm, again if it was disarmed);
        returns how many puts it accepted first."""
        accepted = 0
        for _ in range(MAX_PUTS):
            key = f"{FILL_PREFIX}{self.written:06d}"
            self.written += 1
            result = self.clusters.sandbox.etcdctl([self.clusters.client_url(NAME)], "put", key, VALUE)
            if result.returncode == 0:
                accepted += 1
                continue
            if NOSPACE in result.stderr:
                return accepted
            raise AssertionError(f"etcdctl put {key} failed, not for lack of space: {result.stderr.strip()[-500:]}")
        raise AssertionError(f"etcd accepted {accepted} puts of {len(VALUE)} bytes in a row: "
                             f"no backend quota of {QUOTA_BYTES} bytes in force?")


def alarms(clusters: Clusters) -> str:
    return clusters.etcdctl(NAME, "alarm", "list").strip()


def test_full_database_pages_and_resolves_once_the_operator_recovers(clusters: Clusters,
                                                                     prometheus: Prometheus) -> None:
    ns = clusters.namespace
    clusters.create(etcd_cluster(NAME, size=1, **MAINTENANCE_SPEC))
    clusters.wait_running(NAME, ready=1, timeout=180)
    (member,) = [p.metadata.name for p in clusters.live_pods(NAME)]
    target = f'job="{MEMBERS_JOB}", namespace="{ns}", etcd_cluster="{NAME}"'

    # Discovered (every namespace, pods labelled app=etcd with the scrape annotations) and scraped.
    up = wait_for(lambda: prometheus.query(f"up{{{target}}} == 1") or None, timeout=90,
                  what=f"an `up` series of job {MEMBERS_JOB} for {ns}/{NAME}")
    assert [s["metric"]["pod"] for s in up] == [member], up
    wait_for(lambda: prometheus.query(f"etcd_server_quota_backend_bytes{{{target}}} == {QUOTA_BYTES}") or None,
             timeout=60, what=f"etcd's quota of {QUOTA_BYTES} bytes scraped (spec.backendQuota in force)")
    labels = {"namespace": ns, "cluster": NAME}
    assert not prometheus.alerts("EtcdAlarmActive", **labels)
    assert not prometheus.alerts("EtcdDatabaseNearQuota", **labels)

    filler = Filler(clusters)
    accepted = filler.fill_until_refused()
    assert accepted * len(VALUE) > 0.8 * QUOTA_BYTES, f"refused after {accepted} puts only"
    assert "NOSPACE" in alarms(clusters)

    # No `for` on the alarm: it fires at the first evaluation that sees the operator's gauge. With
    # the recovery off the database stays over 80% of the quota, so EtcdDatabaseNearQuota fires
    # after its 2m.
    alarm = wait_for(lambda: prometheus.fired("EtcdAlarmActive", "10m", alarm="NOSPACE", **labels) or None,
                     timeout=FIRE_TIMEOUT, what="EtcdAlarmActive firing for NOSPACE")
    assert alarm[0]["metric"]["severity"] == "critical", alarm
    near = wait_for(lambda: prometheus.fired("EtcdDatabaseNearQuota", "10m", **labels) or None,
                    timeout=FIRE_TIMEOUT, what="EtcdDatabaseNearQuota firing")
    assert [(s["metric"]["pod"], s["metric"]["severity"]) for s in near] == [(member, "warning")], near

    # Make room the way a person would (deletes pass under NOSPACE) and let the operator recover:
    # it compacts the deleted revisions away, defragments and disarms.
    assert "NOSPACE" in alarms(clusters), "the alarm went while the operator's recovery was off"
    clusters.etcdctl(NAME, "del", "--prefix", FILL_PREFIX)
    clusters.patch_spec(NAME, {"alarms": {"recoverNoSpace": True}})

    def recovered() -> bool:
        firing = prometheus.alerts("EtcdAlarmActive", **labels) + prometheus.alerts("EtcdDatabaseNearQuota", **labels)
        return not firing and not alarms(clusters)
    wait_for(recovered, timeout=RESOLVE_TIMEOUT,
             what="no alarm in etcd and EtcdAlarmActive, EtcdDatabaseNearQuota resolved")
    size = prometheus.query(f"etcd_mvcc_db_total_size_in_bytes{{{target}}} / etcd_server_quota_backend_bytes{{{target}}}")
    assert size and float(size[0]["value"][1]) <= 0.8, size
    clusters.put(NAME, "after/recovery", "written")  # the cluster takes writes again
    assert not prometheus.alerts("EtcdMemberDown", **labels) and not prometheus.alerts("EtcdNoLeader", **labels)
