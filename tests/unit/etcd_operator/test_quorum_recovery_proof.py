"""Quorum-loss recovery acts only on proof and refuses bad input (issue 41 items 1, 2, 7 and
"Bad input"): lost members known gone (a deleted Node, a terminal pod, or a person naming them),
never a pod merely terminating or a node NotReady; backups compared only within one incarnation
(etcd cluster ID and EtcdCluster UID); a survivor rebuild bumps revisions; a request on a cluster
with quorum, naming members that answer, or with the survivor behind a backup of another
incarnation, refused with a reason and nothing changed."""
from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from backup_operator.observed import BackupResult
from backup_operator.status import success_status
from etcd_common.api import constants as c
from etcd_common.api.etcd_backup import EtcdBackup, parse_etcd_backup
from etcd_common.api.restore_source import DEFAULT_BUMP_REVISION
from etcd_common.api.versions import EtcdVersion
from etcd_common.seed.pod import recovery_seed_init_containers
from etcd_operator import actions
from etcd_operator.observed import MemberHealth, ObservedCluster
from etcd_operator.planning import plan_next_action
from etcd_operator.planning.recovery import plan_recovery_start
from etcd_operator.recovery_inputs import nodes_gone, with_recovery_inputs
from etcd_operator.status import compute_status
from kube_adapter.errors import KubeError, NotFound
from tests.unit.etcd_operator.etcd_cluster_builders import NEW_MEMBER, T0, UID, healthy_cluster, name, replace_pod
from tests.unit.etcd_operator.quorum_loss_builders import (
    ETCD_CLUSTER_ID,
    GONE_ABSENT,
    GONE_DELETING,
    GONE_NODE_DELETED,
    GONE_TERMINAL,
    lost_majority,
    recovering_cluster,
)

ANNOTATION = c.ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR
BOTH = f"{name(2)},{name(3)}"


# ---------------------------------------------------------------------------------------------
# Item 1: the lost members must be known gone


@pytest.mark.parametrize("gone_as, spec, annotation, starts", [
    pytest.param(GONE_NODE_DELETED, None, None, True, id="nodes-deleted"),
    pytest.param(GONE_TERMINAL, None, None, True, id="pods-terminal"),
    pytest.param(GONE_DELETING, None, None, False, id="pods-terminating-on-nodes-that-exist-split-brain"),
    # A pod object gone: the kubelet confirmed its containers stopped, the pod garbage collector
    # removed it with its deleted Node, or a person force-deleted it (their word it is gone).
    pytest.param(GONE_ABSENT, None, None, True, id="pods-gone"),
    pytest.param(GONE_DELETING, {}, "please", False, id="annotation-naming-no-one-is-no-proof"),
    pytest.param(GONE_DELETING, {}, BOTH, True, id="annotation-naming-them"),
    pytest.param(GONE_ABSENT, None, f"{name(2)} {name(3)}", True, id="annotation-naming-them-space-separated"),
    pytest.param(GONE_DELETING, {}, name(2), False, id="annotation-naming-one-of-two"),
])
def test_a_recovery_starts_only_when_every_lost_member_is_known_gone(
        gone_as: str, spec: dict[str, Any] | None, annotation: str | None, starts: bool) -> None:
    kwargs: dict[str, Any] = {"gone_as": gone_as, "annotation": annotation}
    if spec is not None:
        kwargs["spec"] = spec
    action = plan_next_action(lost_majority(**kwargs))
    if starts:
        assert isinstance(action, actions.StartQuorumRecovery), action
        assert action.lost_members == (name(2), name(3)) and action.survivor == name(1)
        return
    assert isinstance(action, actions.ReportQuorumLoss), action
    text = action.describe()
    assert "waits for proof" in text and f"{ANNOTATION}={BOTH}" in text, text
    assert "NotReady or tainted node, is no proof" in text


def test_a_zone_partition_never_rebuilds_from_the_minority() -> None:
    # 5 members; 3, 4 and 5 behind a partition, still serving; taint eviction marked their pods
    # deleted; their nodes exist (NotReady). Members 1 and 2 answer without a leader.
    observed = lost_majority(5, gone=(3, 4, 5), answering={1: (100, 42), 2: (99, 41)}, gone_as=GONE_DELETING)
    action = plan_next_action(observed)
    assert isinstance(action, actions.ReportQuorumLoss), action
    for member in (3, 4, 5):
        assert f"{name(member)} (its pod is being deleted on node node-{member}" in action.describe()


def test_a_member_a_person_names_counts_as_gone_though_its_pod_looks_alive() -> None:
    # member 3's pod still shows Running (its node died before it could say otherwise)
    observed = lost_majority(gone=(2,), gone_as=GONE_ABSENT, spec={}, annotation=BOTH)
    observed = replace_pod(observed, name(3), ready=False)
    action = plan_next_action(observed)
    assert isinstance(action, actions.StartQuorumRecovery), action
    assert action.lost_members == (name(2), name(3)) and action.request == BOTH
    assert f"{name(3)}: named in {ANNOTATION}" in action.reason


# ---------------------------------------------------------------------------------------------
# Bad input: refused with a reason, nothing changed


def _refused(observed: ObservedCluster, *words: str) -> dict[str, Any]:
    action = plan_next_action(observed)
    assert isinstance(action, actions.RefuseQuorumRecovery), action
    assert not action.has_effect and action.event_type == "Warning" and action.event_reason == "QuorumRecoveryRefused"
    for word in words:
        assert word in action.describe(), action.describe()
    return compute_status(observed, action, now=T0)


def test_a_request_on_a_cluster_with_quorum_is_refused() -> None:
    observed = recovering_cluster(healthy_cluster(3), spec={}, annotation="please")
    status = _refused(observed, "the cluster has quorum (3 of 3 voting members are healthy)", "remove the annotation")
    assert (status["phase"], status["reason"]) == ("Running", "QuorumRecoveryRefused")
    assert "recovery" not in status


def test_a_request_already_acted_on_is_not_refused_later() -> None:
    done = {"phase": "Recovered", "survivor": name(1), "seedMember": NEW_MEMBER, "request": "please"}
    observed = recovering_cluster(healthy_cluster(3), spec={}, annotation="please", recovery=done)
    assert not isinstance(plan_next_action(observed), actions.RefuseQuorumRecovery)


def test_a_request_while_the_operator_is_cut_off_from_a_cluster_with_quorum_is_refused() -> None:
    observed = healthy_cluster(3)
    observed = dataclasses.replace(observed, health={**observed.health, name(2): MemberHealth(False),
                                                     name(3): MemberHealth(False)}, quorum_confirmed_by=name(1))
    _refused(recovering_cluster(observed, spec={}, annotation="please"), "the cluster has quorum", name(1))


def test_a_request_naming_a_member_that_answers_is_refused() -> None:
    observed = lost_majority(spec={}, annotation=f"{name(1)},{name(3)}")
    status = _refused(observed, f"names member(s) {name(1)}, which answer", "quorum lost")
    assert (status["phase"], status["reason"]) == ("Failed", "QuorumRecoveryRefused")


# ---------------------------------------------------------------------------------------------
# Item 2: backups compared only within one incarnation


def backup(*, revision: int, incarnation: tuple[str, str] | None, endpoints: bool = False) -> EtcdBackup:
    spec: dict[str, Any] = {"storageType": "S3", "s3": {"path": "bucket/etcd/example", "awsSecret": "aws"}}
    if endpoints:
        spec["etcdEndpoints"] = ["http://example-client:2379"]
    else:
        spec["etcdCluster"] = {"name": "example"}
    last: dict[str, Any] = {"key": f"etcd/example_v{revision}", "size": 4096, "sha256": "b" * 64,
                            "etcdRevision": revision}
    if incarnation is not None:
        last.update(etcdClusterID=incarnation[0], etcdClusterUID=incarnation[1])
    return parse_etcd_backup({"metadata": {"name": "nightly", "namespace": "default", "uid": "b", "generation": 1},
                              "spec": spec, "status": {"succeeded": True, "etcdRevision": revision, "lastBackup": last}})


THIS = (f"{ETCD_CLUSTER_ID:x}", UID)
RECREATED = (f"{ETCD_CLUSTER_ID:x}", "uid-of-the-deleted-cluster")  # same name, deleted and recreated
REBUILT = ("5eed", UID)  # this EtcdCluster, an earlier etcd cluster (before a restore or recovery)


@pytest.mark.parametrize("annotation", [None, "please"])
@pytest.mark.parametrize("ahead", [
    pytest.param(backup(revision=5000, incarnation=RECREATED), id="of-a-deleted-cluster-of-the-same-name"),
    pytest.param(backup(revision=5000, incarnation=REBUILT), id="of-an-earlier-etcd-cluster"),
    pytest.param(backup(revision=5000, incarnation=None), id="recording-no-incarnation"),
    pytest.param(backup(revision=5000, incarnation=None, endpoints=True), id="by-endpoints"),
])
def test_a_survivor_behind_a_backup_of_another_incarnation_is_refused_never_replaced(
        ahead: EtcdBackup, annotation: str | None) -> None:
    kwargs: dict[str, Any] = {} if annotation is None else {"spec": {}, "annotation": BOTH}
    observed = dataclasses.replace(lost_majority(**kwargs), backups=(ahead,))
    status = _refused(observed, f"{name(1)} (revision 42) is behind EtcdBackup nightly (revision 5000)",
                      "never replaces the survivor's data", "delete EtcdBackup nightly")
    assert "recovery" not in status


@pytest.mark.parametrize("backups, expected", [
    pytest.param((backup(revision=50, incarnation=THIS),), "nightly", id="this-incarnation-ahead-restored"),
    pytest.param((backup(revision=30, incarnation=RECREATED),), "", id="another-incarnation-behind-not-compared"),
    pytest.param((backup(revision=30, incarnation=None),), "", id="no-incarnation-behind-not-compared"),
])
def test_only_a_backup_of_the_survivors_incarnation_is_restored_instead(backups: tuple[EtcdBackup, ...],
                                                                       expected: str) -> None:
    action = plan_next_action(dataclasses.replace(lost_majority(), backups=backups))
    assert isinstance(action, actions.StartQuorumRecovery), action
    assert action.backup == expected


def test_the_backup_operator_records_the_incarnation_and_the_etcd_operator_reads_it_back() -> None:
    from tests.support.openapi_schema import BACKUP_SCHEMA, validate

    result = BackupResult(key="k", size=1, sha256="ab", etcd_revision=7, etcd_version="3.6.16", started=T0,
                          duration_seconds=1.0, etcd_cluster_id=0xFEDCBA9876543210, etcd_cluster_uid=UID)
    status = success_status({}, 1, result, T0)
    assert status["lastBackup"]["etcdClusterID"] == "fedcba9876543210"  # uint64: hex, not the API's int64
    assert status["lastBackup"]["etcdClusterUID"] == UID
    assert validate(BACKUP_SCHEMA["properties"]["status"], status, ".status") == ([], [])
    last = parse_etcd_backup({"metadata": {"name": "b"}, "status": status}).status.last_backup
    assert last is not None and last.of_incarnation(0xFEDCBA9876543210, UID)
    assert not last.of_incarnation(0xFEDCBA9876543210, "another") and not last.of_incarnation(1, UID)
    # A backup by spec.etcdEndpoints names no EtcdCluster: its etcd cluster ID alone decides.
    by_endpoints = success_status({}, 1, dataclasses.replace(result, etcd_cluster_uid=""), T0)
    assert by_endpoints["lastBackup"]["etcdClusterID"] == "fedcba9876543210"
    assert "etcdClusterUID" not in by_endpoints["lastBackup"]
    last = parse_etcd_backup({"metadata": {"name": "b"}, "status": by_endpoints}).status.last_backup
    assert last is not None and last.of_incarnation(0xFEDCBA9876543210, UID) and not last.of_incarnation(1, UID)
    # One taken before incarnations were recorded is of none.
    unrecorded = success_status({}, 1, dataclasses.replace(result, etcd_cluster_id=0, etcd_cluster_uid=""), T0)
    assert "etcdClusterID" not in unrecorded["lastBackup"]
    last = parse_etcd_backup({"metadata": {"name": "b"}, "status": unrecorded}).status.last_backup
    assert last is not None and not last.of_incarnation(0xFEDCBA9876543210, UID)


# ---------------------------------------------------------------------------------------------
# Item 7: the survivor's revisions bumped and marked compacted


@pytest.mark.parametrize("version, bumped", [
    ("3.6.16", True), ("3.5.10", True), ("3.5.9", False), ("3.4.27", True), ("3.4.23", False),
])
def test_a_rebuild_from_the_survivor_bumps_revisions_where_the_tool_can(version: str, bumped: bool) -> None:
    _, restore = recovery_seed_init_containers(
        etcd_image="etcd", etcd_version=EtcdVersion.parse(version) or EtcdVersion(0, 0, 0), member="m",
        initial_cluster=(("m", "http://m:2380"),), cluster_token="t", survivor_client_url="http://s:2379",
        security_context={})
    flags = [f"--bump-revision={DEFAULT_BUMP_REVISION}", "--mark-compacted"]
    assert (restore["command"][-2:] == flags) is bumped


def test_a_rebuild_without_the_flags_says_what_it_means() -> None:
    observed = lost_majority()
    spec = dataclasses.replace(observed.cluster.require_spec(), version=EtcdVersion(3, 5, 9))
    voters = observed.local_members or ()
    action = plan_recovery_start(observed, spec, voters, actions.ReportQuorumLoss(0, 3, (name(1),)))
    assert isinstance(action, actions.StartQuorumRecovery), action
    assert "has no --bump-revision" in action.reason


# ---------------------------------------------------------------------------------------------
# Observation: the nodes of pods being deleted, only while a recovery may start


def test_a_node_is_gone_only_when_the_api_says_it_does_not_exist() -> None:
    observed = lost_majority(5, gone=(2, 3, 4, 5), gone_as=GONE_DELETING)
    existing = {"node-3": {"metadata": {"name": "node-3"}}}
    asked: list[str] = []

    def read_node(node: str) -> dict[str, Any] | None:
        asked.append(node)
        if node == "node-4":
            raise KubeError("forbidden: nodes")
        if node == "node-5":
            raise NotFound("nodes node-5")  # a KubeError: not known, not gone
        return existing.get(node)
    assert nodes_gone(observed, read_node) == frozenset({"node-2"})
    assert sorted(asked) == ["node-2", "node-3", "node-4", "node-5"]  # the survivor's node is not asked


class _NoBackups:
    def backups(self, namespace: str) -> list[dict[str, Any]]:
        return []


def test_nodes_are_read_only_while_a_recovery_may_start() -> None:
    asked: list[str] = []

    def read_node(node: str) -> None:
        asked.append(node)
    observed = with_recovery_inputs(lost_majority(gone_as=GONE_DELETING), _NoBackups(), read_node)
    assert observed.nodes_gone == frozenset({"node-2", "node-3"}) and len(asked) == 2
    with_recovery_inputs(lost_majority(gone_as=GONE_DELETING, spec={}), _NoBackups(), read_node)
    assert len(asked) == 2  # no recovery asked for
    assert with_recovery_inputs(lost_majority(gone_as=GONE_DELETING), _NoBackups()).nodes_gone == frozenset()
