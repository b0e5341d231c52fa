"""When a member pod does not start, the cluster's status says why in the pod's own words
(ErrImagePull/ImagePullBackOff, FailedMount, CrashLoopBackOff with the last termination message):
in the message, in the MemberStartBlocked condition and in one Warning event, cleared once the
cause goes away."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.operator_clusters import DEFAULT_VERSION, Clusters, etcd_cluster
from tests.integration.etcd_operator.status_history import conditions
from tests.integration.etcd_operator.tls_certs import coreos_static_tls

REASON = "MemberNotStarting"
NO_IMAGE_VERSION = "3.6.0"  # a supported version the sandbox has no image for


def _blocked(status: dict[str, Any]) -> tuple[str, str] | None:
    return conditions(status).get("MemberStartBlocked")


def _warnings(clusters: Clusters, name: str) -> list[Any]:
    return [e for e in clusters.events(name) if e.reason == REASON]


def test_unpullable_image_is_reported_and_cleared_when_the_version_is_fixed(clusters: Clusters) -> None:
    clusters.create(etcd_cluster("nopull", size=1, version=NO_IMAGE_VERSION))
    status = clusters.wait_status(
        "nopull", lambda s: "ImagePullBackOff" in s.get("message", ""), "ImagePullBackOff in the message", timeout=90)
    assert _blocked(status) == ("True", "ImagePullBackOff"), status["conditions"]
    assert NO_IMAGE_VERSION in status["message"], status["message"]
    events = wait_for(lambda: _warnings(clusters, "nopull"), timeout=30, what="a MemberNotStarting event")
    # ErrImagePull turning into ImagePullBackOff is the same incident: still one event, counted once.
    assert len(events) == 1 and events[0].type == "Warning" and (events[0].count or 1) == 1, \
        [(e.message, e.count) for e in events]

    clusters.patch_spec("nopull", {"version": DEFAULT_VERSION})
    status = clusters.wait_running("nopull", ready=1, timeout=120)
    status = clusters.wait_status("nopull", lambda s: (_blocked(s) or ("", ""))[0] == "False",
                                  "MemberStartBlocked cleared", timeout=30)
    assert "ImagePull" not in status["message"], status["message"]


def test_missing_tls_secret_is_reported_as_failed_mount_until_it_exists(clusters: Clusters, tmp_path: Path) -> None:
    tls = coreos_static_tls(tmp_path / "pki", "nosecret", clusters.namespace)
    clusters.create(etcd_cluster("nosecret", size=1, TLS=tls.spec()))
    status = clusters.wait_status(
        "nosecret", lambda s: "FailedMount" in s.get("message", ""), "FailedMount in the message", timeout=90)
    assert _blocked(status) == ("True", "FailedMount"), status["conditions"]
    assert tls.peer_secret in status["message"] or tls.server_secret in status["message"], status["message"]
    events = wait_for(lambda: _warnings(clusters, "nosecret"), timeout=30, what="a MemberNotStarting event")
    assert len(events) == 1 and "FailedMount" in events[0].message, [(e.message, e.count) for e in events]

    for secret in tls.secrets():
        clusters.core.create_namespaced_secret(clusters.namespace, secret)
    status = clusters.wait_status("nosecret", lambda s: s.get("phase") == "Running"
                                  and (_blocked(s) or ("", ""))[0] == "False", "Running, start no longer blocked",
                                  timeout=180)
    assert "FailedMount" not in status["message"], status["message"]


def test_crash_loop_is_reported_with_the_last_termination_message(clusters: Clusters) -> None:
    env = [{"name": "ETCD_QUOTA_BACKEND_BYTES", "value": "banana"}]
    clusters.create(etcd_cluster("crashing", size=1, pod={"etcdEnv": env}))
    status = clusters.wait_status(
        "crashing", lambda s: "CrashLoopBackOff" in s.get("message", ""), "CrashLoopBackOff in the message", timeout=90)
    assert _blocked(status) == ("True", "CrashLoopBackOff"), status["conditions"]
    # etcd's own complaint, from the container's last termination message
    assert "banana" in status["message"], status["message"]
    events = wait_for(lambda: _warnings(clusters, "crashing"), timeout=30, what="a MemberNotStarting event")
    assert len(events) == 1 and "banana" in events[0].message, [(e.message, e.count) for e in events]
