"""Quorum-loss recovery never keeps less than the newest backup: the only member left was cut off
while the others took more writes and a backup of them succeeded, so it is behind that backup;
the etcd operator rebuilds the cluster from the backup instead of from it (status.recovery.source
Backup, event QuorumRecoveryFromBackup), and every key of the backup is served. A backup of another
incarnation (the cluster deleted and recreated under its name) ahead of the survivor is no such
backup: the recovery is refused and nothing changes."""
from __future__ import annotations

import json

import pytest

from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.backup_operator.backups import Backups, etcd_backup
from tests.integration.etcd_operator.etcd_data import member_url, read_prefix
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster

pytestmark = pytest.mark.sandbox

PREFIX = "/behind/"
ETCD_CONTAINER = "etcd"


def _put(clusters: Clusters, name: str, keys: dict[str, str]) -> None:
    script = "\n" + "".join(f"put {key} {value}\n" for key, value in keys.items()) + "\n\n"
    result = clusters.sandbox.etcdctl([clusters.client_url(name)], "txn", stdin=script)
    assert result.returncode == 0 and result.stdout.startswith("SUCCESS"), result.stderr


def test_a_survivor_behind_a_newer_backup_is_not_what_the_cluster_is_rebuilt_from(
        backup_operator: Sandbox, backups: Backups, clusters: Clusters, bucket: str) -> None:
    name, ns = "behind", clusters.namespace
    clusters.create(etcd_cluster(name, size=3, recovery={"quorumLoss": "FromSurvivor"}))
    status = clusters.wait_running(name, ready=3, timeout=240)
    early = {f"{PREFIX}early-{i:03d}": f"v{i}" for i in range(50)}
    _put(clusters, name, early)
    survivor = sorted(m for m in status["members"]["ready"] if m != status["leader"])[0]

    # The survivor-to-be is cut off from the others (its pod and data stay) while they go on.
    others = sorted(p.metadata.name for p in clusters.live_pods(name) if p.metadata.name != survivor)
    cut = backup_operator.faults.partition([(ns, survivor)], [(ns, other) for other in others])
    clusters.wait_status(name, lambda s: survivor in (s.get("members") or {}).get("unready", []),
                         f"{survivor} unready", timeout=60)

    def out_of_the_service() -> bool:  # its readiness probe failed: the client Service no longer sends to it
        pod = next(p for p in clusters.live_pods(name) if p.metadata.name == survivor)
        return any(c.type == "Ready" and c.status == "False" for c in pod.status.conditions or [])
    wait_for(out_of_the_service, timeout=60, what=f"{survivor} out of the client Service")
    late = {f"{PREFIX}late-{i:03d}": f"v{i}" for i in range(50)}
    _put(clusters, name, late)
    backups.create(etcd_backup("newer", {
        "etcdEndpoints": [f"http://{name}-client.{ns}.svc:2379"], "storageType": "S3",
        "s3": backups.s3_spec(f"{bucket}/newer.backup"),
    }))
    backup_revision = backups.wait_succeeded("newer")["etcdRevision"]

    # The two members that had everything are lost for good (their processes gone before the cut
    # heals, so they hand nothing over); the cut-off one is left, behind the backup.
    for other in others:
        clusters.core.delete_namespaced_pod(other, ns, grace_period_seconds=0)
    for other in others:
        wait_for(lambda other=other: backup_operator.faults.pod_pid(ns, other, ETCD_CONTAINER) is None,
                 timeout=30, what=f"{other}'s etcd gone")
    backup_operator.faults.heal(cut)

    def recovered() -> dict[str, object]:
        recovery = clusters.status(name).get("recovery") or {}
        assert recovery.get("phase") != "Failed", f"recovery failed: {recovery}"
        return recovery if recovery.get("phase") == "Recovered" else {}
    recovery = wait_for(recovered, timeout=300, what=f"{name}: status.recovery.phase Recovered")
    assert (recovery.get("source"), recovery.get("backup"), recovery.get("backupRevision")) == (
        "Backup", "newer", backup_revision), recovery
    assert int(str(recovery["survivorRevision"])) < backup_revision, recovery
    clusters.wait_running(name, ready=3, timeout=300)
    assert read_prefix(clusters.sandbox, [clusters.client_url(name)], PREFIX) == {**early, **late}
    started = next(e for e in clusters.events(name) if e.reason.startswith("QuorumRecover") and e.type == "Warning")
    assert started.reason == "QuorumRecoveryFromBackup" and "newer" in started.message, started.message


def test_a_survivor_behind_a_backup_of_another_incarnation_is_refused_and_nothing_changes(
        backup_operator: Sandbox, backups: Backups, clusters: Clusters, bucket: str) -> None:
    """Bad input (issue 41, finding 2): a cluster deleted and recreated under its name, a backup of
    the first incarnation further ahead by revision than the second's survivor. Revisions of two
    incarnations say nothing about which holds newer data: the recovery is refused with a reason
    (status reason QuorumRecoveryRefused, a Warning event), the survivor kept as it is, the backup
    never restored over it."""
    name, ns = "reborn", clusters.namespace
    clusters.create(etcd_cluster(name, size=1))
    clusters.wait_running(name, ready=1, timeout=180)
    for batch in range(6):  # six revisions: the second incarnation's survivor will be at fewer
        _put(clusters, name, {f"{PREFIX}first-{batch}-{i:02d}": f"v{i}" for i in range(10)})
    backups.create(etcd_backup("first-incarnation", {
        "etcdEndpoints": [f"http://{name}-client.{ns}.svc:2379"], "storageType": "S3",
        "s3": backups.s3_spec(f"{bucket}/first-incarnation.backup"),
    }))
    backup_revision = backups.wait_succeeded("first-incarnation")["etcdRevision"]
    clusters.delete(name)
    wait_for(lambda: not clusters.pods(name), timeout=90, what=f"the first {name}'s pods gone")

    clusters.create(etcd_cluster(name, size=3, recovery={"quorumLoss": "FromSurvivor"}))
    status = clusters.wait_running(name, ready=3, timeout=240)
    uid = clusters.get(name)["metadata"]["uid"]
    second = {f"{PREFIX}second-{i:03d}": f"v{i}" for i in range(5)}
    _put(clusters, name, second)
    survivor = sorted(m for m in status["members"]["ready"] if m != status["leader"])[0]
    survivor_url = member_url(clusters, name, survivor)
    wait_for(lambda: read_prefix(clusters.sandbox, [survivor_url], PREFIX, serializable=True) == second,
             timeout=30, what=f"the second incarnation's keys on {survivor}")
    survivor_revision = json.loads(clusters.sandbox.etcdctl([survivor_url], "endpoint", "status", "-w", "json")
                                   .stdout)[0]["Status"]["header"]["revision"]
    assert survivor_revision < backup_revision, (survivor_revision, backup_revision)  # the premise
    for pod in clusters.live_pods(name):
        if pod.metadata.name != survivor:
            clusters.core.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=0)
    survivor_pod = [(p.metadata.name, p.metadata.uid) for p in clusters.live_pods(name) if p.metadata.name == survivor]

    refused = clusters.wait_status(name, lambda s: s.get("reason") == "QuorumRecoveryRefused",
                                   "the recovery refused", timeout=120)
    message = refused.get("message", "")
    assert "first-incarnation" in message and "another incarnation" in message, message
    assert f"(revision {backup_revision})" in message, message
    assert "recovery" not in refused, refused
    events = wait_for(lambda: [e for e in clusters.events(name) if e.reason == "QuorumRecoveryRefused"
                               and e.involved_object.uid == uid], timeout=30, what="a QuorumRecoveryRefused event")
    assert events[0].type == "Warning", events[0]
    assert [(p.metadata.name, p.metadata.uid) for p in clusters.live_pods(name)] == survivor_pod
    assert not [e for e in clusters.events(name) if e.involved_object.uid == uid
                and e.reason in ("QuorumRecoveryStarted", "QuorumRecoveryFromBackup")]
    assert read_prefix(clusters.sandbox, [survivor_url], PREFIX, serializable=True) == second, \
        "the survivor's data changed"
