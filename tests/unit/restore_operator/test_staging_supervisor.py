"""Issue 22 item 1, the effects through one supervisor pass each (the API faked at our adapter's
boundary): the staging claims and pods are created once and recorded in status, a pod already
there is waited for (a restarted operator resumes from status and objects alone), a missing
credentials Secret fails the restore before any pod, the staged flag is written before the delete,
the created cluster's spec.restore names the claims, and a finished restore removes them all."""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from etcd_common.api import constants as c
from kube_adapter.errors import NotFound
from operator_runtime.cache import ObjectCache
from restore_operator import acting
from restore_operator import supervisor as sup
from restore_operator.metrics import RestoreMetrics
from restore_operator.settings import parse_settings
from tests.unit.restore_operator.etcd_restore_builders import UID, raw_restore
from tests.unit.restore_operator.supervisor_fakes import FakeClient

SNAPSHOT = {"sha256": "a" * 64, "size": 4096, "revision": 42, "totalKeys": 7, "hash": 1, "etag": "e-1"}


class RestoreApi:
    def __init__(self, cache: ObjectCache) -> None:
        self.cache = cache

    def patch_status(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        current = self.cache.get((namespace, name))
        assert current is not None
        return {**current, "status": merged(dict(current.get("status") or {}), patch)}

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """The finalizer patches: metadata merged, resourceVersion as precondition."""
        current = self.cache.get((namespace, name))
        assert current is not None
        metadata = dict(patch.get("metadata") or {})
        assert metadata.pop("resourceVersion", None) == (current.get("metadata") or {}).get("resourceVersion")
        updated = {**current, "metadata": merged(dict(current.get("metadata") or {}), metadata)}
        self.cache.upsert(updated)
        return updated


def merged(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386) applied."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            target[key] = merged(dict(target[key]), value)
        else:
            target[key] = value
    return target


class Events:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def record(self, obj: Any, kind: str, reason: str, message: str, *args: Any) -> None:
        self.reasons.append(reason)


class World:
    def __init__(self, status: dict[str, Any], *, cluster: dict[str, Any] | None = None,
                 pods: dict[str, dict[str, Any]] | None = None, claims: dict[str, dict[str, Any]] | None = None,
                 secrets: tuple[str, ...] = ("aws",), metadata: dict[str, Any] | None = None) -> None:
        self.cache = ObjectCache()
        raw = raw_restore()
        raw["metadata"] = {**raw["metadata"], "resourceVersion": "7", **(metadata or {})}
        self.cache.upsert({"apiVersion": "etcd.database.coreos.com/v1beta2", "kind": "EtcdRestore", **raw,
                           "status": status})
        self.clusters = FakeClient({"c": cluster} if cluster else {})
        self.pods = FakeClient(pods)
        self.claims = FakeClient(claims)
        self.events = Events()
        self.secrets = secrets
        context = sup.SupervisorContext(
            restores=self.cache, restore_api=RestoreApi(self.cache), clusters=self.clusters,  # type: ignore[arg-type]
            pods=self.pods, claims=self.claims, read_secret=self.read_secret,  # type: ignore[arg-type]
            etcd=None, events=self.events, metrics=RestoreMetrics(),  # type: ignore[arg-type]
            settings=parse_settings(["--fetch-image=etcd-operator-py:test"]), stop=threading.Event())
        self.supervisor = sup.RestoreSupervisor(("ns", "r"), context)

    def read_secret(self, namespace: str, name: str) -> dict[str, Any]:
        if name not in self.secrets:
            raise NotFound(f'secret "{name}" not found')
        return {"data": {}}

    def pass_once(self) -> dict[str, Any]:
        self.supervisor.reconcile_once()
        return dict(self.restore().get("status") or {})

    def restore(self) -> dict[str, Any]:
        restore = self.cache.get(("ns", "r"))
        assert restore is not None
        return restore

    def finalizers(self) -> list[str]:
        return list(self.restore()["metadata"].get("finalizers") or ())


def owned(phase: str = "", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "r-staging", "ownerReferences": [{"uid": UID}]},
            "status": {"phase": phase, **status}}


EXISTING = {"metadata": {"name": "c", "uid": "old-uid"},
            "spec": {"size": 1, "version": "3.6.16"}, "status": {"phase": "Running"}}
VERIFIED = {"phase": "Verifying", "snapshot": SNAPSHOT, "observedGeneration": 1}


def test_a_verified_restore_stages_once_and_records_where() -> None:
    """Broken by deleting the cluster before staging, or by not recording the claim in status."""
    world = World(dict(VERIFIED), cluster=EXISTING)

    status = world.pass_once()

    assert world.claims.calls == [("create", "r-staging")] and world.pods.calls == [("create", "r-staging")]
    assert world.clusters.calls == []
    assert status["phase"] == "Staging" and status["staging"] == {"claim": "r-staging", "pod": "r-staging"}
    pod = world.pods.objects["r-staging"]
    assert pod["spec"]["initContainers"][0]["image"] == "etcd-operator-py:test"
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"] == {"claimName": "r-staging"}
    assert "Staging" in world.events.reasons


def test_a_restarted_operator_waits_for_the_staging_pod_already_there() -> None:
    """A new supervisor (a restarted operator) with the pod running: no second pod, no delete.
    Broken by recreating the pod, or by deleting before it Succeeded."""
    status = {**VERIFIED, "phase": "Staging", "staging": {"claim": "r-staging", "pod": "r-staging"}}
    world = World(status, cluster=EXISTING, pods={"r-staging": owned("Running")},
                  claims={"r-staging": owned("Bound")})

    status = world.pass_once()

    assert world.pods.calls == [] and world.claims.calls == [] and world.clusters.calls == []
    assert status["phase"] == "Staging"


def test_a_failed_staging_pod_fails_the_restore_then_its_objects_go() -> None:
    """Broken by deleting the cluster after a failed staging, or by leaving the staging objects."""
    failed = owned("Failed", initContainerStatuses=[{"name": "restore-fetch", "state": {"terminated": {
        "exitCode": 1, "message": "etcd-restore-seed fetch: s3://bucket/key changed since the restore verified it"}}}])
    world = World({**VERIFIED, "phase": "Staging"}, cluster=EXISTING, pods={"r-staging": failed},
                  claims={"r-staging": owned("Bound")})

    status = world.pass_once()
    assert status["phase"] == "Failed" and status["reason"] == "StagingFailed"
    assert "changed since the restore verified it" in status["message"]
    assert world.clusters.calls == []

    world.pass_once()
    assert world.pods.calls == [("delete", "r-staging")] and world.claims.calls == [("delete", "r-staging")]
    assert world.clusters.calls == []


def test_a_credentials_secret_gone_since_verification_fails_before_any_pod() -> None:
    """Broken by creating a staging pod that would hang mounting a Secret that is not there."""
    world = World(dict(VERIFIED), cluster=EXISTING, secrets=())

    status = world.pass_once()

    assert status["phase"] == "Failed" and status["reason"] == "SecretNotFound"
    assert "aws" in status["message"] and "nothing was deleted" in status["message"]
    assert world.pods.calls == [] and world.claims.calls == [] and world.clusters.calls == []


def no_recheck(monkeypatch: pytest.MonkeyPatch) -> None:
    recheck: Callable[..., None] = lambda *args, **kwargs: None  # noqa: E731 (the object is still the one verified)
    monkeypatch.setattr(acting.ActionExecutor, "_recheck_snapshot", recheck)


def test_staged_is_recorded_before_the_delete(monkeypatch: pytest.MonkeyPatch) -> None:
    """Broken by deleting without status.staging.staged: a restarted operator, the pod gone,
    would not know the claim holds a checked snapshot."""
    no_recheck(monkeypatch)
    world = World({**VERIFIED, "phase": "Staging", "staging": {"claim": "r-staging", "pod": "r-staging"}},
                  cluster=EXISTING, pods={"r-staging": owned("Succeeded")}, claims={"r-staging": owned("Bound")})

    status = world.pass_once()

    assert world.clusters.calls == [("delete", "c")]
    assert status["phase"] == "Replacing" and status["staging"]["staged"] is True


def test_the_created_cluster_names_the_staged_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    """Broken by creating the cluster without spec.restore.stagedClaim (its seed would download)."""
    no_recheck(monkeypatch)
    status = {**VERIFIED, "phase": "Replacing", "clusterSpec": {"size": 1, "version": "3.6.16"},
              "staging": {"claim": "r-staging", "pod": "r-staging", "staged": True}}
    world = World(status, claims={"r-staging": owned("Bound")})

    status = world.pass_once()

    assert world.clusters.calls == [("create", "c")]
    created = world.clusters.objects["c"]
    assert created["spec"]["restore"]["stagedClaim"] == "r-staging"
    assert created["metadata"]["annotations"][c.ANNOTATION_RESTORE_UID] == UID
    assert status["phase"] == "Restoring"


THREE = ["r-staging", "r-staging-1", "r-staging-2"]
EXISTING_3 = {**EXISTING, "spec": {"size": 3, "version": "3.6.16"}}


STAGING_LABELS = {c.LABEL_RESTORE: "r", "app.kubernetes.io/component": "restore-staging"}


def labelled(name: str, phase: str = "Bound") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": dict(STAGING_LABELS), "ownerReferences": [{"uid": UID}]},
            "status": {"phase": phase}}


def test_a_cluster_of_three_is_staged_on_three_claims_by_a_pod_each() -> None:
    """Broken by staging one claim for three members, or by one pod mounting several claims
    (WaitForFirstConsumer binds them all where it runs: the members could not spread)."""
    world = World(dict(VERIFIED), cluster=EXISTING_3)

    status = world.pass_once()

    assert world.claims.calls == [("create", name) for name in THREE]
    assert world.pods.calls == [("create", name) for name in THREE] and world.clusters.calls == []
    sizes = {world.claims.objects[n]["spec"]["resources"]["requests"]["storage"] for n in THREE}
    assert len(sizes) == 1
    for name in THREE:
        pod = world.pods.objects[name]
        claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"]
                  if "persistentVolumeClaim" in v]
        assert claims == [name]
        assert [i["name"] for i in pod["spec"]["initContainers"]] == ["restore-fetch"]
        assert "preferredDuringSchedulingIgnoredDuringExecution" in pod["spec"]["affinity"]["podAntiAffinity"]
        assert pod["metadata"]["labels"] == STAGING_LABELS
    assert status["staging"] == {"claim": "r-staging", "pod": "r-staging", "claims": THREE}


def test_members_that_require_distinct_nodes_get_staging_pods_that_do() -> None:
    """Broken by staging pods that may share a node while the members may not (spec.pod.antiAffinity):
    two claims bound on one node, a member that never schedules, after the old cluster was deleted."""
    placed = {**EXISTING_3, "spec": {"size": 3, "version": "3.6.16", "pod": {
        "antiAffinity": True, "nodeSelector": {"disk": "ssd"}}}}
    world = World(dict(VERIFIED), cluster=placed)

    world.pass_once()

    for name in THREE:
        spec = world.pods.objects[name]["spec"]
        assert spec["affinity"]["podAntiAffinity"] == {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": STAGING_LABELS}, "topologyKey": "kubernetes.io/hostname"}]}
        assert spec["nodeSelector"] == {"disk": "ssd"}


def test_the_restore_waits_for_every_pod_and_a_failing_one_fails_it() -> None:
    """Two pods Succeeded, one running: nothing deleted; then it fails: the restore fails naming it.
    Broken by deleting once the first pod Succeeded, or by a failure that names another pod."""
    pods = {name: labelled(name, "Succeeded") for name in THREE[:2]}
    world = World({**VERIFIED, "phase": "Staging"}, cluster=EXISTING_3,
                  pods={**pods, "r-staging-2": labelled("r-staging-2", "Running")},
                  claims={name: labelled(name) for name in THREE})

    status = world.pass_once()
    assert status["phase"] == "Staging" and "2 of 3 staged" in status["message"], status
    assert world.clusters.calls == [] and world.pods.calls == []

    world.pods.objects["r-staging-2"] = {**labelled("r-staging-2", "Failed"), "status": {
        "phase": "Failed", "initContainerStatuses": [{"name": "restore-fetch", "state": {"terminated": {
            "exitCode": 1, "message": "etcd-restore-seed fetch: connection reset"}}}]}}
    status = world.pass_once()
    assert status["reason"] == "StagingFailed" and "staging pod r-staging-2" in status["message"], status
    assert "connection reset" in status["message"] and world.clusters.calls == []


def test_a_pod_name_held_by_another_object_is_found_by_name() -> None:
    """An unlabelled pod of someone else named like pod 1: the restore fails. Broken by looking
    pods up by label alone (the restore would wait on another's pod, or take it for its own)."""
    foreign = {"metadata": {"name": "r-staging-1"}, "status": {"phase": "Succeeded"}}
    world = World(dict(VERIFIED), cluster=EXISTING_3, pods={"r-staging-1": foreign})

    status = world.pass_once()

    assert status["reason"] == "StagingNameTaken" and "Pod r-staging-1" in status["message"], status
    assert world.claims.calls == [] and world.pods.calls == []


def test_the_pod_is_not_started_before_every_claim_and_a_lost_one_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pods Succeeded but claim 2 is gone (found neither by label nor by name): nothing is
    deleted. Broken by replacing the cluster with a member's copy missing."""
    no_recheck(monkeypatch)
    world = World({**VERIFIED, "phase": "Staging"}, cluster=EXISTING_3,
                  pods={name: labelled(name, "Succeeded") for name in THREE},
                  claims={name: labelled(name) for name in THREE[:2]})

    status = world.pass_once()

    assert status["reason"] == "StagedClaimLost" and "r-staging-2" in status["message"]
    assert world.clusters.calls == []


def test_a_claim_name_held_by_another_object_is_found_by_name() -> None:
    """An unlabelled claim of someone else named like claim 2: the restore fails and stages
    nothing. Broken by looking claims up by label alone (the pod would write another's volume)."""
    foreign = {"metadata": {"name": "r-staging-2"}, "status": {"phase": "Bound"}}
    world = World(dict(VERIFIED), cluster=EXISTING_3, claims={"r-staging-2": foreign})

    status = world.pass_once()

    assert status["reason"] == "StagingNameTaken" and "PersistentVolumeClaim r-staging-2" in status["message"]
    assert world.claims.calls == [] and world.pods.calls == []


def test_the_created_cluster_of_three_names_every_members_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    """Broken by creating a 3-member cluster without spec.restore.stagedClaims."""
    no_recheck(monkeypatch)
    status = {**VERIFIED, "phase": "Replacing", "clusterSpec": {"size": 3, "version": "3.6.16"},
              "staging": {"claim": "r-staging", "pod": "r-staging", "claims": THREE, "staged": True}}
    world = World(status, claims={name: labelled(name) for name in THREE})

    world.pass_once()

    restore = world.clusters.objects["c"]["spec"]["restore"]
    assert restore["stagedClaim"] == "r-staging" and restore["stagedClaims"] == THREE


def test_the_created_cluster_of_one_names_its_claim_only(monkeypatch: pytest.MonkeyPatch) -> None:
    no_recheck(monkeypatch)
    status = {**VERIFIED, "phase": "Replacing", "clusterSpec": {"size": 1, "version": "3.6.16"},
              "staging": {"claim": "r-staging", "pod": "r-staging", "staged": True}}
    world = World(status, claims={"r-staging": labelled("r-staging")})

    world.pass_once()

    restore = world.clusters.objects["c"]["spec"]["restore"]
    assert restore["stagedClaim"] == "r-staging" and "stagedClaims" not in restore


def test_a_finished_restore_removes_every_pod_and_claim() -> None:
    """Every pod and claim labelled as the restore's goes, whatever the cluster's size says now
    (here 1). Broken by leaving any pod or claim (and its storage) behind."""
    status = {**VERIFIED, "phase": "Completed", "clusterSpec": {"size": 1},
              "staging": {"claim": "r-staging", "pod": "r-staging", "staged": True}}
    world = World(status, pods={name: labelled(name, "Succeeded") for name in THREE},
                  claims={name: labelled(name) for name in THREE})

    world.pass_once()

    assert sorted(world.pods.calls) == [("delete", name) for name in THREE]
    assert world.pods.objects == {}
    assert sorted(world.claims.calls) == [("delete", name) for name in THREE]
    assert world.claims.objects == {}


def lease_for_moments(asked: list[float]) -> Callable[[float], bool]:
    """A leader now whose lease may end within seconds (a renewal late): the lease asked for how long."""
    def may_act(for_seconds: float = 0.0) -> bool:
        asked.append(for_seconds)
        return for_seconds < 1.0
    return may_act


def test_a_lease_ending_within_the_action_stages_nothing() -> None:
    """Broken by asking the lease only for now: a deposed leader's late staging pods would race its successor's."""
    world = World(dict(VERIFIED), cluster=EXISTING)
    asked: list[float] = []
    object.__setattr__(world.supervisor.context, "may_act", lease_for_moments(asked))

    assert world.supervisor.reconcile_once() == acting.WAIT_POLL_SECONDS
    assert world.pods.calls == [] and world.claims.calls == [] and max(asked) >= sup.ACTION_MAX_SECONDS


def test_a_lease_ending_within_the_action_replaces_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Broken by asking the lease only for now: the existing cluster deleted by a leader about to be deposed."""
    no_recheck(monkeypatch)
    world = World({**VERIFIED, "phase": "Staging", "staging": {"claim": "r-staging", "pod": "r-staging"}},
                  cluster=EXISTING, pods={"r-staging": owned("Succeeded")}, claims={"r-staging": owned("Bound")})
    asked: list[float] = []
    object.__setattr__(world.supervisor.context, "may_act", lease_for_moments(asked))

    world.supervisor.reconcile_once()
    assert world.clusters.calls == [] and max(asked) >= sup.ACTION_MAX_SECONDS


def test_a_failed_pass_is_counted_by_its_kind_not_its_class_name() -> None:
    """Broken by labelling the errors metric with type(error).__name__ (an open set)."""
    world = World(dict(VERIFIED), cluster=EXISTING)
    world.supervisor.worker._on_pass(0.1, KeyError("a bug"))
    metrics = world.supervisor.context.metrics
    assert metrics.errors.labels(reason="crash")._value.get() == 1
    assert "KeyError" not in {s.labels.get("reason") for m in metrics.registry.collect() for s in m.samples}


# ---------------------------------------------------------------------------------------------
# An EtcdRestore deleted midway (issue 41 finding 12): it finishes, or it had deleted nothing.

DELETING = {"deletionTimestamp": "2024-05-01T12:00:00Z"}
RECORDED = {**VERIFIED, "phase": "Replacing", "clusterSpec": {"size": 1, "version": "3.6.16"},
            "staging": {"claim": "r-staging", "pod": "r-staging", "staged": True}}


def test_the_finalizer_is_set_before_the_replaced_cluster_is_deleted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Broken by deleting the cluster without the finalizer: a restore deleted after that delete
    would be gone with the only record of the cluster, and no cluster created."""
    no_recheck(monkeypatch)
    world = World({**VERIFIED, "phase": "Staging", "staging": {"claim": "r-staging", "pod": "r-staging"}},
                  cluster=EXISTING, pods={"r-staging": owned("Succeeded")}, claims={"r-staging": owned("Bound")},
                  metadata={"finalizers": ["someone.else/keep"]})

    world.pass_once()

    assert world.clusters.calls == [("delete", "c")]
    assert world.finalizers() == ["someone.else/keep", c.RESTORE_FINALIZER]


def test_a_restore_deleted_after_the_delete_creates_the_cluster_and_then_lets_go(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Broken by a deleted restore that stops (no cluster at all), or that lets go before the
    restored cluster exists."""
    no_recheck(monkeypatch)
    world = World(dict(RECORDED), claims={"r-staging": owned("Bound")},
                  metadata={**DELETING, "finalizers": [c.RESTORE_FINALIZER]})

    status = world.pass_once()

    assert world.clusters.calls == [("create", "c")] and status["phase"] == "Restoring"
    assert world.finalizers() == [c.RESTORE_FINALIZER]
    # Completed (the cluster serves): the staging objects go, then the finalizer.
    world.cache.upsert({**world.restore(), "status": {**world.restore()["status"], "phase": "Completed"}})
    world.pass_once()
    assert world.claims.calls == [("delete", "r-staging")] and world.finalizers() == [c.RESTORE_FINALIZER]
    world.claims.objects.clear()
    world.pass_once()
    assert world.finalizers() == []


def test_a_restore_deleted_before_it_deleted_anything_lets_go_and_deletes_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator stopped between setting the finalizer and the delete, and the restore was
    deleted: broken by going on to delete the cluster nobody wants replaced any more."""
    no_recheck(monkeypatch)
    world = World(dict(RECORDED), cluster=EXISTING, pods={"r-staging": owned("Succeeded")},
                  claims={"r-staging": owned("Bound")}, metadata={**DELETING, "finalizers": [c.RESTORE_FINALIZER]})

    world.pass_once()

    assert world.clusters.calls == [] and world.finalizers() == []


def test_a_deleted_restore_without_the_finalizer_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deleted while Staging (nothing deleted yet): broken by replacing the cluster anyway."""
    no_recheck(monkeypatch)
    world = World({**VERIFIED, "phase": "Staging", "staging": {"claim": "r-staging", "pod": "r-staging"}},
                  cluster=EXISTING, pods={"r-staging": owned("Succeeded")}, claims={"r-staging": owned("Bound")},
                  metadata={**DELETING, "finalizers": ["someone.else/keep"]})

    world.pass_once()

    assert world.clusters.calls == [] and world.pods.calls == [] and world.finalizers() == ["someone.else/keep"]
