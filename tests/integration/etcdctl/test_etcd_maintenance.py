"""`EtcdMaintenance` against real etcd (each version the sandbox built): compaction (and telling
whether it happened), defragmentation, and disarming one alarm."""
from __future__ import annotations

import base64

from etcd_common.etcd.alarms import CORRUPT, NOSPACE, Alarm
from etcd_common.etcd.maintenance import EtcdMaintenance
from etcd_common.etcd.probe import EtcdProbe
from etcd_common.etcd.types import EndpointStatus
from tests.integration.etcdctl.etcd_processes import EtcdCluster, post_json, wait_for


def _overwrite(url: str, rounds: int) -> None:
    value = base64.b64encode(b"x" * 32 * 1024).decode()
    for n in range(rounds):
        post_json(url, "/v3/kv/put", {"key": base64.b64encode(f"k{n % 5}".encode()).decode(), "value": value})


def _freed_in_the_file(url: str, probe: EtcdProbe, at_least: int) -> EndpointStatus | None:
    """The member's status once `at_least` bytes of its database file are free (None before).
    bbolt counts the pages a transaction freed as free only when a later write transaction begins
    with no older reader open, and etcd begins one only after something is written; so each poll
    writes one small key first, as any live cluster's clients do (without it, run N of the suite
    waited 10 s on 3.5 for pages that stayed pending)."""
    post_json(url, "/v3/kv/put", {"key": base64.b64encode(b"commit").decode(), "value": ""})
    [status] = probe.endpoint_status()
    return status if status.db_size - status.db_size_in_use > at_least else None


def test_compaction_defragmentation_and_disarm(etcd_cluster: EtcdCluster, etcd_version: str) -> None:
    seed = etcd_cluster.start_seed()
    url = seed.client_url
    maintenance, probe = EtcdMaintenance(), EtcdProbe([url])
    _overwrite(url, 200)
    [before] = probe.endpoint_status()
    assert not maintenance.compacted_through(url, before.revision)
    assert maintenance.compact(url, before.revision)
    assert not maintenance.compact(url, before.revision), "a second compaction to the same revision is a no-op"
    assert maintenance.compacted_through(url, before.revision)
    if etcd_version.startswith("3.4."):
        # etcd 3.4 (an upgrade source only) does not report the space compaction freed in the file:
        # its dbSizeInUse stays put until a defragmentation. Only the defragmentation is checked.
        [compacted] = probe.endpoint_status()
    else:
        # History freed inside the file, not yet returned to the file system.
        compacted = wait_for(lambda: _freed_in_the_file(url, probe, 4 * 1024 * 1024), timeout=10,
                             what="compacted history freed in the database file")
    maintenance.defragment(url, timeout_seconds=60)
    [defragmented] = probe.endpoint_status()
    assert defragmented.db_size < compacted.db_size / 4, (compacted, defragmented)

    for kind in (NOSPACE, CORRUPT):
        post_json(url, "/v3/maintenance/alarm", {"action": "ACTIVATE", "memberID": str(before.member_id), "alarm": kind})
    assert set(probe.endpoint_status()[0].alarms) == {Alarm(NOSPACE, before.member_id), Alarm(CORRUPT, before.member_id)}
    maintenance.disarm(url, Alarm(NOSPACE, before.member_id))
    assert probe.endpoint_status()[0].alarms == (Alarm(CORRUPT, before.member_id),), "only the one alarm is disarmed"
