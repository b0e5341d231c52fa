"""The etcd operator's own checks of the day-two fields (issue 21): a backend quota must fit the
member volume with room for defragmentation, etcdEnv variables of CoreOS-era manifests are
honoured, and a refused spec changes nothing (rule 2); the flags and annotations member pods get."""
from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from etcd_common.api.fields import SpecError
from etcd_operator import actions
from etcd_operator.manifests import build_member_pod, maintenance_flags, member_peer_url
from etcd_operator.planning import plan_next_action
from etcd_operator.spec import parse_cluster_spec, volume_needed_bytes
from etcd_operator.status import compute_status
from tests.unit.etcd_operator.etcd_cluster_builders import (
    healthy_cluster,
    make_cluster,
    name,
    plan_through_drain,
    unhealthy,
    with_spec,
)

MIB = 1024 * 1024
GIB = 1024 * MIB


def _pvc(storage: str) -> dict[str, Any]:
    return {"persistentVolumeClaimSpec": {"resources": {"requests": {"storage": storage}}}}


def test_the_headroom_rule() -> None:
    assert volume_needed_bytes(GIB) == 2 * GIB + 256 * MIB
    assert volume_needed_bytes(2 * GIB) == 4 * GIB + 256 * MIB


@pytest.mark.parametrize("storage, quota", [
    pytest.param("10Gi", "4Gi", id="roomy"),
    pytest.param("2304Mi", "1Gi", id="exactly-2x-plus-256Mi"),
    pytest.param("8Gi", 16777216, id="small-quota-integer"),
    pytest.param("10G", "4Gi", id="decimal-volume"),
])
def test_quota_that_fits_the_volume(storage: str, quota: Any) -> None:
    spec = parse_cluster_spec({"size": 3, "backendQuota": quota, "pod": _pvc(storage)})
    assert spec.warnings == ()


@pytest.mark.parametrize("storage, quota, says", [
    pytest.param("2303Mi", "1Gi", "spec.backendQuota 1Gi does not fit "
                 "spec.pod.persistentVolumeClaimSpec.resources.requests.storage 2303Mi", id="one-mebibyte-short"),
    pytest.param("1Gi", "8Gi", "2 x the quota + 256Mi = 16640Mi", id="names-the-rule"),
    pytest.param("1Gi", "1Gi", "lower spec.backendQuota to at most 384Mi or request at least 2304Mi",
                 id="says-what-fits"),
    pytest.param("200Mi", "16Mi", "request at least 288Mi of storage", id="volume-below-headroom"),
])
def test_quota_too_big_for_the_volume_is_refused(storage: str, quota: str, says: str) -> None:
    with pytest.raises(SpecError) as error:
        parse_cluster_spec({"size": 3, "backendQuota": quota, "pod": _pvc(storage)})
    assert says in error.value.reason
    assert "defragmentation writes a second copy of the database" in error.value.reason


def test_small_volume_without_quota_is_a_warning_not_a_refusal() -> None:
    """CoreOS manifests (a 1Gi claim, no quota) keep working: etcd's default 2Gi quota would not
    fit, which status says with the quota that would."""
    spec = parse_cluster_spec({"size": 3, "pod": _pvc("1Gi")})
    assert spec.backend_quota_bytes is None
    [warning] = spec.warnings
    assert "spec.pod.persistentVolumeClaimSpec.resources.requests.storage 1Gi is too small for etcd's default " \
           "quota of 2Gi" in warning
    assert "set spec.backendQuota to at most 384Mi" in warning


def test_no_volume_check_on_empty_dir() -> None:
    assert parse_cluster_spec({"size": 3, "backendQuota": "8Gi"}).warnings == ()


def test_quota_above_etcds_suggested_maximum_is_a_warning() -> None:
    spec = parse_cluster_spec({"size": 3, "backendQuota": "16Gi", "pod": _pvc("40Gi")})
    assert spec.backend_quota_bytes == 16 * GIB
    [warning] = spec.warnings
    assert "spec.backendQuota 16Gi is above 8Gi, etcd's suggested maximum" in warning


def _env(*names: str) -> dict[str, Any]:
    return {"etcdEnv": [{"name": variable, "value": "1000"} for variable in names]}


def test_coreos_env_compaction_is_honoured_with_a_warning() -> None:
    spec = parse_cluster_spec({"size": 3, "pod": _env("ETCD_AUTO_COMPACTION_RETENTION", "ETCD_QUOTA_BACKEND_BYTES")})
    assert maintenance_flags(spec) == []
    assert spec.warnings == (
        "spec.pod.etcdEnv sets ETCD_AUTO_COMPACTION_RETENTION: honoured, but spec.compaction is the field for it",
        "spec.pod.etcdEnv sets ETCD_QUOTA_BACKEND_BYTES: honoured, but spec.backendQuota is the field for it",
    )


def test_env_quota_skips_the_volume_check() -> None:
    spec = parse_cluster_spec({"size": 3, "pod": {**_pvc("1Gi"), **_env("ETCD_QUOTA_BACKEND_BYTES")}})
    assert not any("too small" in warning for warning in spec.warnings)


@pytest.mark.parametrize("fields, says", [
    pytest.param({"compaction": {"retention": "5m"}, "pod": _env("ETCD_AUTO_COMPACTION_MODE")},
                 "ETCD_AUTO_COMPACTION_MODE and spec.compaction is set too", id="compaction"),
    pytest.param({"backendQuota": "1Gi", "pod": _env("ETCD_QUOTA_BACKEND_BYTES")},
                 "ETCD_QUOTA_BACKEND_BYTES and spec.backendQuota is set too", id="quota"),
])
def test_env_beside_the_spec_field_is_refused(fields: dict[str, Any], says: str) -> None:
    with pytest.raises(SpecError, match=says):
        parse_cluster_spec({"size": 3, **fields})


# --- member pods


def _command(spec: dict[str, Any]) -> list[str]:
    cluster = make_cluster(spec)
    pod = build_member_pod(cluster, name(9), state="new", initial_cluster=[(name(9), member_peer_url(cluster, name(9)))])
    [container] = pod["spec"]["containers"]
    return list(container["command"])


@pytest.mark.parametrize("spec, flags", [
    pytest.param({}, ["--auto-compaction-mode=periodic", "--auto-compaction-retention=1h"], id="default"),
    pytest.param({"compaction": {"mode": "revision"}, "backendQuota": "16Mi"},
                 ["--auto-compaction-mode=revision", "--auto-compaction-retention=10000",
                  "--quota-backend-bytes=16777216"], id="revision-and-quota"),
    pytest.param({"compaction": {"mode": "disabled"}, "backendQuota": 8 * GIB}, ["--quota-backend-bytes=8589934592"],
                 id="disabled"),
    pytest.param({"version": "3.4.23", "compaction": {"retention": "30m"}},
                 ["--auto-compaction-mode=periodic", "--auto-compaction-retention=30m"], id="etcd-3.4"),
])
def test_maintenance_flags_end_the_command(spec: dict[str, Any], flags: list[str]) -> None:
    command = _command(spec)
    assert command[-len(flags):] == flags
    assert not any(flag.startswith(("--quota", "--auto-compaction")) for flag in command[:-len(flags)])
    assert "--listen-metrics-urls=http://$(POD_IP):2381" in command


def test_etcd_3_4_members_keep_the_etcdctl_probe_but_get_the_metrics_listener() -> None:
    cluster = make_cluster({"version": "3.4.23"})
    pod = build_member_pod(cluster, name(9), state="new", initial_cluster=[])
    [container] = pod["spec"]["containers"]
    assert "exec" in container["readinessProbe"]
    assert {"name": "metrics", "containerPort": 2381, "protocol": "TCP"} in container["ports"]
    assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"


def test_spec_pod_annotations_can_turn_scraping_off() -> None:
    cluster = make_cluster({"pod": {"annotations": {"prometheus.io/scrape": "false", "team": "db"}}})
    annotations = build_member_pod(cluster, name(9), state="new", initial_cluster=[])["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "false" and annotations["team"] == "db"
    assert annotations["prometheus.io/port"] == "2381" and annotations["prometheus.io/path"] == "/metrics"


# --- planning: a refused spec changes nothing; an accepted change rolls the members


def test_a_quota_too_big_for_the_volume_is_rejected_and_nothing_else_happens() -> None:
    running = healthy_cluster(3, pvc=True, spec={"backendQuota": "256Mi"})
    assert isinstance(plan_next_action(running), actions.NoOp)
    refused = with_spec(running, backendQuota="1Gi")
    assert refused.cluster.spec is None and refused.cluster.spec_error is not None
    action = plan_next_action(refused)
    assert isinstance(action, actions.RejectSpec) and not action.has_effect
    assert "spec.backendQuota 1Gi does not fit" in action.reason and "1Gi" in action.reason
    # Rule 2 comes before every change: not even a dead member or a size change moves anything.
    for observed in (unhealthy(refused, name(3)), with_spec(running, backendQuota="1Gi", size=5)):
        assert isinstance(plan_next_action(observed), actions.RejectSpec)
    status = compute_status(refused, action, now=datetime(2025, 1, 1))
    assert status["reason"] == "InvalidSpec" and "backendQuota" in status["message"]


def test_changing_the_quota_rolls_the_members_one_at_a_time() -> None:
    """etcd reads the flag only at start: each member restarts on its volume (rule 16)."""
    running = healthy_cluster(3, pvc=True, spec={"backendQuota": "256Mi"})
    action = plan_through_drain(with_spec(running, backendQuota="384Mi"))
    assert isinstance(action, actions.UpgradeMember), action
