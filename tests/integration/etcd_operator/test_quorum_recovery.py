"""Quorum-loss recovery from the surviving member (spec.recovery.quorumLoss: FromSurvivor): two of
three members lose their data for good (emptyDir pods deleted; on PVCs, pods and claims deleted);
the operator rebuilds the cluster from the survivor, keeping every key written before, and grows
it back to spec.size. Under the default policy (Report) the same loss is only reported."""
from __future__ import annotations

from typing import Any

import pytest

from etcd_common.api import constants as c
from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.etcd_data import member_url, read_prefix
from tests.integration.etcd_operator.operator_clusters import GROUP, PLURAL, VERSION, Clusters, etcd_cluster
from tests.integration.etcd_operator.status_history import conditions

PREFIX = "/recovery/"
KEYS = 200
PVC_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
FROM_SURVIVOR = {"recovery": {"quorumLoss": "FromSurvivor"}}


def _write_keys(clusters: Clusters, name: str) -> dict[str, str]:
    """KEYS keys written with quorum (etcdctl txn batches through the client service), then
    waited for on every member's local copy, so whichever member survives holds them all."""
    written = {f"{PREFIX}{i:04d}": f"value-{i}" for i in range(KEYS)}
    items = list(written.items())
    for start in range(0, len(items), 50):
        script = "\n" + "".join(f"put {key} {value}\n" for key, value in items[start:start + 50]) + "\n\n"
        result = clusters.sandbox.etcdctl([clusters.client_url(name)], "txn", stdin=script)
        assert result.returncode == 0 and result.stdout.startswith("SUCCESS"), result.stderr
    for pod in clusters.live_pods(name):
        url = member_url(clusters, name, pod.metadata.name)

        def holds_all(url: str = url) -> bool:
            return read_prefix(clusters.sandbox, [url], PREFIX, serializable=True) == written
        wait_for(holds_all, timeout=30, what=f"every key on {pod.metadata.name}")
    return written


def _lose_two_members(clusters: Clusters, name: str, *, claims: bool) -> tuple[str, list[str]]:
    """Delete two member pods (the leader among them), and first their claims when `claims`;
    returns (survivor, lost members)."""
    status = clusters.status(name)
    pods = sorted(p.metadata.name for p in clusters.live_pods(name))
    leader = status["leader"]
    survivor = next(p for p in pods if p != leader)
    lost = sorted(p for p in pods if p != survivor)
    if claims:
        # Claims first (held by their pods until those go), so no pod is restarted on them.
        for member in lost:
            clusters.core.delete_namespaced_persistent_volume_claim(member, clusters.namespace)
    for member in lost:
        clusters.core.delete_namespaced_pod(member, clusters.namespace)
    return survivor, lost


def _event(clusters: Clusters, name: str, reason: str) -> Any:
    return wait_for(lambda: next((e for e in clusters.events(name) if e.reason == reason), None),
                    timeout=60, what=f"event {reason}")


def _recovers_keeping_every_key(clusters: Clusters, name: str, *, claims: bool) -> None:
    spec: dict[str, Any] = dict(FROM_SURVIVOR)
    if claims:
        spec["pod"] = {"persistentVolumeClaimSpec": PVC_SPEC}
    clusters.create(etcd_cluster(name, size=3, **spec))
    clusters.wait_running(name, ready=3, timeout=240)
    written = _write_keys(clusters, name)
    survivor, lost = _lose_two_members(clusters, name, claims=claims)

    def recovered() -> dict[str, Any]:
        status = clusters.status(name)
        recovery = status.get("recovery") or {}
        assert recovery.get("phase") != "Failed", f"recovery failed: {recovery}"
        return status if recovery.get("phase") == "Recovered" else {}
    recovery = wait_for(recovered, timeout=300, what=f"{name}: status.recovery.phase Recovered")["recovery"]
    assert recovery["survivor"] == survivor, recovery
    assert sorted(recovery["lostMembers"]) == lost, recovery
    assert recovery["recoveredRevision"] >= recovery["survivorRevision"] > 0, recovery

    status = clusters.wait_running(name, ready=3, timeout=300)
    members = set(status["members"]["ready"])
    assert recovery["seedMember"] in members and not members & {survivor, *lost}, status
    assert read_prefix(clusters.sandbox, [clusters.client_url(name)], PREFIX) == written
    started = _event(clusters, name, "QuorumRecoveryStarted")
    assert started.type == "Warning" and survivor in started.message, started.message
    assert survivor in _event(clusters, name, "QuorumRecovered").message
    if claims:
        def claims_gone() -> bool:
            claims = clusters.core.list_namespaced_persistent_volume_claim(
                clusters.namespace, label_selector=f"etcd_cluster={name}").items
            return not {claim.metadata.name for claim in claims} & {survivor, *lost}
        wait_for(claims_gone, timeout=60, what="the old members' claims deleted")


def test_emptydir_cluster_recovers_from_its_survivor(clusters: Clusters) -> None:
    _recovers_keeping_every_key(clusters, "survivor-ed", claims=False)


def test_pvc_cluster_recovers_from_its_survivor(clusters: Clusters) -> None:
    _recovers_keeping_every_key(clusters, "survivor-pv", claims=True)


@pytest.mark.parametrize("policy", [pytest.param({}, id="default"), pytest.param({"recovery": {"quorumLoss": "Report"}},
                                                                                id="explicit")])
def test_policy_report_only_reports(clusters: Clusters, policy: dict[str, Any]) -> None:
    name = "reported"
    clusters.create(etcd_cluster(name, size=3, **policy))
    clusters.wait_running(name, ready=3, timeout=240)
    survivor, _lost = _lose_two_members(clusters, name, claims=False)
    survivor_uid = next(p.metadata.uid for p in clusters.live_pods(name) if p.metadata.name == survivor)

    def reported(status: dict[str, Any]) -> bool:
        # The planner judged the loss permanent and says how to recover: the recovery rule ran.
        return (status.get("phase") == "Failed" and conditions(status).get("Available", ("",))[0] == "False"
                and "FromSurvivor" in (status.get("message") or ""))
    status = clusters.wait_status(name, reported, "quorum loss reported with the way to recover", timeout=120)
    assert "recovery" not in status, status
    assert [(p.metadata.name, p.metadata.uid) for p in clusters.live_pods(name)] == [(survivor, survivor_uid)]
    assert not [e for e in clusters.events(name) if e.reason.startswith("QuorumRecover")]
    assert any(e.reason == "QuorumLost" and e.type == "Warning" for e in clusters.events(name))


def test_a_recovery_annotation_on_a_cluster_with_quorum_is_refused_and_changes_nothing(clusters: Clusters) -> None:
    """Bad input (issue 41): the one-off recovery annotation, naming a member, on a healthy cluster.
    Rebuilding from one member would drop the others' writes: refused with a reason (status reason
    QuorumRecoveryRefused, a Warning event), every member and pod kept; the reason goes with the
    annotation."""
    name = "asked-under-quorum"
    clusters.create(etcd_cluster(name, size=3))
    clusters.wait_running(name, ready=3, timeout=180)
    clusters.put(name, "/kept", "yes")
    members_before = sorted((m["name"], m["ID"]) for m in clusters.member_list(name))
    pods_before = sorted((p.metadata.name, p.metadata.uid) for p in clusters.live_pods(name))
    named = members_before[0][0]
    _annotate(clusters, name, named)

    status = clusters.wait_status(name, lambda s: s.get("reason") == "QuorumRecoveryRefused",
                                  "the recovery request refused", timeout=60)
    assert status.get("phase") == "Running", status
    assert "the cluster has quorum (3 of 3 voting members are healthy)" in status.get("message", ""), status
    assert "remove the annotation" in status.get("message", ""), status
    events = wait_for(lambda: [e for e in clusters.events(name) if e.reason == "QuorumRecoveryRefused"],
                      timeout=30, what="a QuorumRecoveryRefused event")
    assert events[0].type == "Warning", events[0]
    assert sorted((m["name"], m["ID"]) for m in clusters.member_list(name)) == members_before
    assert sorted((p.metadata.name, p.metadata.uid) for p in clusters.live_pods(name)) == pods_before
    assert clusters.get_value(name, "/kept") == "yes"

    _annotate(clusters, name, None)
    clusters.wait_status(name, lambda s: s.get("reason") != "QuorumRecoveryRefused" and s.get("phase") == "Running",
                         "the refusal gone with the annotation", timeout=60)
    assert sorted((p.metadata.name, p.metadata.uid) for p in clusters.live_pods(name)) == pods_before


def test_a_recovery_annotation_naming_a_member_that_answers_is_refused_and_changes_nothing(
        clusters: Clusters) -> None:
    """Bad input (issue 41): quorum lost (two of three emptyDir members deleted), and the one-off
    annotation names the member that is left and answers. A member that answers is not gone:
    refused with a reason (status reason QuorumRecoveryRefused, a Warning event), nothing rebuilt;
    once the annotation is gone, the loss is reported as before."""
    name = "names-the-living"
    clusters.create(etcd_cluster(name, size=3))
    clusters.wait_running(name, ready=3, timeout=180)
    survivor, _lost = _lose_two_members(clusters, name, claims=False)
    clusters.wait_status(name, _quorum_lost_reported, "quorum loss reported", timeout=120)
    pods_before = [(p.metadata.name, p.metadata.uid) for p in clusters.live_pods(name)]
    assert [pod for pod, _ in pods_before] == [survivor]
    _annotate(clusters, name, survivor)

    status = clusters.wait_status(name, lambda s: s.get("reason") == "QuorumRecoveryRefused",
                                  "the recovery request refused", timeout=60)
    assert f"names member(s) {survivor}, which answer" in status.get("message", ""), status
    assert "recovery" not in status, status
    events = wait_for(lambda: [e for e in clusters.events(name) if e.reason == "QuorumRecoveryRefused"],
                      timeout=30, what="a QuorumRecoveryRefused event")
    assert events[0].type == "Warning" and survivor in events[0].message, events[0]
    assert [(p.metadata.name, p.metadata.uid) for p in clusters.live_pods(name)] == pods_before
    assert not [e for e in clusters.events(name) if e.reason in ("QuorumRecoveryStarted", "QuorumRecoveryFromBackup")]

    _annotate(clusters, name, None)
    clusters.wait_status(name, _quorum_lost_reported, "the loss reported again", timeout=60)
    assert [(p.metadata.name, p.metadata.uid) for p in clusters.live_pods(name)] == pods_before


def _quorum_lost_reported(status: dict[str, Any]) -> bool:
    return (status.get("phase") == "Failed" and status.get("reason") != "QuorumRecoveryRefused"
            and conditions(status).get("Available", ("", ""))[:2] == ("False", "QuorumLost"))


def _annotate(clusters: Clusters, name: str, value: str | None) -> None:
    """Set (None: remove) the one-off recovery annotation, as `kubectl annotate` does."""
    clusters.custom.patch_namespaced_custom_object(
        GROUP, VERSION, clusters.namespace, PLURAL, name,
        {"metadata": {"annotations": {c.ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR: value}}})
