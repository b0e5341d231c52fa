"""Quorum-loss recovery from the survivor furthest ahead (quorum_recovery.py, planning rules 4b and
8b): when it starts, when it refuses or waits, its steps, its bound, and its record in status."""
from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import RECOVERY_FAILED, RECOVERY_SEEDING, EtcdCluster
from etcd_common.api.restore_source import DEFAULT_BUMP_REVISION
from etcd_operator import actions
from etcd_operator.manifests import build_recovery_seed_pod, member_client_url
from etcd_operator.observed import ObservedPVC
from etcd_operator.observing import _asked_during_recovery
from etcd_operator.planning import plan_next_action
from etcd_operator.planning.recovery import RECOVERY_TIMEOUT_SECONDS, has_data
from etcd_operator.spec import parse_etcd_cluster
from etcd_operator.status import REASON_QUORUM_RECOVERING, compute_status
from tests.unit.etcd_operator.etcd_cluster_builders import (
    NEW_MEMBER,
    T0,
    UID,
    healthy_cluster,
    make_pod,
    name,
    raw_cluster,
    replace_pod,
    unhealthy,
    without_pods,
    without_volumes,
)
from tests.unit.etcd_operator.quorum_loss_builders import (
    FROM_SURVIVOR,
    GONE_ABSENT,
    SEEDING,
    answering_status,
    in_progress,
    lost_majority,
    recovering_cluster,
    with_seed,
)

PVC_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


# ---------------------------------------------------------------------------------------------
# When to start (rules 5 and 8: 8b)


def test_policy_report_only_reports_and_says_how_to_recover() -> None:
    action = plan_next_action(lost_majority(spec={}))
    assert isinstance(action, actions.ReportQuorumLoss)
    assert c.QUORUM_LOSS_FROM_SURVIVOR in action.describe() and "lost their data" in action.describe()


def test_policy_from_survivor_starts_a_recovery_from_the_survivor() -> None:
    action = plan_next_action(lost_majority())
    assert action == actions.StartQuorumRecovery(
        survivor=name(1), survivor_revision=42, survivor_raft_index=100, lost_members=(name(2), name(3)),
        seed_member=NEW_MEMBER, request="", reason=action.reason if isinstance(action, actions.StartQuorumRecovery) else "",
    )


def test_on_pvcs_a_member_whose_claim_is_gone_has_lost_its_data() -> None:
    action = plan_next_action(lost_majority(pvc=True))
    assert isinstance(action, actions.StartQuorumRecovery)
    assert action.survivor == name(1) and action.lost_members == (name(2), name(3))


def test_on_pvcs_members_whose_claims_remain_are_restarted_not_recovered() -> None:
    observed = lost_majority(pvc=True, gone_as=GONE_ABSENT)
    observed = dataclasses.replace(observed, pvcs=(*observed.pvcs, ObservedPVC(name(2), name(2)),
                                                   ObservedPVC(name(3), name(3))))
    action = plan_next_action(observed)
    assert isinstance(action, actions.CreateMemberPod) and action.member_name == name(2)


def test_members_with_data_making_a_quorum_are_waited_for() -> None:
    # member 2's pod exists (pending, not answering): with member 1 a quorum of 3 has its data
    observed = lost_majority(gone=(3,))
    observed = replace_pod(observed, name(2), phase="Pending", ready=False)
    action = plan_next_action(observed)
    assert isinstance(action, actions.ReportQuorumLoss)
    assert "lost their data" not in action.describe()


def test_a_member_with_data_that_does_not_answer_makes_the_recovery_wait() -> None:
    # 5 voters, 3 gone: members 1 and 2 have data; 2 (pending on a dead node, say) does not answer
    observed = lost_majority(5, gone=(3, 4, 5))
    observed = replace_pod(observed, name(2), phase="Pending", ready=False)
    action = plan_next_action(observed)
    assert isinstance(action, actions.ReportQuorumLoss)
    assert f"{name(2)} have data but do not answer" in action.describe()


def test_the_survivor_is_the_member_furthest_ahead_by_raft_index_then_revision() -> None:
    observed = lost_majority(5, gone=(3, 4, 5), answering={1: (100, 50), 2: (120, 40)})
    action = plan_next_action(observed)
    assert isinstance(action, actions.StartQuorumRecovery)
    assert (action.survivor, action.survivor_raft_index, action.survivor_revision) == (name(2), 120, 40)
    tied = lost_majority(5, gone=(3, 4, 5), answering={1: (100, 50), 2: (100, 40)})
    action = plan_next_action(tied)
    assert isinstance(action, actions.StartQuorumRecovery) and action.survivor == name(1)


def test_quorum_loss_seen_with_a_member_list_etcd_34_starts_the_same_way() -> None:
    observed = unhealthy(without_pods(healthy_cluster(3), name(2), name(3)), name(2), name(3))
    # their pods being deleted on nodes that are deleted: the proof that they are gone
    gone = tuple(make_pod(observed.cluster, name(i), index=i, deleting=True, node_name=f"node-{i}") for i in (2, 3))
    observed = dataclasses.replace(observed, endpoint_status={name(1): answering_status(1, 100, 42)},
                                   pods=(*observed.pods, *gone), nodes_gone=frozenset({"node-2", "node-3"}))
    action = plan_next_action(recovering_cluster(observed, spec=FROM_SURVIVOR))
    assert isinstance(action, actions.StartQuorumRecovery) and action.lost_members == (name(2), name(3))
    assert isinstance(plan_next_action(recovering_cluster(observed, spec={})), actions.ReportQuorumLoss)


CLIENT_TLS = {"TLS": {"static": {"member": {"peerSecret": "p", "serverSecret": "s"}, "operatorSecret": "o"}}}


def test_client_tls_clusters_are_recovered_too() -> None:
    action = plan_next_action(lost_majority(spec={**FROM_SURVIVOR, **CLIENT_TLS}))
    assert isinstance(action, actions.StartQuorumRecovery), action


@pytest.mark.parametrize("version", ["3.6.16", "3.4.23"])  # 3.4: the operator secret is mounted for probes already
def test_under_client_tls_the_snapshot_step_alone_dials_the_survivor_with_the_operators_certificate(
        version: str) -> None:
    cluster = parse_etcd_cluster(raw_cluster({"version": version, **CLIENT_TLS}))
    survivor_url = member_client_url(cluster, name(1))
    assert survivor_url.startswith("https://")
    pod = build_recovery_seed_pod(cluster, NEW_MEMBER, survivor_client_url=survivor_url, token="t")
    snapshot, restore = pod["spec"]["initContainers"]
    directory = "/etc/etcdtls/operator/etcd-tls"
    assert snapshot["command"][:5] == [
        "/usr/local/bin/etcdctl", f"--endpoints={survivor_url}", f"--cacert={directory}/etcd-client-ca.crt",
        f"--cert={directory}/etcd-client.crt", f"--key={directory}/etcd-client.key"]
    assert {"name": "etcd-client-tls", "mountPath": directory, "readOnly": True} in snapshot["volumeMounts"]
    assert all(m["name"] != "etcd-client-tls" for m in restore["volumeMounts"])
    [volume] = [v for v in pod["spec"]["volumes"] if v["name"] == "etcd-client-tls"]
    assert volume["secret"]["secretName"] == "o" and volume["secret"]["defaultMode"] == 0o440
    if version == "3.6.16":  # etcd itself never mounts it (probed on the metrics listener)
        assert all(m["name"] != "etcd-client-tls" for m in pod["spec"]["containers"][0]["volumeMounts"])


def test_the_one_off_annotation_is_honoured_once() -> None:
    action = plan_next_action(lost_majority(spec={}, annotation="please"))
    assert isinstance(action, actions.StartQuorumRecovery) and action.request == "please"
    done = {"phase": "Recovered", "survivor": name(1), "seedMember": NEW_MEMBER, "request": "please"}
    assert isinstance(plan_next_action(lost_majority(spec={}, annotation="please", recovery=done)),
                      actions.ReportQuorumLoss)
    again = plan_next_action(lost_majority(spec={}, annotation="again", recovery=done))
    assert isinstance(again, actions.StartQuorumRecovery) and again.request == "again"


def test_after_a_failed_recovery_the_same_survivor_is_not_tried_again_unasked() -> None:
    failed = {"phase": RECOVERY_FAILED, "survivor": name(1), "seedMember": NEW_MEMBER, "reason": "seed did not serve"}
    action = plan_next_action(lost_majority(recovery=failed))
    assert isinstance(action, actions.ReportQuorumLoss) and "seed did not serve" in action.describe()
    assert isinstance(plan_next_action(lost_majority(recovery=failed, annotation="retry")),
                      actions.StartQuorumRecovery)


@pytest.mark.parametrize("pvc, pod_fields, volume, expected", [
    pytest.param(False, None, False, False, id="emptydir-pod-absent"),
    pytest.param(False, {"phase": "Failed"}, False, False, id="emptydir-pod-terminal"),
    pytest.param(False, {"deleting": True}, False, False, id="emptydir-pod-being-deleted"),
    pytest.param(False, {"phase": "Pending", "ready": False}, False, True, id="emptydir-pod-pending"),
    pytest.param(True, None, True, True, id="pvc-claim-without-pod"),
    pytest.param(True, None, False, False, id="pvc-claim-and-pod-absent"),
    pytest.param(True, {"phase": "Pending", "ready": False}, False, True, id="pvc-pod-without-claim"),
])
def test_whether_a_members_data_exists(pvc: bool, pod_fields: dict[str, Any] | None, volume: bool,
                                       expected: bool) -> None:
    observed = without_volumes(without_pods(healthy_cluster(3, pvc=pvc), name(2)), name(2))
    if pod_fields is not None:
        observed = dataclasses.replace(observed, pods=(*observed.pods, make_pod(observed.cluster, name(2), **pod_fields)))
    if volume:
        observed = dataclasses.replace(observed, pvcs=(*observed.pvcs, ObservedPVC(name(2), name(2))))
    assert has_data(observed, observed.cluster.require_spec(), name(2)) is expected


# ---------------------------------------------------------------------------------------------
# Its steps (rule 4b)


def test_the_survivor_is_drained_before_the_seed_is_created() -> None:
    observed = replace_pod(in_progress(), name(1), serving=True)
    action = plan_next_action(observed)
    assert isinstance(action, actions.SetServing) and (action.pod_name, action.serving) == (name(1), False)


def test_the_seed_is_created_from_the_survivors_client_url_with_a_new_token() -> None:
    observed = in_progress()
    action = plan_next_action(observed)
    assert isinstance(action, actions.CreateRecoverySeed)
    assert action.member_name == NEW_MEMBER
    assert action.survivor_client_url == member_client_url(observed.cluster, name(1))
    assert action.cluster_token == f"{UID}-{NEW_MEMBER}"


def test_a_seed_pod_gone_before_it_served_starts_afresh_on_pvcs() -> None:
    observed = in_progress(pvc=True)
    observed = dataclasses.replace(observed, pvcs=(*observed.pvcs, ObservedPVC(NEW_MEMBER, NEW_MEMBER)))
    action = plan_next_action(observed)
    assert isinstance(action, actions.DeletePVC) and action.pvc_name == NEW_MEMBER
    survivor_gone = dataclasses.replace(observed, pods=())
    action = plan_next_action(survivor_gone)
    assert isinstance(action, actions.CreateMemberPod) and action.member_name == NEW_MEMBER


def test_while_the_seed_starts_nothing_else_changes() -> None:
    action = plan_next_action(with_seed(in_progress(), serves=False))
    assert isinstance(action, actions.Wait) and NEW_MEMBER in action.describe()


def test_a_seed_behind_the_survivors_revision_does_not_count_as_serving() -> None:
    action = plan_next_action(with_seed(in_progress(), revision=41))
    assert isinstance(action, actions.Wait)


def test_once_the_seed_serves_the_old_pods_then_claims_go_then_the_recovery_is_done() -> None:
    observed = with_seed(in_progress(pvc=True))
    observed = dataclasses.replace(observed, pvcs=(*observed.pvcs, ObservedPVC(name(2), name(2))))
    action = plan_next_action(observed)
    assert isinstance(action, actions.DeletePod) and action.pod_name == name(1)
    observed = dataclasses.replace(observed, pods=tuple(p for p in observed.pods if p.name != name(1)))
    action = plan_next_action(observed)
    assert isinstance(action, actions.DeletePVC) and action.pvc_name == name(1)
    observed = dataclasses.replace(observed, pvcs=tuple(v for v in observed.pvcs if v.name == NEW_MEMBER))
    action = plan_next_action(observed)
    assert action == actions.FinishQuorumRecovery(NEW_MEMBER, name(1), 42, (name(2), name(3)))


def test_after_the_recovery_the_cluster_grows_back_one_member_at_a_time() -> None:
    observed = with_seed(in_progress())
    observed = dataclasses.replace(observed, pods=tuple(p for p in observed.pods if p.name == NEW_MEMBER),
                                   name_suffix="new01")
    done = {**SEEDING, "phase": "Recovered"}
    observed = recovering_cluster(observed, spec=FROM_SURVIVOR, recovery=done)
    action = plan_next_action(observed)
    assert isinstance(action, actions.AddMember) and action.member_name.endswith("new01")


def test_a_seed_that_does_not_serve_in_time_fails_and_is_removed_and_the_survivor_serves_again() -> None:
    late = with_seed(in_progress(started_minutes_ago=RECOVERY_TIMEOUT_SECONDS / 60 + 1), serves=False)
    action = plan_next_action(late)
    assert isinstance(action, actions.FailQuorumRecovery) and "did not serve" in action.reason
    failed = recovering_cluster(late, spec=FROM_SURVIVOR, recovery={**SEEDING, "phase": RECOVERY_FAILED, "reason": action.reason})
    action = plan_next_action(failed)
    assert isinstance(action, actions.DeletePod) and action.pod_name == NEW_MEMBER
    failed = dataclasses.replace(failed, pods=tuple(p for p in failed.pods if p.name != NEW_MEMBER))
    action = plan_next_action(failed)
    assert isinstance(action, actions.SetServing) and (action.pod_name, action.serving) == (name(1), True)
    failed = replace_pod(failed, name(1), serving=True)
    assert isinstance(plan_next_action(failed), actions.Wait)  # nothing answers (the seed alone was asked)


def test_during_a_recovery_only_the_seed_is_asked_and_after_a_failure_never_the_seed() -> None:
    cluster = recovering_cluster(in_progress(), spec=FROM_SURVIVOR, recovery=SEEDING).cluster
    recovery = cluster.recorded.recovery
    assert recovery is not None
    assert _asked_during_recovery(recovery, NEW_MEMBER) and not _asked_during_recovery(recovery, name(1))
    failed = dataclasses.replace(recovery, phase=RECOVERY_FAILED)
    assert not _asked_during_recovery(failed, NEW_MEMBER) and _asked_during_recovery(failed, name(1))
    assert _asked_during_recovery(None, name(1))


# ---------------------------------------------------------------------------------------------
# status.recovery


def test_status_records_the_recovery_before_anything_changes_and_keeps_it() -> None:
    observed = lost_majority()
    action = plan_next_action(observed)
    status = compute_status(observed, action, now=T0)
    recovery = status["recovery"]
    assert recovery["phase"] == RECOVERY_SEEDING and recovery["survivor"] == name(1)
    assert recovery["seedMember"] == NEW_MEMBER and recovery["survivorRevision"] == 42
    assert recovery["lostMembers"] == [name(2), name(3)]
    raw = raw_cluster({"size": 3, **FROM_SURVIVOR}, status={**status, "bootstrapped": True})
    cluster: EtcdCluster = parse_etcd_cluster(raw)
    assert cluster.recorded.recovery is not None and cluster.recorded.recovery.in_progress
    waiting = compute_status(dataclasses.replace(observed, cluster=cluster), actions.Wait("seed starting"), now=T0)
    assert waiting["recovery"] == recovery
    assert (waiting["phase"], waiting["reason"]) == ("Failed", REASON_QUORUM_RECOVERING)


@pytest.mark.parametrize("action", [
    pytest.param(None, id="started"),
    pytest.param(actions.FinishQuorumRecovery(NEW_MEMBER, name(1), 57, (name(2), name(3))), id="recovered"),
    pytest.param(actions.FailQuorumRecovery(NEW_MEMBER, name(1), "seed did not serve"), id="failed"),
])
def test_status_recovery_fits_the_crd_schema(action: actions.Action | None) -> None:
    from tests.support.openapi_schema import CLUSTER_SCHEMA, validate

    observed = lost_majority() if action is None else with_seed(in_progress())
    status = compute_status(observed, action or plan_next_action(observed), now=T0)
    assert "recovery" in status
    assert validate(CLUSTER_SCHEMA["properties"]["status"], status, ".status") == ([], [])


def test_status_says_what_was_recovered() -> None:
    observed = with_seed(in_progress())
    status = compute_status(observed, actions.FinishQuorumRecovery(NEW_MEMBER, name(1), 57, (name(2), name(3))),
                            now=T0)
    assert status["recovery"]["phase"] == "Recovered" and status["recovery"]["recoveredRevision"] == 57
    assert status["phase"] == "Running"


def test_spec_recovery_policy_is_parsed_and_checked() -> None:
    assert parse_etcd_cluster(raw_cluster({})).require_spec().quorum_loss == c.QUORUM_LOSS_REPORT
    assert parse_etcd_cluster(raw_cluster(FROM_SURVIVOR)).require_spec().quorum_loss == c.QUORUM_LOSS_FROM_SURVIVOR
    wrong = parse_etcd_cluster(raw_cluster({"recovery": {"quorumLoss": "Always"}}))
    assert wrong.spec is None and "spec.recovery.quorumLoss" in (wrong.spec_error or "")


# ---------------------------------------------------------------------------------------------
# The seed pod's init containers


# The survivor's revisions bumped past any the lost majority may have used, and marked compacted
# (issue 41 item 7), where the tool has the flags (etcdutl 3.5.10+, etcdctl 3.4.27+).
BUMPED = [f"--bump-revision={DEFAULT_BUMP_REVISION}", "--mark-compacted"]


@pytest.mark.parametrize("version, tool, env, bump", [
    ("3.6.16", "/usr/local/bin/etcdutl", None, BUMPED),
    ("3.4.23", "/usr/local/bin/etcdctl", [{"name": "ETCDCTL_API", "value": "3"}], []),
])
def test_recovery_seed_pod_snapshots_the_survivor_and_restores_it_as_a_one_member_cluster(
        version: str, tool: str, env: Any, bump: list[str]) -> None:
    cluster = parse_etcd_cluster(raw_cluster({"version": version}))
    survivor_url = member_client_url(cluster, name(1))
    pod = build_recovery_seed_pod(cluster, NEW_MEMBER, survivor_client_url=survivor_url, token=f"{UID}-{NEW_MEMBER}")
    snapshot, restore = pod["spec"]["initContainers"]
    image = f"{cluster.require_spec().repository}:v{version}"
    assert snapshot["name"] == "recovery-snapshot" and snapshot["image"] == image
    assert snapshot["command"] == [
        "/usr/local/bin/etcdctl", f"--endpoints={survivor_url}", "--dial-timeout=10s", "--command-timeout=300s",
        "snapshot", "save", "/var/etcd/recovery-snapshot.db",
    ]
    peer = f"http://{NEW_MEMBER}.example.default.svc:2380"
    assert restore["name"] == "recovery-restore" and restore["image"] == image
    assert restore["command"] == [
        tool, "snapshot", "restore", "/var/etcd/recovery-snapshot.db", "--data-dir=/var/etcd/data",
        f"--name={NEW_MEMBER}", f"--initial-cluster={NEW_MEMBER}={peer}", f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster-token={UID}-{NEW_MEMBER}", *bump,
    ]
    assert restore.get("env") == env
    etcd = pod["spec"]["containers"][0]
    assert "--initial-cluster-state=new" in etcd["command"]
    assert pod["metadata"]["annotations"][c.ANNOTATION_INITIAL_CLUSTER_STATE] == "new"


def test_observation_during_a_recovery_asks_the_seed_alone() -> None:
    from tests.unit.etcd_operator.etcd_cluster_builders import make_cluster
    from tests.unit.etcd_operator.observing_fakes import MEMBERS, FakeEtcd, observe

    seed = MEMBERS[2]
    cluster = make_cluster(status={"bootstrapped": True, "recovery": {**SEEDING, "survivor": MEMBERS[0],
                                                                      "seedMember": seed}})
    urls = {member_client_url(cluster, m) for m in MEMBERS}
    etcd = FakeEtcd()
    observe(cluster, etcd, urls)
    assert {url for _, endpoints in etcd.asked for url in endpoints} == {member_client_url(cluster, seed)}
