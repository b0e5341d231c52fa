"""Carries out the actions the planner chose for an EtcdRestore (`ActionExecutor`): verify the
snapshot, stage it, replace the EtcdCluster, create the restored one, finish or fail, each with the
status it leads to. The effects on the API are idempotent: a delete of an object already gone (or,
for the cluster, replaced by another object of that name: uid precondition) is fine, a create that
finds ours already there is fine."""
from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from etcd_common.api import constants as c
from etcd_common.api.constants import RESTORE_FINALIZER
from etcd_common.api.etcd_cluster import parse_cluster_spec
from etcd_common.api.etcd_restore import EtcdRestore
from etcd_common.api.issued_tls import issued_secret_names
from etcd_common.api.restore_source import RestoreSource, restore_source_to_api
from etcd_common.api.storage_locations import S3Location, StorageLocation
from etcd_common.etcd import etcdctl as ctl
from etcd_common.etcd.access import EtcdAccess
from etcd_common.storage.codec import CodecError
from etcd_common.storage.encryption_keys import read_encryption_key
from etcd_common.storage.endpoint_allowance import S3_ENDPOINT_HOSTS_FLAG, storage_refusal
from etcd_common.storage.locations import SecretReader, split_location, storage_for_location
from etcd_common.storage.objects import ObjectNotFound, ObjectStorage, StorageError
from kube_adapter.errors import AlreadyExists, NotFound
from kube_adapter.events import EventRecorder
from kube_adapter.patching import status_merge_patch
from kube_adapter.resources import ResourceClient
from operator_runtime import actions as runtime
from operator_runtime.actions import Effect
from operator_runtime.cache import Key, ObjectCache
from operator_runtime.kube_time import parse_timestamp
from operator_runtime.logs import ObjectLoggerAdapter
from operator_runtime.running import MayAct, always_may_act
from operator_runtime.worker import short_error
from restore_operator import actions as a
from restore_operator import reasons
from restore_operator.metrics import RestoreMetrics
from restore_operator.observed import ObservedRestore, SnapshotFacts
from restore_operator.preflight import NOTHING_TOUCHED, snapshot_object_problem
from restore_operator.settings import RestoreSettings
from restore_operator.staging import build_staging_claim, build_staging_pod, staging_name
from restore_operator.status import (
    CONDITION_CLUSTER_RESTORED,
    CONDITION_SNAPSHOT_VERIFIED,
    PHASE_COMPLETED,
    PHASE_FAILED,
    PHASE_RESTORING,
    PHASE_VERIFYING,
    S3_UNREACHABLE_TIMEOUT_SECONDS,
    failing_seconds,
    next_status,
    snapshot_to_api,
    staging_timeout_seconds,
    track_error,
)
from restore_operator.verifying import verify_snapshot

# How soon a pass follows one that changed something or waits for something.
WAIT_POLL_SECONDS = 1.0


def delete_cluster(clusters: ResourceClient, namespace: str, name: str, uid: str) -> None:
    """Foreground: the EtcdCluster disappears only after its pods, services and PVCs are gone, so a
    new seed never meets the old members."""
    clusters.delete(namespace, name, uid_precondition=uid, propagation_policy="Foreground")


def keep_issued_ca(secrets: ResourceClient, namespace: str, name: str, spec: Mapping[str, Any], uid: str) -> str:
    """spec.TLS.issued: take the cluster's owner reference off its CA Secret before the cluster is
    deleted, so the garbage collector keeps it and the restored cluster adopts it (etcd operator,
    certificates.kept_ca): its clients keep trusting the restored members. The name of the Secret
    kept ("" when there is none to keep: no issued TLS, no such Secret, or not the cluster's)."""
    if not isinstance((spec.get("TLS") or {}).get("issued"), Mapping):
        return ""
    secret_name = issued_secret_names(name).ca
    try:
        secret = secrets.get(namespace, secret_name)
    except NotFound:
        return ""
    metadata = secret.get("metadata") or {}
    if not any(ref.get("uid") == uid for ref in metadata.get("ownerReferences") or ()):
        return ""
    secrets.patch(namespace, secret_name, {"metadata": {"resourceVersion": metadata.get("resourceVersion"),
                                                        "ownerReferences": None}})
    return secret_name


def restored_cluster_body(restore: EtcdRestore, spec: Mapping[str, Any], facts: SnapshotFacts, *,
                          location: StorageLocation | S3Location, fetch_image: str,
                          bump_revision: int, staged_claim: str = "",
                          staged_claims: tuple[str, ...] = ()) -> dict[str, Any]:
    assert restore.spec is not None
    if isinstance(location, S3Location):
        location = StorageLocation("S3", s3=location)
    source = RestoreSource.at(location, sha256=facts.sha256, revision=facts.revision, bump_revision=bump_revision,
                           fetch_image=fetch_image, restore_uid=restore.uid, etag=facts.etag,
                           version_id=facts.version_id, encryption=restore.spec.encryption,
                           staged_claim=staged_claim, staged_claims=staged_claims)
    return {
        "apiVersion": c.API_GROUP_VERSION,
        "kind": c.KIND,
        "metadata": {
            "name": restore.spec.etcd_cluster_name,
            "namespace": restore.namespace,
            "labels": {c.LABEL_RESTORE: restore.name},
            "annotations": {c.ANNOTATION_RESTORE_UID: restore.uid},
        },
        "spec": {**spec, "restore": restore_source_to_api(source)},
    }


def staging_source(restore: EtcdRestore, facts: SnapshotFacts, *, fetch_image: str) -> RestoreSource:
    """The object verified, as the staging pod's fetch step reads it (the seed's source, no claim)."""
    assert restore.spec is not None
    return RestoreSource.at(restore.spec.storage, sha256=facts.sha256, revision=facts.revision,
                            fetch_image=fetch_image, restore_uid=restore.uid, etag=facts.etag,
                            version_id=facts.version_id, encryption=restore.spec.encryption)


def create_staging(claims: ResourceClient, pods: ResourceClient, claim_bodies: Sequence[dict[str, Any]],
                   pod_bodies: Sequence[dict[str, Any]]) -> None:
    """The claims first (each pod mounts one), then the pods; any already there is fine (the
    planner saw it is ours; a pod already there is waited for, never recreated)."""
    for client, body in [*((claims, claim) for claim in claim_bodies), *((pods, pod) for pod in pod_bodies)]:
        try:
            client.create(str(body["metadata"]["namespace"]), body)
        except AlreadyExists:
            pass


def remove_staging(claims: ResourceClient, pods: ResourceClient, namespace: str, pod_names: Sequence[str],
                   claim_names: Sequence[str]) -> None:
    """The staging pods first, then the claims they mounted."""
    for name in pod_names:
        pods.delete(namespace, name)
    for name in claim_names:
        claims.delete(namespace, name)


def hold_restore(restores: ResourceClient, raw: dict[str, Any]) -> None:
    """Add RESTORE_FINALIZER to the EtcdRestore."""
    _set_finalizer(restores, raw, held=True)


def release_restore(restores: ResourceClient, raw: dict[str, Any]) -> None:
    """Remove RESTORE_FINALIZER from the EtcdRestore; gone already: fine."""
    try:
        _set_finalizer(restores, raw, held=False)
    except NotFound:
        return


def _set_finalizer(restores: ResourceClient, raw: dict[str, Any], *, held: bool) -> None:
    """RESTORE_FINALIZER in or out of the EtcdRestore's finalizers, its resourceVersion as
    precondition: the finalizers of others are kept; a conflict fails the pass, the next reads again."""
    metadata = raw.get("metadata") or {}
    finalizers = [f for f in metadata.get("finalizers") or () if f != RESTORE_FINALIZER]
    if (RESTORE_FINALIZER in (metadata.get("finalizers") or ())) == held:
        return
    restores.patch(str(metadata.get("namespace")), str(metadata.get("name")), {"metadata": {
        "finalizers": [*finalizers, RESTORE_FINALIZER] if held else finalizers,
        "resourceVersion": metadata.get("resourceVersion")}})


def create_cluster(clusters: ResourceClient, body: dict[str, Any]) -> str:
    """Create the cluster; returns its uid ("" when it existed already: the next pass reads it)."""
    try:
        created = clusters.create(str(body["metadata"]["namespace"]), body)
    except AlreadyExists:
        return ""
    return str((created.get("metadata") or {}).get("uid") or "")


@dataclass(frozen=True)
class SupervisorContext:
    """What every restore supervisor and its executor share."""

    restores: ObjectCache
    restore_api: ResourceClient
    clusters: ResourceClient
    pods: ResourceClient
    claims: ResourceClient
    read_secret: SecretReader
    etcd: EtcdAccess
    events: EventRecorder
    metrics: RestoreMetrics
    settings: RestoreSettings
    stop: threading.Event
    may_act: MayAct = always_may_act  # the lease: asked before an action with an effect
    # get and patch: the CA Secret of a spec.TLS.issued cluster kept across its replacement.
    secrets: ResourceClient | None = None


@dataclass(frozen=True)
class RestorePass:
    """What one pass read: the EtcdRestore as the API has it, parsed, and what was observed."""

    raw: dict[str, Any]
    restore: EtcdRestore
    observed: ObservedRestore

    @property
    def current(self) -> dict[str, Any]:
        return self.raw.get("status") or {}


class ActionExecutor(runtime.ActionExecutor[RestorePass, float]):
    """Carries out one EtcdRestore's actions (`_EFFECTS`), each writing the status it leads to
    (the phase, its conditions, an event); returns the delay before the next pass."""

    def __init__(self, key: Key, context: SupervisorContext, log: ObjectLoggerAdapter) -> None:
        self.key = key
        self.context = context
        self.log = log

    def effects(self) -> Mapping[type[Any], Effect[RestorePass, float]]:
        return _EFFECTS

    def _fail_action(self, action: a.Fail, p: RestorePass) -> float:
        self._fail(p.raw, p.restore, p.current, action.reason, action.message)
        return self.context.settings.resync_seconds

    def _verify_snapshot(self, action: a.VerifySnapshot, p: RestorePass) -> float:
        return self._verify(p.raw, p.restore, p.current)

    def _stage(self, action: a.Stage | a.RemoveStaging, p: RestorePass) -> float:
        return self._staging(p.raw, p.restore, p.current, p.observed, action)

    def _replace(self, action: a.ReplaceCluster, p: RestorePass) -> float:
        # Still the object verified? Checked again right before the delete.
        stopped = self._recheck_verified(p, nothing_deleted=True)
        if stopped is not None:
            return stopped
        return self._replace_cluster(p.raw, p.restore, p.current, action)

    def _create(self, action: a.CreateCluster, p: RestorePass) -> float:
        # Still the object verified? Checked again right before the create.
        stopped = self._recheck_verified(p, nothing_deleted=not p.observed.recorded.cluster_spec)
        if stopped is not None:
            return stopped
        return self._create_cluster(p.raw, p.restore, p.current, p.observed, action)

    def _recheck_verified(self, p: RestorePass, *, nothing_deleted: bool) -> float | None:
        assert p.observed.recorded.snapshot is not None
        return self._recheck_snapshot(p.raw, p.restore, p.current, p.observed.recorded.snapshot,
                                      nothing_deleted=nothing_deleted)

    def _release(self, action: a.ReleaseRestore, p: RestorePass) -> float:
        release_restore(self.context.restore_api, p.raw)  # the supervisor logged what and why
        return self.context.settings.resync_seconds

    def _succeed_action(self, action: a.Succeed, p: RestorePass) -> float:
        return self._succeed(p.raw, p.restore, p.current, action)

    def _wait(self, action: a.Wait, p: RestorePass) -> float:
        self._write(p.raw, p.restore, p.current, action.phase_name, action.message,
                    conditions={CONDITION_CLUSTER_RESTORED: ("False", action.reason, action.message)}
                    if action.phase_name == PHASE_RESTORING else {})
        return WAIT_POLL_SECONDS

    def _succeed(self, raw: dict[str, Any], restore: EtcdRestore, current: dict[str, Any],
                 action: a.Succeed) -> float:
        ctx = self.context
        message = action.describe()
        self._write(raw, restore, current, PHASE_COMPLETED, message, succeeded=True,
                    updates={"servedRevision": action.served_revision},
                    conditions={CONDITION_CLUSTER_RESTORED: ("True", reasons.SERVED, message)})
        ctx.events.record(raw, "Normal", reasons.RESTORE_SUCCEEDED, message)
        ctx.metrics.count_restore("succeeded", self._elapsed(current))
        return ctx.settings.resync_seconds

    def _staging(self, raw: dict[str, Any], restore: EtcdRestore, current: dict[str, Any],
                 observed: ObservedRestore, action: a.Stage | a.RemoveStaging) -> float:
        """Create the staging claims and pods (after checking the Secrets the pods mount exist), or
        remove them (a finished restore: its status is left as it is)."""
        ctx = self.context
        if isinstance(action, a.RemoveStaging):
            remove_staging(ctx.claims, ctx.pods, restore.namespace, action.pods, action.claims)
            ctx.events.record(raw, "Normal", reasons.STAGING_REMOVED, action.describe())
            return ctx.settings.resync_seconds
        assert restore.spec is not None and observed.recorded.snapshot is not None
        facts = observed.recorded.snapshot
        source = staging_source(restore, facts, fetch_image=ctx.settings.fetch_image)
        missing = self._missing_secrets(restore.namespace, source)
        consequence = ("the replaced cluster was deleted already" if observed.recorded.cluster_spec is not None
                       and observed.cluster is None else NOTHING_TOUCHED)
        if missing:
            self._fail(raw, restore, current, reasons.SECRET_NOT_FOUND,
                       f"the staging pods would mount Secret {' and '.join(missing)}, which does not exist (deleted "
                       f"since the snapshot was verified?); {consequence}")
            return ctx.settings.resync_seconds
        spec = parse_cluster_spec(dict(action.cluster_spec))
        deadline_seconds = staging_timeout_seconds(facts.size)
        create_staging(
            ctx.claims, ctx.pods,
            [build_staging_claim(restore, spec, facts.largest_size, name=claim) for claim in action.claims],
            [build_staging_pod(restore, spec, source, claim=claim, deadline_seconds=deadline_seconds)
             for claim in action.claims])
        apart = "required" if spec.pod.anti_affinity else "preferred"
        message = (f"staging the verified snapshot on claim(s) {', '.join(action.claims)}, one per member, each by "
                   f"a pod of its name (the seed's fetch step, then etcdutl; placed like the members, on distinct "
                   f"nodes: {apart})")
        ctx.events.record(raw, "Normal", reasons.STAGING, message)
        staging: dict[str, Any] = {"claim": action.claims[0], "pod": action.claims[0],
                                   **({"claims": list(action.claims)} if len(action.claims) > 1 else {})}
        self._write(raw, restore, current, action.phase, message, updates={"staging": staging, "lastError": None})
        return WAIT_POLL_SECONDS

    def _missing_secrets(self, namespace: str, source: RestoreSource) -> list[str]:
        names = [source.location.secret, *([source.encryption.secret_name] if source.encryption else [])]
        missing = []
        for name in filter(None, names):
            try:
                self.context.read_secret(namespace, name)
            except NotFound:
                missing.append(name)
        return missing

    def _replace_cluster(self, raw: dict[str, Any], restore: EtcdRestore, current: dict[str, Any],
                         action: a.ReplaceCluster) -> float:
        ctx = self.context
        assert restore.spec is not None
        # The finalizer first: deleted from here on, the restore still creates the restored cluster.
        hold_restore(ctx.restore_api, raw)
        # Record the spec first: after the delete, only the status remembers it.
        self._write(raw, restore, current, action.phase, action.describe(),
                    updates={"clusterSpec": dict(action.cluster_spec), "lastError": None, **self._staged(current)})
        kept = ""
        if ctx.secrets is not None:
            kept = keep_issued_ca(ctx.secrets, restore.namespace, restore.spec.etcd_cluster_name,
                                         action.cluster_spec, action.cluster_uid)
        ctx.events.record(raw, "Warning", reasons.REPLACING_CLUSTER,
                          f"deleting EtcdCluster {restore.spec.etcd_cluster_name} (uid {action.cluster_uid}) "
                          "to recreate it from the verified snapshot"
                          + (f"; its CA Secret {kept} is kept for the restored cluster" if kept else ""))
        delete_cluster(ctx.clusters, restore.namespace, restore.spec.etcd_cluster_name, action.cluster_uid)
        return WAIT_POLL_SECONDS

    def _create_cluster(self, raw: dict[str, Any], restore: EtcdRestore, current: dict[str, Any],
                        observed: ObservedRestore, action: a.CreateCluster) -> float:
        ctx = self.context
        assert restore.spec is not None
        assert observed.recorded.snapshot is not None
        body = restored_cluster_body(
            restore, action.cluster_spec, observed.recorded.snapshot, location=restore.spec.storage,
            fetch_image=ctx.settings.fetch_image, bump_revision=action.bump_revision,
            staged_claim=action.staged_claim, staged_claims=action.staged_claims)
        uid = create_cluster(ctx.clusters, body)
        if action.warning:
            ctx.events.record(raw, "Warning", reasons.REVISION_NOT_BUMPED, action.warning)
        ctx.events.record(raw, "Normal", reasons.CLUSTER_CREATED,
                          f"created EtcdCluster {restore.spec.etcd_cluster_name} "
                          f"(size {action.cluster_spec.get('size')}) "
                          f"seeded from revision {observed.recorded.snapshot.revision}")
        updates: dict[str, Any] = {"restoredCluster": {"name": restore.spec.etcd_cluster_name,
                                                       **({"uid": uid} if uid else {})}, **self._staged(current)}
        message = f"{action.describe()}; {action.warning}" if action.warning else action.describe()
        self._write(raw, restore, current, action.phase, message, updates={**updates, "lastError": None},
                    conditions={CONDITION_CLUSTER_RESTORED: ("False", reasons.SEEDING, message)})
        return WAIT_POLL_SECONDS

    def _staged(self, current: dict[str, Any]) -> dict[str, Any]:
        """status.staging once its pods all Succeeded (written before the delete or create it allows)."""
        name = staging_name(self.key[1])
        return {"staging": {**(current.get("staging") or {"claim": name, "pod": name}), "staged": True}}

    def _verify(self, raw: dict[str, Any], restore: EtcdRestore, current: dict[str, Any]) -> float:
        ctx = self.context
        assert restore.spec is not None
        location = restore.spec.storage
        url = f"{location.section}://{location.path}"
        if not current.get("lastError"):  # while the store fails, the message keeps saying why
            self._write(raw, restore, current, PHASE_VERIFYING, f"fetching {url} to verify it")
            current = (ctx.restores.get(self.key) or raw).get("status") or {}
        started = time.monotonic()
        try:
            encryption = restore.spec.encryption
            key = None if encryption is None else read_encryption_key(ctx.read_secret, restore.namespace, encryption)
            storage = storage_for_location(location, restore.namespace, ctx.read_secret)
            refusal = self._endpoint_refusal(location, storage)
            if refusal is not None:
                self._fail(raw, restore, current, reasons.ENDPOINT_NOT_ALLOWED, f"{refusal}; {NOTHING_TOUCHED}")
                return ctx.settings.resync_seconds
            verified = verify_snapshot(storage, location, work_dir=ctx.settings.work_dir,
                                       etcdutl=ctx.settings.etcdutl_binary, encryption_key=key)
        except CodecError as error:
            # No key, another key, or an object that fails authentication: nothing was touched.
            self._fail(raw, restore, current, error.reason, f"{error.message}; {NOTHING_TOUCHED}")
            return ctx.settings.resync_seconds
        except StorageError as error:
            if error.transient:
                return self._s3_failing(raw, restore, current, error, f"cannot verify {url}",
                                        verified=False, consequence=NOTHING_TOUCHED)
            self._fail(raw, restore, current, error.reason, error.message)
            return ctx.settings.resync_seconds
        except ctl.SnapshotInvalid as error:
            message = f"{url} is not an intact etcd snapshot: {short_error(error)}"
            self._fail(raw, restore, current, reasons.SNAPSHOT_INVALID, message)
            return ctx.settings.resync_seconds
        except ctl.EtcdctlError as error:
            # etcdutl itself failed (a timeout, a full disk): not the snapshot's fault; say so, retry.
            message = f"checking {url} with etcdutl failed: {short_error(error)}"
            self._write(raw, restore, current, PHASE_VERIFYING, f"{message}; retrying",
                        conditions={CONDITION_SNAPSHOT_VERIFIED: ("False", reasons.CHECK_FAILED, message)})
            raise
        ctx.metrics.verify_duration.observe(time.monotonic() - started)
        facts = verified.facts
        message = (f"snapshot verified: revision {facts.revision}, {facts.total_keys} keys, {facts.size} bytes, "
                   f"sha256 {facts.sha256}")
        self._write(raw, restore, current, PHASE_VERIFYING, message,
                    updates={"snapshot": snapshot_to_api(facts), "lastError": None},
                    conditions={CONDITION_SNAPSHOT_VERIFIED: ("True", reasons.VERIFIED, message)})
        ctx.events.record(raw, "Normal", reasons.SNAPSHOT_VERIFIED, message)
        return 0.0

    def _recheck_snapshot(self, raw: dict[str, Any], restore: EtcdRestore, current: dict[str, Any],
                          facts: SnapshotFacts, *, nothing_deleted: bool) -> float | None:
        """None while the object is still the one verified; else the restore failed (or will be
        retried: S3 not answering) and this is the delay before the next pass."""
        assert restore.spec is not None
        location = restore.spec.storage
        url = f"{location.section}://{location.path}"
        consequence = NOTHING_TOUCHED if nothing_deleted else "the replaced cluster was deleted already"
        bucket, key = split_location(location)
        try:
            storage = storage_for_location(location, restore.namespace, self.context.read_secret)
            refusal = self._endpoint_refusal(location, storage)
            if refusal is not None:
                self._fail(raw, restore, current, reasons.ENDPOINT_NOT_ALLOWED, f"{refusal}; {consequence}")
                return self.context.settings.resync_seconds
            info = storage.head(bucket, key, version_id=facts.version_id)
        except ObjectNotFound:
            info = None
        except StorageError as error:
            if error.transient:
                return self._s3_failing(raw, restore, current, error, f"cannot re-check {url}",
                                        verified=True, consequence=consequence)
            self._fail(raw, restore, current, error.reason, f"{error.message}; {consequence}")
            return self.context.settings.resync_seconds
        problem = snapshot_object_problem(location.path, facts, info, consequence=consequence,
                                          scheme=location.section)
        if problem is None:
            return None
        self._fail(raw, restore, current, problem.reason, problem.message)
        return self.context.settings.resync_seconds

    def _endpoint_refusal(self, location: StorageLocation, storage: ObjectStorage) -> str | None:
        """Why no request may go to `storage` (its endpoint, or its gcpSecret's token_uri, outside
        --allowed-s3-endpoint-hosts); checked before the first request, as the backup operator does."""
        secret_key = "endpoint_url" if location.s3 is not None else "endpoint"
        where = f"spec.{location.section}.endpoint" if location.endpoint else \
            f"{secret_key} of secret {location.secret}"
        return storage_refusal(location.storage_type, storage.endpoint, getattr(storage, "token_uri", ""),
                               self.context.settings.allowed_s3_endpoint_hosts, where=where, secret=location.secret,
                               flag=f"restore operator's {S3_ENDPOINT_HOSTS_FLAG}")

    def _s3_failing(self, raw: dict[str, Any], restore: EtcdRestore, current: dict[str, Any], error: StorageError,
                    doing: str, *, verified: bool, consequence: str) -> float:
        """The object store (S3, ABS, GCS, OSS) did not answer (transient): status says so and since
        when (status.lastError); after S3_UNREACHABLE_TIMEOUT_SECONDS of it the restore fails, else the error goes to the worker,
        which retries with backoff."""
        now = datetime.now(UTC)
        last = track_error(current.get("lastError"), error.message, now)
        seconds = failing_seconds(last, now)
        limit = S3_UNREACHABLE_TIMEOUT_SECONDS
        if seconds >= limit:
            self._fail(raw, restore, current, error.reason,
                       f"{doing}: {error.backend} has been failing for {seconds:.0f} s (limit {limit:.0f} s); last error: "
                       f"{error.message}; {consequence}")
            return self.context.settings.resync_seconds
        message = (f"{doing}: {error.message}; failing for {seconds:.0f} s, retrying "
                   f"(the restore fails after {limit:.0f} s of this)")
        conditions = {} if verified else {CONDITION_SNAPSHOT_VERIFIED: ("False", error.reason, message)}
        self._write(raw, restore, current, str(current.get("phase") or PHASE_VERIFYING), message,
                    updates={"lastError": last}, conditions=conditions)
        raise error

    def _fail(self, raw: dict[str, Any], restore: EtcdRestore, current: dict[str, Any], reason: str,
              message: str) -> None:
        verified = bool((current.get("snapshot") or {}).get("sha256"))
        # Past verification, what failed is the restore of the cluster (e.g. RestoreTimedOut).
        conditions = {CONDITION_CLUSTER_RESTORED: ("False", reason, message)} if verified \
            else {CONDITION_SNAPSHOT_VERIFIED: ("False", reason, message)}
        self._write(raw, restore, current, PHASE_FAILED, message, reason=reason, conditions=conditions)
        self.context.events.record(raw, "Warning", reasons.RESTORE_FAILED, f"{reason}: {message}")
        self.context.metrics.count_restore("failed", self._elapsed(current))
        self.log.warning("restore failed (%s): %s", reason, message)

    def _elapsed(self, current: dict[str, Any]) -> float | None:
        began = parse_timestamp(current.get("startTime"))
        if began is None:
            return None
        return max(0.0, (datetime.now(UTC) - began).total_seconds())

    def _write(self, raw: dict[str, Any], restore: EtcdRestore, current: dict[str, Any], phase: str, message: str,
               *, reason: str = "", succeeded: bool = False, updates: dict[str, Any] | None = None,
               conditions: dict[str, tuple[str, str, str]] | None = None) -> None:
        ctx = self.context
        status = next_status(current, generation=restore.generation, now=datetime.now(UTC), phase=phase,
                             message=message, reason=reason, succeeded=succeeded, updates=updates,
                             conditions=conditions or {})
        if status == current:
            return
        try:
            updated = ctx.restore_api.patch_status(restore.namespace, restore.name, status_merge_patch(current, status))
        except NotFound:
            return
        if updated:
            ctx.restores.upsert(updated)
        if status.get("phase") != current.get("phase"):
            self.log.info("phase %s -> %s: %s", current.get("phase") or "(none)", phase, message)


# Each kind of action, and the method that carries it out (Done has none: nothing to write).
_EFFECTS: dict[type[Any], Effect[RestorePass, float]] = {
    a.Fail: ActionExecutor._fail_action,
    a.VerifySnapshot: ActionExecutor._verify_snapshot,
    a.Stage: ActionExecutor._stage,
    a.RemoveStaging: ActionExecutor._stage,
    a.ReplaceCluster: ActionExecutor._replace,
    a.ReleaseRestore: ActionExecutor._release,
    a.CreateCluster: ActionExecutor._create,
    a.Succeed: ActionExecutor._succeed_action,
    a.Wait: ActionExecutor._wait,
}
