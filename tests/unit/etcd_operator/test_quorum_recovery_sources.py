"""Quorum-loss recovery, what it restores (issue 22 item 5) and whether it fits (item 3): never a
survivor behind the newest succeeded EtcdBackup of the cluster (the seed restores that backup
instead, through spec.restore's init containers), and never a seed volume too small for the data."""
from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from etcd_common.api import constants as c
from etcd_common.api.etcd_backup import EtcdBackup, parse_etcd_backup
from etcd_common.api.restore_source import DEFAULT_BUMP_REVISION, parse_restore_source
from etcd_operator import actions
from etcd_operator.manifests import build_recovery_seed_pod, member_client_url
from etcd_operator.observed import MemberHealth, ObservedCluster
from etcd_operator.planning import plan_next_action
from etcd_operator.planning.recovery import newest_backup
from etcd_operator.recovery_inputs import with_recovery_inputs as _with_backups
from etcd_operator.spec import parse_etcd_cluster
from etcd_operator.status import compute_status
from kube_adapter.errors import KubeError
from tests.unit.etcd_operator.etcd_cluster_builders import NEW_MEMBER, T0, UID, name, raw_cluster
from tests.unit.etcd_operator.quorum_loss_builders import (
    ETCD_CLUSTER_ID,
    FROM_SURVIVOR,
    in_progress,
    lost_majority,
    with_seed,
)

SHA = "b" * 64
SURVIVOR_REVISION = 42  # lost_majority's member 1 answers with raft index 100, revision 42


THIS_INCARNATION = (f"{ETCD_CLUSTER_ID:x}", UID)  # status.lastBackup's etcdClusterID, etcdClusterUID


def backup(backup_name: str = "nightly", *, revision: int = 50, cluster: str = "example", succeeded: bool = True,
           last: bool = True, endpoints: list[str] | None = None, secret: str = "aws", size: int = 4096,
           incarnation: tuple[str, str] | None = THIS_INCARNATION) -> EtcdBackup:
    spec: dict[str, Any] = {"storageType": "S3", "s3": {"path": "bucket/etcd/example", "awsSecret": secret}}
    if endpoints is not None:
        spec["etcdEndpoints"] = endpoints
    else:
        spec["etcdCluster"] = {"name": cluster}
    status: dict[str, Any] = {"succeeded": succeeded, "etcdRevision": revision}
    if last:
        status["lastBackup"] = {"key": f"etcd/example_v{revision}_20261126", "size": size, "sha256": SHA,
                                "etcdRevision": revision}
        if incarnation is not None:
            status["lastBackup"].update(etcdClusterID=incarnation[0], etcdClusterUID=incarnation[1])
    return parse_etcd_backup({"metadata": {"name": backup_name, "namespace": "default", "uid": f"uid-{backup_name}",
                                           "generation": 1}, "spec": spec, "status": status})


def with_backups(observed: ObservedCluster, *backups: EtcdBackup) -> ObservedCluster:
    return dataclasses.replace(observed, backups=backups)


# ---------------------------------------------------------------------------------------------
# The choice: the survivor, or the newest succeeded backup of this cluster when it is ahead


@pytest.mark.parametrize("backups, expected_backup", [
    pytest.param((), "", id="no-backups-survivor"),
    pytest.param((backup(revision=30),), "", id="survivor-ahead-of-backup"),
    pytest.param((backup(revision=SURVIVOR_REVISION),), "", id="backup-at-the-survivors-revision-survivor"),
    pytest.param((backup(revision=50),), "nightly", id="backup-newer"),
    pytest.param((backup(revision=50, cluster="other"),), "", id="backup-of-another-cluster-ignored"),
    pytest.param((backup(revision=50, succeeded=False),), "", id="failed-backup-ignored"),
    pytest.param((backup(revision=50, last=False),), "", id="backup-without-an-object-ignored"),
    pytest.param((backup(revision=50, endpoints=["http://other-client.default.svc:2379"]),), "",
                 id="backup-by-endpoints-of-another-cluster-ignored"),
    pytest.param((backup("old", revision=45), backup("newest", revision=60), backup("mid", revision=50)), "newest",
                 id="the-newest-of-several"),
])
def test_the_recovery_restores_the_survivor_unless_a_backup_is_ahead_of_it(backups: tuple[EtcdBackup, ...],
                                                                          expected_backup: str) -> None:
    action = plan_next_action(with_backups(lost_majority(), *backups))
    assert isinstance(action, actions.StartQuorumRecovery), action
    assert action.survivor == name(1) and action.survivor_revision == SURVIVOR_REVISION
    assert action.backup == expected_backup
    if not expected_backup:
        assert action.restore is None and action.event_reason == "QuorumRecoveryStarted"
        return
    assert action.event_reason == "QuorumRecoveryFromBackup"
    assert action.restore is not None and action.backup_revision == action.restore.revision > SURVIVOR_REVISION
    assert f"EtcdBackup {expected_backup}" in action.describe() and "is behind it" in action.describe()


def test_the_backup_is_restored_from_its_last_object_with_its_secret_and_sha256() -> None:
    action = plan_next_action(with_backups(lost_majority(), backup(revision=50)))
    assert isinstance(action, actions.StartQuorumRecovery) and action.restore is not None
    source = action.restore
    assert source.location.path == "bucket/etcd/example_v50_20261126"
    assert source.location.secret == "aws" and source.sha256 == SHA and source.revision == 50
    assert source.bump_revision == DEFAULT_BUMP_REVISION  # etcd 3.6's etcdutl bumps


def test_backups_that_cannot_be_listed_make_the_recovery_wait() -> None:
    observed = dataclasses.replace(lost_majority(), backups_error="EtcdBackups could not be listed: Forbidden")
    action = plan_next_action(observed)
    assert isinstance(action, actions.ReportQuorumLoss), action
    assert "Forbidden" in action.describe() and "recovery waits" in action.describe()


def test_a_newer_backup_the_seed_could_not_fetch_refuses_the_recovery() -> None:
    action = plan_next_action(with_backups(lost_majority(), backup(revision=50, secret="")))
    assert isinstance(action, actions.ReportQuorumLoss), action
    assert "awsSecret is empty" in action.describe() and "EtcdRestore" in action.describe()


def test_newest_backup_ignores_other_clusters_and_failures() -> None:
    observed = with_backups(lost_majority(), backup("a", revision=90, cluster="other"),
                            backup("b", revision=80, succeeded=False), backup("c", revision=10))
    found = newest_backup(observed, ETCD_CLUSTER_ID)
    assert found is not None and found.name == "c"


# ---------------------------------------------------------------------------------------------
# status.recovery records what was kept


def test_status_records_the_source_the_backup_and_its_revision_and_reads_them_back() -> None:
    from tests.support.openapi_schema import CLUSTER_SCHEMA, validate

    observed = with_backups(lost_majority(), backup(revision=50))
    action = plan_next_action(observed)
    status = compute_status(observed, action, now=T0)
    recovery = status["recovery"]
    assert (recovery["source"], recovery["backup"], recovery["backupRevision"]) == ("Backup", "nightly", 50)
    assert recovery["survivor"] == name(1) and recovery["lostMembers"] == [name(2), name(3)]
    assert parse_restore_source(recovery["restore"]) == dataclasses.replace(
        action.restore, fetch_image=parse_restore_source(recovery["restore"]).fetch_image)  # type: ignore[union-attr]
    assert validate(CLUSTER_SCHEMA["properties"]["status"], status, ".status") == ([], [])
    cluster = parse_etcd_cluster(raw_cluster({"size": 3, **FROM_SURVIVOR}, status={**status, "bootstrapped": True}))
    recorded = cluster.recorded.recovery
    assert recorded is not None and recorded.from_backup and recorded.backup == "nightly"
    assert recorded.target_revision == 50 and recorded.restore == action.restore  # type: ignore[union-attr]
    # later passes keep it as it was
    again = compute_status(dataclasses.replace(observed, cluster=cluster), actions.Wait("seed starting"), now=T0)
    assert again["recovery"] == recovery


def test_status_of_a_recovery_from_the_survivor_says_so() -> None:
    observed = lost_majority()
    recovery = compute_status(observed, plan_next_action(observed), now=T0)["recovery"]
    assert recovery["source"] == "Survivor" and "backup" not in recovery and "restore" not in recovery


# ---------------------------------------------------------------------------------------------
# Its steps from a backup

FROM_BACKUP = {"source": "Backup", "backup": "nightly", "backupRevision": 50,
               "restore": {"backupStorageType": "S3", "s3": {"path": "bucket/etcd/example_v50_20261126",
                                                             "awsSecret": "aws"},
                           "sha256": SHA, "revision": 50, "bumpRevision": DEFAULT_BUMP_REVISION}}


def test_the_seed_is_created_from_the_backup() -> None:
    action = plan_next_action(in_progress(**FROM_BACKUP))
    assert isinstance(action, actions.CreateRecoverySeed), action
    assert action.restore is not None and action.restore.location.path == "bucket/etcd/example_v50_20261126"
    assert action.cluster_token == f"{UID}-{NEW_MEMBER}"


def test_from_a_backup_the_seed_is_created_even_when_the_survivors_pod_is_gone() -> None:
    observed = dataclasses.replace(in_progress(**FROM_BACKUP), pods=())
    action = plan_next_action(observed)
    assert isinstance(action, actions.CreateRecoverySeed) and action.restore is not None, action
    survivor_source = dataclasses.replace(in_progress(), pods=())
    assert isinstance(plan_next_action(survivor_source), actions.FailQuorumRecovery)


def test_an_unreadable_recorded_backup_fails_the_recovery_instead_of_seeding_from_the_survivor() -> None:
    action = plan_next_action(in_progress(**{**FROM_BACKUP, "restore": {"sha256": "nope"}}))
    assert isinstance(action, actions.FailQuorumRecovery) and "unreadable" in action.reason, action


def test_a_seed_behind_the_backups_revision_does_not_serve_then_the_recovery_ends_naming_the_backup() -> None:
    behind = with_seed(in_progress(**FROM_BACKUP), revision=45)  # above the survivor's 42, below the backup's 50
    assert isinstance(plan_next_action(behind), actions.Wait)
    served = with_seed(in_progress(**FROM_BACKUP), revision=DEFAULT_BUMP_REVISION + 50)
    served = dataclasses.replace(served, pods=tuple(p for p in served.pods if p.name == NEW_MEMBER))
    action = plan_next_action(served)
    assert action == actions.FinishQuorumRecovery(NEW_MEMBER, name(1), DEFAULT_BUMP_REVISION + 50,
                                                  (name(2), name(3)), backup="nightly")
    assert "EtcdBackup nightly" in action.describe()
    recovery = compute_status(served, action, now=T0)["recovery"]
    assert recovery["phase"] == "Recovered" and recovery["source"] == "Backup"
    assert recovery["recoveredRevision"] == DEFAULT_BUMP_REVISION + 50


def test_the_backup_seed_pod_runs_the_spec_restore_init_containers_with_the_recovery_token() -> None:
    cluster = parse_etcd_cluster(raw_cluster({"version": "3.6.16"}))
    source = parse_restore_source({**FROM_BACKUP["restore"], "fetchImage": "registry.example/etcd-operator-py:9"})
    pod = build_recovery_seed_pod(cluster, NEW_MEMBER, survivor_client_url=member_client_url(cluster, name(1)),
                                  token=f"{UID}-{NEW_MEMBER}", backup=source)
    fetch, restore, install = pod["spec"]["initContainers"]
    assert [fetch["name"], restore["name"], install["name"]] == ["restore-fetch", "restore-snapshot", "restore-install"]
    assert fetch["image"] == install["image"] == "registry.example/etcd-operator-py:9"
    assert "--s3-path=bucket/etcd/example_v50_20261126" in fetch["args"] and f"--sha256={SHA}" in fetch["args"]
    assert f"--initial-cluster-token={UID}-{NEW_MEMBER}" in restore["command"]
    assert f"--bump-revision={DEFAULT_BUMP_REVISION}" in restore["command"]
    assert {"name": "restore-aws-credentials", "secret": {"secretName": "aws"}} in pod["spec"]["volumes"]


def test_the_executor_gives_the_backup_seed_its_fetch_image() -> None:
    from etcd_common.etcd.access import EtcdAccess
    from etcd_operator.acting import ActionExecutor
    from operator_runtime.cached_client import CachedClient
    from tests.unit.etcd_operator.recording_api import RecordingApi

    api = RecordingApi()
    executor = ActionExecutor(CachedClient(api), CachedClient(api), CachedClient(api),  # type: ignore[arg-type]
                              EtcdAccess(lambda ns, name: {}), fetch_image="registry.example/etcd-operator-py:9")
    observed = in_progress(**FROM_BACKUP)
    action = plan_next_action(observed)
    assert isinstance(action, actions.CreateRecoverySeed)
    executor.execute(action, observed)
    [pod] = api.created
    fetch = pod["spec"]["initContainers"][0]
    assert fetch["name"] == "restore-fetch" and fetch["image"] == "registry.example/etcd-operator-py:9"


# ---------------------------------------------------------------------------------------------
# Disk space checked up front (issue 22 item 3)

SMALL_PVC = {"pod": {"persistentVolumeClaimSpec": {"accessModes": ["ReadWriteOnce"],
                                                   "resources": {"requests": {"storage": "512Mi"}}}},
             "backendQuota": "128Mi"}


def _db_size(observed: ObservedCluster, size: int) -> ObservedCluster:
    status = observed.endpoint_status[name(1)]
    return dataclasses.replace(observed, endpoint_status={name(1): dataclasses.replace(status, db_size=size)})


@pytest.mark.parametrize("spec, db_size, starts", [
    pytest.param(SMALL_PVC, 192 * c.MIB, True, id="pvc-fits-2x-plus-margin"),
    pytest.param(SMALL_PVC, 193 * c.MIB, False, id="pvc-too-small"),
    pytest.param({"pod": {"resources": {"limits": {"ephemeral-storage": "1Gi"}}}}, 600 * c.MIB, False,
                 id="emptydir-ephemeral-storage-limit-too-small"),
    pytest.param({}, 600 * c.MIB, True, id="emptydir-without-limit-no-check"),
])
def test_the_survivors_database_must_fit_the_seeds_volume(spec: dict[str, Any], db_size: int, starts: bool) -> None:
    observed = _db_size(lost_majority(spec={**FROM_SURVIVOR, **spec}), db_size)
    action = plan_next_action(observed)
    if starts:
        assert isinstance(action, actions.StartQuorumRecovery), action
        return
    assert isinstance(action, actions.ReportQuorumLoss), action
    assert "quorum-loss recovery refused" in action.describe() and str(db_size) in action.describe()
    assert str(2 * db_size + 128 * c.MIB) in action.describe()


def test_a_newer_backup_must_fit_the_seeds_volume_too() -> None:
    observed = with_backups(lost_majority(spec={**FROM_SURVIVOR, **SMALL_PVC}), backup(revision=50, size=300 * c.MIB))
    action = plan_next_action(observed)
    assert isinstance(action, actions.ReportQuorumLoss), action
    assert "EtcdBackup nightly's snapshot" in action.describe() and str(300 * c.MIB) in action.describe()


# ---------------------------------------------------------------------------------------------
# Observation: the namespace's EtcdBackups, listed only when a recovery may need them


class _Backups:
    def __init__(self, result: list[dict[str, Any]] | Exception) -> None:
        self.result, self.asked = result, 0

    def backups(self, namespace: str) -> list[dict[str, Any]]:
        self.asked += 1
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


RAW_BACKUP = {"metadata": {"name": "nightly", "namespace": "default", "uid": "u", "generation": 1},
              "spec": {"storageType": "S3", "s3": {"path": "bucket/etcd/example", "awsSecret": "aws"},
                       "etcdCluster": {"name": "example"}},
              "status": {"succeeded": True, "etcdRevision": 50,
                         "lastBackup": {"key": "etcd/example", "sha256": SHA, "size": 1, "etcdRevision": 50}}}


def test_backups_are_listed_only_without_quorum_and_with_recovery_asked_for() -> None:
    lookups = _Backups([RAW_BACKUP])
    observed = _with_backups(lost_majority(), lookups)  # type: ignore[arg-type]
    assert [b.name for b in observed.backups] == ["nightly"] and lookups.asked == 1
    assert observed.backups[0].status.last_backup is not None
    _with_backups(lost_majority(spec={}), lookups)  # type: ignore[arg-type]
    assert lookups.asked == 1  # not asked: no recovery asked for
    # etcd 3.4 lists members without quorum: asked then too (issue 41: it was not, so its
    # recoveries never looked at backups)
    listed = dataclasses.replace(lost_majority(), members=lost_majority().local_members)
    _with_backups(listed, lookups)  # type: ignore[arg-type]
    assert lookups.asked == 2
    healthy = dataclasses.replace(listed, health={m.member_name: MemberHealth(True) for m in listed.members or ()})
    _with_backups(healthy, lookups)  # type: ignore[arg-type]
    assert lookups.asked == 2  # not asked: quorum


def test_backups_that_cannot_be_listed_are_said() -> None:
    observed = _with_backups(lost_majority(), _Backups(KubeError("forbidden: etcdbackups")))  # type: ignore[arg-type]
    assert "could not be listed" in observed.backups_error and observed.backups == ()



def test_the_recovering_condition_names_the_backup_while_seeding_from_it() -> None:
    def recovering(observed: ObservedCluster) -> str:
        status = compute_status(observed, plan_next_action(observed), now=T0)
        [condition] = [c for c in status["conditions"] if c["type"] == "Recovering"]
        assert condition["reason"] == "QuorumRecovering"
        return str(condition["message"])

    assert "from EtcdBackup nightly (revision 50;" in recovering(in_progress(**FROM_BACKUP))
    assert f"from surviving member {name(1)} (revision 42)" in recovering(in_progress())
