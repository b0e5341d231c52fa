"""Every action has a metrics kind from a small fixed set, a description, and event metadata."""
from __future__ import annotations

import typing

import pytest

from etcd_common.etcd.alarms import CORRUPT, NOSPACE, Alarm
from etcd_operator import actions

SAMPLES: list[actions.Action] = [
    actions.Pause(),
    actions.RejectSpec("bad"),
    actions.ReportQuorumLoss(1, 3, ("a", "b")),
    actions.ReportMembersLost("all members lost; restore from backup"),
    actions.RefuseNames("ServiceNameTaken", "Service example-client exists and is not owned by any object"),
    actions.Wait("learner catching up"),
    actions.NoOp(),
    actions.CreateServices(("example", "example-client")),
    actions.PublishNotReadyAddresses("example"),
    actions.UpdateClientSelector("example-client"),
    actions.SetServing("example-abcde", False, "removed next"),
    actions.SetDisruptionBudget("example", 2, True, "a quorum of 3 voting members stays available"),
    actions.CreateSeedMember("example-abcde", "http://example-abcde.example.default.svc:2380"),
    actions.CreateRestoredMembers((("example-a", "http://a:2380"), ("example-b", "http://b:2380")), ("example-b",)),
    actions.CreateMemberPod("example-abcde", (), "interrupted add"),
    actions.DeletePod("example-abcde", "orphan"),
    actions.DeletePVC("example-abcde", "orphan"),
    actions.ClearLeavingMark("example-abcde", "example-abcde"),
    actions.AddMember("example-abcde", "http://x:2380", True, ()),
    actions.PromoteMember("example-abcde", 0xABC),
    actions.RemoveMember("example-abcde", 0xABC, "scale", "too many"),
    actions.MoveLeader("a", 1, "b", 2, "a is removed"),
    actions.UpgradeMember("example-abcde", "example-abcde", "runs 3.4.23"),
    actions.StopMember("example-abcde", 0xABC, "example-abcde", "too many"),
    actions.Defragment("example-abcde", 0xABC, "example-abcde", 100, 10, "fragmented", "90 % reclaimable"),
    actions.CompactHistory(4321, "NOSPACE"),
    actions.DisarmAlarm(Alarm(NOSPACE, 0xABC), "recovered"),
    actions.ReportAlarm(CORRUPT, "raised for a majority"),
    actions.IssueCertificates(("ca", "peer", "server", "operator"), "secret example-tls-ca missing"),
    actions.PublishCATrust(("peer",), "secret example-tls-peer peer-ca.crt is not the cluster's CAs"),
    actions.AdoptCA("example-tls-ca"),
    actions.StartCARotation("asked for", "1"),
    actions.ReissueFromNewCA("every member trusts the new CA"),
    actions.DropOldCA("every certificate is the new CA's"),
    actions.ApplyCertManagerCertificates(("peer",), "example-certmanager-peer: missing"),
    actions.ReportCertificateProblem("IssuerNotFound", "Issuer ca not found"),
    actions.StartQuorumRecovery("example-a", 42, 50, ("example-b", "example-c"), "example-d", "", "lost"),
    actions.CreateRecoverySeed("example-d", "http://example-d:2380", "http://example-a:2379", "t-example-d", "r"),
    actions.FinishQuorumRecovery("example-d", "example-a", 42, ("example-b", "example-c")),
    actions.FailQuorumRecovery("example-d", "example-a", "seed did not serve"),
    actions.RefuseQuorumRecovery("the cluster has quorum"),
]
KINDS = {
    "pause", "reject", "refuse-names", "quorum-lost", "members-lost", "wait", "noop", "services", "disruption-budget", "seed", "recreate",
    "delete-pod", "delete-pvc", "clear-leaving-mark", "add", "promote", "remove", "replace", "upgrade", "move-leader", "serving",
    "defragment", "compact", "disarm", "alarm", "stop", "issue-certificates",
    "publish-ca-trust", "start-ca-rotation", "reissue-from-new-ca", "drop-old-ca",
    "quorum-recovery", "apply-certificates", "certificate-problem",
}


def test_samples_cover_every_action_type() -> None:
    assert {type(a) for a in SAMPLES} == set(typing.get_args(actions.Action))


@pytest.mark.parametrize("action", SAMPLES, ids=lambda a: type(a).__name__)
def test_action_metadata(action: actions.Action) -> None:
    assert action.kind in KINDS
    assert action.describe()
    assert action.event_type in ("Normal", "Warning")
    if action.has_effect:
        assert action.event_reason, "every effect is announced by an event"


@pytest.mark.parametrize("purpose, add_kind, remove_kind", [
    ("scale", "add", "remove"), ("replace", "replace", "replace"), ("upgrade", "upgrade", "upgrade"),
])
def test_membership_kind_follows_purpose(purpose: actions.Purpose, add_kind: str, remove_kind: str) -> None:
    assert actions.AddMember("m", "u", True, (), purpose=purpose).kind == add_kind
    assert actions.RemoveMember("m", 1, purpose, "r").kind == remove_kind


def test_warnings_for_what_needs_a_human() -> None:
    warnings = {type(a).__name__ for a in SAMPLES if a.event_type == "Warning"}
    assert warnings == {"RejectSpec", "ReportQuorumLoss", "ReportMembersLost", "RefuseNames", "ReportAlarm",
                        "StartQuorumRecovery", "FailQuorumRecovery", "ReportCertificateProblem",
                        "RefuseQuorumRecovery"}
