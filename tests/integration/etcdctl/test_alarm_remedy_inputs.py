"""The alarm remedies' inputs from real etcd (3.5 and 3.6; no Kubernetes): a CORRUPT alarm for
member ID 0 as etcd prints it ("alarm:CORRUPT ") is parsed, the members' keyspace hashes at one
revision are read over the gateway, and the planner and status on those answers report an outage
and disarm nothing; NOSPACE under a 16 MiB quota set by ETCD_QUOTA_BACKEND_BYTES is recovered
with the real quota (compact, defragment, disarm) and names it.

The CORRUPT alarm is raised through etcd's Alarm API (`POST /v3/maintenance/alarm`, ACTIVATE): the
same raft request etcd's corruption checks propose (`triggerCorruptAlarm`), which `etcdctl alarm`
does not offer. Raising it with the checks themselves needs members whose stores disagree, with
no majority among them (3.6's compaction hash check) or the leader's own hash changing in place
(3.5's periodic check): no etcd tool writes a member's store offline, and release binaries have no
failpoints."""
from __future__ import annotations

import base64
import dataclasses
import urllib.error

import pytest

from etcd_common.etcd.alarms import CORRUPT, NOSPACE, Alarm
from etcd_common.etcd.maintenance import EtcdMaintenance
from etcd_common.etcd.probe import EtcdProbe
from etcd_common.etcd.types import EndpointStatus, HashKV
from etcd_operator import actions
from etcd_operator.observed import ObservedCluster
from etcd_operator.planning import plan_next_action
from etcd_operator.status import compute_status
from tests.integration.etcdctl.etcd_processes import EtcdCluster, post_json, wait_for
from tests.unit.etcd_operator.etcd_cluster_builders import healthy_cluster, member_id, name, replace_pod

MIB = 1024 * 1024
QUOTA_BYTES = 16 * MIB


@pytest.fixture(autouse=True)
def _supported_versions_only(etcd_version: str) -> None:
    if etcd_version.startswith("3.4."):
        pytest.skip("etcd 3.4 is an upgrade source only; the remedies run on 3.5 and 3.6")


def _as_observed(observed: ObservedCluster, answers: list[EndpointStatus],
                 hashes: list[HashKV] | None = None) -> ObservedCluster:
    """`observed` (the builders' members example-mem01..) with what the real members answered:
    their errors (alarms), sizes and revisions; their hashes at one revision."""
    statuses = {name(i): dataclasses.replace(observed.endpoint_status[name(i)], errors=a.errors, db_size=a.db_size,
                                             db_size_in_use=a.db_size_in_use, revision=a.revision)
                for i, a in enumerate(answers, 1)}
    alarms = tuple(sorted({Alarm(x.kind, 0 if x.cluster_wide else member_id(1)) for a in answers for x in a.alarms}))
    observed = dataclasses.replace(observed, endpoint_status=statuses, alarms=alarms)
    if hashes is not None:
        observed = dataclasses.replace(observed, hash_kvs={name(i): h for i, h in enumerate(hashes, 1)},
                                       hash_kv_revision=hashes[0].hash_revision)
    return observed


def test_a_cluster_wide_corrupt_alarm_is_parsed_reported_and_never_disarmed(etcd_cluster: EtcdCluster) -> None:
    members, _ = etcd_cluster.grow(3)
    urls = [m.client_url for m in members]
    post_json(urls[0], "/v3/kv/put", {"key": base64.b64encode(b"k").decode(), "value": ""})
    post_json(urls[0], "/v3/maintenance/alarm", {"action": "ACTIVATE", "memberID": "0", "alarm": "CORRUPT"})
    probe = EtcdProbe(urls)
    answers = wait_for(lambda: _all_alarmed(probe), timeout=10, what="every member reporting the alarm",
                       describe=etcd_cluster.describe)
    assert [a.errors for a in answers] == [("alarm:CORRUPT ",)] * 3, "printed without a member ID"
    assert all(a.alarms == (Alarm(CORRUPT, 0),) for a in answers)
    assert all(h.healthy for h in probe.endpoint_health()), "reads (the health read) are still served"
    with pytest.raises(urllib.error.HTTPError):
        post_json(urls[0], "/v3/kv/put", {"key": base64.b64encode(b"k").decode(), "value": ""})
    revision = min(a.revision for a in answers)
    hashes = probe.hash_kvs(revision)
    assert all(isinstance(h, HashKV) for h in hashes), hashes
    assert len({(h.hash, h.compact_revision, h.hash_revision) for h in hashes if isinstance(h, HashKV)}) == 1

    observed = _as_observed(healthy_cluster(3), answers, [h for h in hashes if isinstance(h, HashKV)])
    action = plan_next_action(observed)
    assert isinstance(action, actions.ReportAlarm) and action.alarm_kind == CORRUPT, action
    status = compute_status(observed, action, now=observed.observed_at)
    available = next(c for c in status["conditions"] if c["type"] == "Available")
    assert available["status"] == "False" and status["phase"] == "Failed", status
    assert [a.alarms for a in probe.endpoint_status()] == [(Alarm(CORRUPT, 0),)] * 3, "nothing disarmed it"


def _all_alarmed(probe: EtcdProbe) -> list[EndpointStatus] | None:
    answers = probe.endpoint_status()
    return answers if all(a.alarms for a in answers) else None


def _fill(url: str) -> None:
    """Overwrite five keys until etcd refuses the write for want of space."""
    value = base64.b64encode(b"x" * 64 * 1024).decode()
    for n in range(10_000):
        try:
            post_json(url, "/v3/kv/put", {"key": base64.b64encode(f"k{n % 5}".encode()).decode(), "value": value})
        except urllib.error.HTTPError as e:
            assert "database space exceeded" in e.read().decode(), "refused for another reason"
            return
    pytest.fail("the quota was never reached: ETCD_QUOTA_BACKEND_BYTES not honoured?")


def test_no_space_under_an_env_quota_recovers_once_with_the_real_quota(etcd_cluster: EtcdCluster) -> None:
    seed = etcd_cluster.start_seed(env={"ETCD_QUOTA_BACKEND_BYTES": str(QUOTA_BYTES)})
    url = seed.client_url
    _fill(url)
    probe, maintenance = EtcdProbe([url]), EtcdMaintenance()
    [full] = probe.endpoint_status()
    assert full.alarms and full.alarms[0].kind == NOSPACE, full
    spec = {"pod": {"etcdEnv": [{"name": "ETCD_QUOTA_BACKEND_BYTES", "value": str(QUOTA_BYTES)}]}}
    base = healthy_cluster(1, size=1, spec=spec)
    observed = dataclasses.replace(_as_observed(base, [full]), history_compacted=False)
    compact = plan_next_action(observed)
    assert isinstance(compact, actions.CompactHistory) and compact.revision == full.revision, compact
    status = compute_status(observed, compact, now=observed.observed_at)
    assert status["maintenance"]["backendQuota"] == QUOTA_BYTES

    maintenance.compact(url, compact.revision)
    after_compaction = dataclasses.replace(_as_observed(base, probe.endpoint_status()), history_compacted=True)
    defragment = plan_next_action(after_compaction)
    assert isinstance(defragment, actions.Defragment), defragment
    maintenance.defragment(url, timeout_seconds=60)
    assert base.observed_at is not None
    done = replace_pod(_as_observed(base, probe.endpoint_status()), name(1), defragmented_at=base.observed_at)
    disarm = plan_next_action(dataclasses.replace(done, history_compacted=True))
    assert isinstance(disarm, actions.DisarmAlarm), disarm
    assert "of the 16.0 MiB quota" in disarm.reason, disarm.reason
    [raised] = full.alarms
    maintenance.disarm(url, raised)
    assert probe.endpoint_status()[0].alarms == ()
    post_json(url, "/v3/kv/put", {"key": base64.b64encode(b"after").decode(), "value": ""})
