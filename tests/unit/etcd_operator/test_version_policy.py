"""The etcd version policy (versions.py) and how it reaches the plan and the status: 3.5 and 3.6
supported, 3.4 only to upgrade from, one minor version at a time, 3.6 only from 3.5.32+, no
minor downgrades, everything else refused."""
from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from etcd_common.api import constants as c
from etcd_common.api.versions import EtcdVersion
from etcd_operator import actions, versions
from etcd_operator.observed import ObservedCluster
from etcd_operator.planning import plan_next_action
from etcd_operator.spec import parse_etcd_cluster
from etcd_operator.status import CONDITION_VERSION_SUPPORTED, compute_status, upgrade_source_event
from tests.unit.etcd_operator.etcd_cluster_builders import (
    healthy_cluster,
    make_cluster,
    name,
    nothing_yet,
    plan_through_drain,
    raw_cluster,
    replace_pod,
    with_cluster,
    with_spec,
)

NOW = datetime(2025, 6, 1, 8, 30, 0, tzinfo=UTC)


def v(text: str) -> EtcdVersion:
    return EtcdVersion.of(text)


@pytest.mark.parametrize("text, support", [
    ("3.2.13", "unsupported"),  # the CoreOS example's version
    ("3.3.27", "unsupported"),
    ("3.4.23", "upgrade-source"),
    ("3.4.0", "upgrade-source"),
    ("3.5.0", "supported"),
    ("3.5.35", "supported"),
    ("3.6.0", "supported"),
    ("3.6.16", "supported"),
    ("3.7.0", "unsupported"),
    ("4.0.0", "unsupported"),
])
def test_support_of(text: str, support: str) -> None:
    assert versions.support_of(v(text)) == support


def test_constants_agree() -> None:
    default = v(c.DEFAULT_VERSION)
    assert versions.support_of(default) == "supported"
    assert default.minor_version == c.SUPPORTED_MINOR_VERSIONS[-1], "the default is the newest supported minor"
    assert str(default) == c.RECOMMENDED_VERSIONS[default.minor_version]
    assert set(c.ACCEPTED_MINOR_VERSIONS) <= c.LEARNER_MINOR_VERSIONS, "learner add + promote on every version we run"
    for target, minimum in c.MINIMUM_VERSION_BEFORE_MINOR_UPGRADE.items():
        assert v(c.RECOMMENDED_VERSIONS[v(minimum).minor_version]) >= v(minimum), "the recommended step meets it"
        assert target in c.SUPPORTED_MINOR_VERSIONS


# (versions running, target) -> None (allowed) or fragments the refusal must contain
@pytest.mark.parametrize("running, target, refusal", [
    pytest.param([], "3.6.16", None, id="new-cluster"),
    pytest.param(["3.6.16"], "3.6.16", None, id="unchanged"),
    pytest.param(["3.5.30"], "3.5.35", None, id="patch-upgrade"),
    pytest.param(["3.6.0"], "3.6.16", None, id="patch-upgrade-3.6"),
    pytest.param(["3.5.35"], "3.5.30", None, id="patch-downgrade-within-minor"),
    pytest.param(["3.4.23"], "3.4.23", None, id="upgrade-source-keeps-running"),
    pytest.param(["3.4.23"], "3.5.35", None, id="3.4-to-3.5"),
    pytest.param(["3.4.23"], "3.5.1", None, id="3.4-to-old-3.5"),
    pytest.param(["3.5.35"], "3.6.16", None, id="3.5-to-3.6"),
    pytest.param(["3.5.32"], "3.6.0", None, id="3.5-minimum-to-3.6"),
    pytest.param(["3.5.35", "3.6.16"], "3.6.16", None, id="half-done-3.6-upgrade-continues"),
    pytest.param(["3.4.23", "3.5.35"], "3.5.35", None, id="half-done-3.5-upgrade-continues"),
    pytest.param(["3.4.23"], "3.6.16", ["skips a minor version", "upgrade to 3.5.x first", "spec.version 3.5.35"],
                 id="3.4-to-3.6-skips"),
    pytest.param(["3.4.23", "3.5.35"], "3.6.16", ["skips a minor version", "3.4.23"],
                 id="half-done-3.5-upgrade-cannot-jump-to-3.6"),
    pytest.param(["3.5.31"], "3.6.16", ["3.5.32 or later", "3.5.31", "newest 3.5 first", "spec.version 3.5.35"],
                 id="3.5-patch-too-old-for-3.6"),
    pytest.param(["3.5.1"], "3.6.0", ["3.5.32 or later"], id="3.5.1-to-3.6"),
    pytest.param(["3.5.35", "3.5.1"], "3.6.16", ["3.5.1"], id="one-member-on-an-old-patch"),
    pytest.param(["3.6.16"], "3.5.35", ["downgrade", "3.6.x"], id="minor-downgrade"),
    pytest.param(["3.5.35", "3.6.16"], "3.5.35", ["downgrade"], id="half-done-upgrade-cannot-roll-back"),
    pytest.param(["3.6.16"], "3.4.23", ["downgrade"], id="two-minor-downgrade"),
    pytest.param(["3.6.16"], "4.0.0", ["skips"], id="major-upgrade"),
])
def test_version_change(running: list[str], target: str, refusal: list[str] | None) -> None:
    problem = versions.version_change_problem([v(text) for text in running], v(target))
    if refusal is None:
        assert problem is None
    else:
        assert problem is not None
        for fragment in refusal:
            assert fragment in problem, problem


@pytest.mark.parametrize("version, accepted, says", [
    pytest.param("3.6.16", True, None, id="default"),
    pytest.param("3.5.0", True, None, id="oldest-3.5"),
    pytest.param("3.4.23", True, "only as an upgrade source: set spec.version to 3.5.35", id="3.4-warned"),
    pytest.param("3.3.27", False, "etcd 3.3.27 is not supported; use one of 3.5.x, 3.6.x (3.4.x only to upgrade from)",
                 id="3.3"),
    pytest.param("3.7.0", False, "etcd 3.7.0 is not supported", id="3.7"),
    pytest.param("garbage", False, "is not an etcd version", id="garbage"),
    pytest.param("3.6", False, "is not an etcd version", id="no-patch"),
])
def test_spec_version(version: str, accepted: bool, says: str | None) -> None:
    cluster = parse_etcd_cluster(raw_cluster({"version": version}))
    if accepted:
        spec = cluster.require_spec()
        assert str(spec.version) == version
        if says is None:
            assert spec.warnings == ()
        else:
            assert any(says in warning for warning in spec.warnings), spec.warnings
    else:
        assert cluster.spec is None and cluster.unsupported_version
        assert says is not None and cluster.spec_error is not None and says in cluster.spec_error


def test_other_spec_errors_are_not_version_errors() -> None:
    cluster = parse_etcd_cluster(raw_cluster({"size": 9}))
    assert cluster.spec is None and not cluster.unsupported_version


# --- the plan


def _cluster_at(version: str, *, spec_version: str | None = None, pvc: bool = False, count: int = 3,
                size: int = 3) -> ObservedCluster:
    observed = healthy_cluster(count, size=size, version=version, pvc=pvc)
    return with_spec(observed, version=spec_version) if spec_version else observed


@pytest.mark.parametrize("observed, action, says", [
    pytest.param(_cluster_at("3.4.23", spec_version="3.6.16"), actions.RejectSpec, "upgrade to 3.5.x first",
                 id="3.4-to-3.6-refused"),
    pytest.param(_cluster_at("3.5.1", spec_version="3.6.16"), actions.RejectSpec, "3.5.32 or later",
                 id="old-3.5-to-3.6-refused"),
    pytest.param(_cluster_at("3.6.16", spec_version="3.5.35"), actions.RejectSpec, "downgrade",
                 id="3.6-to-3.5-refused"),
    pytest.param(_cluster_at("3.4.23", spec_version="3.5.35"), actions.UpgradeMember, "runs etcd 3.4.23",
                 id="3.4-to-3.5-rolls-in-place"),
    pytest.param(_cluster_at("3.4.23", spec_version="3.5.35", pvc=True), actions.UpgradeMember, "3.4.23",
                 id="3.4-to-3.5-rolls-on-volumes"),
    pytest.param(_cluster_at("3.5.35", spec_version="3.6.16", pvc=True), actions.UpgradeMember, "3.5.35",
                 id="3.5-to-3.6-rolls-on-volumes"),
    pytest.param(_cluster_at("3.5.1", spec_version="3.5.35", pvc=True), actions.UpgradeMember, "3.5.1",
                 id="patch-upgrade-to-the-newest-3.5-first"),
    pytest.param(_cluster_at("3.4.23", count=2), actions.AddMember, "2 of 3", id="3.4-cluster-still-scales"),
])
def test_plan_follows_the_policy(observed: ObservedCluster, action: type, says: str) -> None:
    planned = plan_through_drain(observed)
    assert isinstance(planned, action), planned
    assert says in planned.describe(), planned.describe()


@pytest.mark.parametrize("version", ["3.4.23", "3.5.35", "3.6.16"])
def test_members_join_as_learners_on_every_accepted_version(version: str) -> None:
    planned = plan_next_action(_cluster_at(version, count=2))
    assert isinstance(planned, actions.AddMember) and planned.as_learner


def test_upgrade_member_joins_as_learner_across_minor_versions() -> None:
    """A version change with a pod-spec change on emptyDir cannot be made in the running pods: a new
    member joins first, as a learner."""
    observed = _cluster_at("3.5.35", spec_version="3.6.16")
    planned = plan_next_action(replace_pod(observed, name(2), pod_policy_hash="from-an-older-spec"))
    assert isinstance(planned, actions.AddMember) and planned.purpose == "upgrade" and planned.as_learner


# --- the status


def _version_condition(observed: ObservedCluster) -> dict[str, str]:
    status = compute_status(observed, plan_next_action(observed), now=NOW)
    [condition] = [cond for cond in status["conditions"] if cond["type"] == CONDITION_VERSION_SUPPORTED]
    return {"phase": status["phase"], "reason": status["reason"], **condition}


def _half_upgraded_from_3_4() -> ObservedCluster:
    observed = _cluster_at("3.4.23", spec_version="3.5.35", pvc=True)
    return replace_pod(observed, name(2), image="quay.io/coreos/etcd:v3.5.35")


@pytest.mark.parametrize("observed, phase, status, reason, says", [
    pytest.param(healthy_cluster(3), "Running", "True", "Supported", "etcd 3.6.16 is supported", id="3.6"),
    pytest.param(_cluster_at("3.5.35"), "Running", "True", "Supported", "3.5.35", id="3.5"),
    pytest.param(nothing_yet(), "Creating", "True", "Supported", "3.6.16", id="new-cluster"),
    pytest.param(_cluster_at("3.4.23"), "Running", "False", "UpgradeSourceOnly",
                 "etcd 3.4 is supported only as an upgrade source: set spec.version to 3.5.35", id="3.4-keeps-running"),
    pytest.param(_half_upgraded_from_3_4(), "Running", "False", "UpgradeSourceOnly",
                 "members still run etcd 3.4.23", id="3.4-upgrade-rolling"),
    pytest.param(_cluster_at("3.4.23", spec_version="3.6.16"), "Failed", "False", "UpgradeRefused",
                 "upgrade to 3.5.x first", id="3.4-to-3.6"),
    pytest.param(_cluster_at("3.5.26", spec_version="3.6.16"), "Failed", "False", "UpgradeRefused",
                 "3.5.32 or later", id="old-3.5-to-3.6"),
    pytest.param(_cluster_at("3.6.16", spec_version="3.5.35"), "Failed", "False", "UpgradeRefused",
                 "downgrade", id="downgrade"),
    pytest.param(with_cluster(healthy_cluster(3), parse_etcd_cluster(raw_cluster({"version": "3.7.0"}))),
                 "Failed", "False", "UnsupportedVersion", "etcd 3.7.0 is not supported", id="3.7"),
    pytest.param(with_cluster(healthy_cluster(3), parse_etcd_cluster(raw_cluster({"size": 0}))),
                 "Failed", "Unknown", "InvalidSpec", "not checked", id="other-spec-error"),
])
def test_version_supported_condition(observed: ObservedCluster, phase: str, status: str, reason: str,
                                     says: str) -> None:
    condition = _version_condition(observed)
    assert (condition["phase"], condition["status"], condition["reason"]) == (phase, status, reason), condition
    assert says in condition["message"], condition["message"]
    if phase == "Failed" and reason != "InvalidSpec":
        assert condition["reason"] != "Supported"


def test_refused_versions_are_invalid_specs_with_a_warning_event() -> None:
    planned = plan_next_action(_cluster_at("3.4.23", spec_version="3.6.16"))
    assert isinstance(planned, actions.RejectSpec)
    assert (planned.event_type, planned.event_reason) == ("Warning", "InvalidSpec")


def _with_recorded_condition(observed: ObservedCluster, reason: str) -> ObservedCluster:
    spec = observed.cluster.require_spec()
    raw: dict[str, Any] = {"size": spec.size, "version": str(spec.version)}
    recorded = {"bootstrapped": True, "conditions": [
        {"type": CONDITION_VERSION_SUPPORTED, "status": "False", "reason": reason, "message": "m",
         "lastTransitionTime": "2025-01-01T00:00:00Z"}]}
    return with_cluster(observed, make_cluster(raw, status=recorded))


def test_upgrade_source_warning_event_once_per_transition() -> None:
    observed = _cluster_at("3.4.23")
    status = compute_status(observed, plan_next_action(observed), now=NOW)
    message = upgrade_source_event(observed, status)
    assert message is not None and "only as an upgrade source" in message

    already_reported = _with_recorded_condition(observed, "UpgradeSourceOnly")
    status = compute_status(already_reported, plan_next_action(already_reported), now=NOW)
    assert upgrade_source_event(already_reported, status) is None

    supported = healthy_cluster(3)
    assert upgrade_source_event(supported, compute_status(supported, plan_next_action(supported), now=NOW)) is None

