"""The pass of one EtcdRestore: observe -> plan one action -> act -> write status (run by
its `operator_runtime.worker.ObjectWorker` thread). Progress lives in the restore's status, its
staging claims and pods, and on the EtcdCluster (the restore's uid), so a restart at any point
continues where it was."""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from etcd_common.api.etcd_cluster import parse_cluster_spec
from etcd_common.api.etcd_restore import EtcdRestore, parse_etcd_restore
from etcd_common.api.restore_source import RestoreSource
from etcd_common.etcd import etcdctl as ctl
from etcd_common.etcd.access import EtcdAccess
from etcd_common.storage.codec import CodecError
from etcd_common.storage.encryption_keys import read_encryption_key
from etcd_common.storage.locations import SecretReader, split_location, storage_for_location
from etcd_common.storage.objects import ObjectNotFound, StorageError
from kube_adapter.errors import KubeError, NotFound
from kube_adapter.events import EventRecorder
from kube_adapter.patching import status_merge_patch
from kube_adapter.resources import ResourceClient
from operator_runtime.cache import Key, ObjectCache
from operator_runtime.logs import object_logger
from operator_runtime.worker import ObjectWorker, short_error
from restore_operator import acting
from restore_operator import actions as a
from restore_operator.metrics import RestoreMetrics
from restore_operator.observed import ObservedRestore, SnapshotFacts
from restore_operator.observing import observe_restore
from restore_operator.planning import plan_next_action
from restore_operator.preflight import NOTHING_TOUCHED, RestorePolicy, snapshot_object_problem
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

WAIT_POLL_SECONDS = 1.0
REASON_SNAPSHOT_INVALID = "SnapshotInvalid"
REASON_CHECK_FAILED = "SnapshotCheckFailed"
REASON_SECRET_NOT_FOUND = "SecretNotFound"


@dataclass(frozen=True)
class SupervisorContext:
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
    may_act: Callable[[], bool] = lambda: True
    # get and patch: the CA Secret of a spec.TLS.issued cluster kept across its replacement.
    secrets: ResourceClient | None = None


class RestoreSupervisor:
    def __init__(self, key: Key, context: SupervisorContext) -> None:
        self.key = key
        self.context = context
        self.log = object_logger(key[0], key[1], logging.getLogger(__name__), field="restore")
        self._started = time.monotonic()
        settings = context.settings
        self.policy = RestorePolicy(fetch_image=settings.fetch_image, bump_revision=settings.bump_revision,
                                    trusted_repositories=settings.trusted_repositories)
        self.worker = ObjectWorker(key, self.reconcile_once, stop=context.stop, log=self.log, role="restore",
                                   on_pass=self._count_pass, expected_errors=(KubeError, StorageError, ctl.EtcdctlError))

    def _count_pass(self, seconds: float, error: Exception | None) -> None:
        if error is not None:
            self.context.metrics.errors.labels(reason=type(error).__name__).inc()

    def reconcile_once(self) -> float:
        ctx = self.context
        raw = ctx.restores.get(self.key)
        if raw is None:
            return ctx.settings.resync_seconds
        restore = parse_etcd_restore(raw)
        observed = observe_restore(restore, raw, clusters=ctx.clusters, pods=ctx.pods, etcd=ctx.etcd,
                                   claims=ctx.claims, find_restore=lambda ns, name: ctx.restores.get((ns, name)))
        action = plan_next_action(observed, self.policy)
        if isinstance(action, a.Done):
            return ctx.settings.resync_seconds
        if action.has_effect and not ctx.may_act():
            self.log.warning("not acting (%s): leadership not confirmed", action.describe())
            return WAIT_POLL_SECONDS
        if action.has_effect:
            self.log.info("%s", action.describe())
        current = raw.get("status") or {}
        if isinstance(action, a.Fail):
            self._fail(raw, restore, current, action.reason, action.message)
            return ctx.settings.resync_seconds
        if isinstance(action, a.VerifySnapshot):
            return self._verify(raw, restore, current)
        if isinstance(action, (a.Stage, a.RemoveStaging)):
            return self._staging(raw, restore, current, observed, action)
        if isinstance(action, (a.ReplaceCluster, a.CreateCluster)):
            # Still the object verified? Checked again right before the delete (or the create).
            assert observed.recorded.snapshot is not None
            nothing_deleted = isinstance(action, a.ReplaceCluster) or not observed.recorded.cluster_spec
            stopped = self._recheck_snapshot(raw, restore, current, observed.recorded.snapshot,
                                             nothing_deleted=nothing_deleted)
            if stopped is not None:
                return stopped
        if isinstance(action, a.ReplaceCluster):
            return self._replace_cluster(raw, restore, current, action)
        if isinstance(action, a.CreateCluster):
            return self._create_cluster(raw, restore, current, observed, action)
        if isinstance(action, a.Succeed):
            return self._succeed(raw, restore, current, action)
        assert isinstance(action, a.Wait)
        self._write(raw, restore, current, action.phase_name, action.message,
                    conditions={CONDITION_CLUSTER_RESTORED: ("False", action.reason, action.message)}
                    if action.phase_name == PHASE_RESTORING else {})
        return WAIT_POLL_SECONDS

    def _succeed(self, raw: dict[str, Any], restore: EtcdRestore, current: dict[str, Any],
                 action: a.Succeed) -> float:
        ctx = self.context
        message = action.describe()
        self._write(raw, restore, current, PHASE_COMPLETED, message, succeeded=True,
                    updates={"servedRevision": action.served_revision},
                    conditions={CONDITION_CLUSTER_RESTORED: ("True", "Served", message)})
        ctx.events.record(raw, "Normal", "RestoreSucceeded", message)
        ctx.metrics.count_restore("succeeded", self._elapsed(current))
        return ctx.settings.resync_seconds

    def _staging(self, raw: dict[str, Any], restore: EtcdRestore, current: dict[str, Any],
                 observed: ObservedRestore, action: a.Stage | a.RemoveStaging) -> float:
        """Create the staging claims and pods (after checking the Secrets the pods mount exist), or
        remove them (a finished restore: its status is left as it is)."""
        ctx = self.context
        if isinstance(action, a.RemoveStaging):
            acting.remove_staging(ctx.claims, ctx.pods, restore.namespace, action.pods, action.claims)
            ctx.events.record(raw, "Normal", "StagingRemoved", action.describe())
            return ctx.settings.resync_seconds
        assert restore.spec is not None and observed.recorded.snapshot is not None
        facts = observed.recorded.snapshot
        source = acting.staging_source(restore, facts, fetch_image=ctx.settings.fetch_image)
        missing = self._missing_secrets(restore.namespace, source)
        consequence = ("the replaced cluster was deleted already" if observed.recorded.cluster_spec is not None
                       and observed.cluster is None else NOTHING_TOUCHED)
        if missing:
            self._fail(raw, restore, current, REASON_SECRET_NOT_FOUND,
                       f"the staging pods would mount Secret {' and '.join(missing)}, which does not exist (deleted "
                       f"since the snapshot was verified?); {consequence}")
            return ctx.settings.resync_seconds
        spec = parse_cluster_spec(dict(action.cluster_spec))
        deadline_seconds = staging_timeout_seconds(facts.size)
        acting.create_staging(
            ctx.claims, ctx.pods,
            [build_staging_claim(restore, spec, facts.largest_size, name=claim) for claim in action.claims],
            [build_staging_pod(restore, spec, source, claim=claim, deadline_seconds=deadline_seconds)
             for claim in action.claims])
        apart = "required" if spec.pod.anti_affinity else "preferred"
        message = (f"staging the verified snapshot on claim(s) {', '.join(action.claims)}, one per member, each by "
                   f"a pod of its name (the seed's fetch step, then etcdutl; placed like the members, on distinct "
                   f"nodes: {apart})")
        ctx.events.record(raw, "Normal", "Staging", message)
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
        # Record the spec first: after the delete, only the status remembers it.
        self._write(raw, restore, current, action.phase, action.describe(),
                    updates={"clusterSpec": dict(action.cluster_spec), "lastError": None, **self._staged(current)})
        kept = ""
        if ctx.secrets is not None:
            kept = acting.keep_issued_ca(ctx.secrets, restore.namespace, restore.spec.etcd_cluster_name,
                                         action.cluster_spec, action.cluster_uid)
        ctx.events.record(raw, "Warning", "ReplacingCluster",
                          f"deleting EtcdCluster {restore.spec.etcd_cluster_name} (uid {action.cluster_uid}) "
                          "to recreate it from the verified snapshot"
                          + (f"; its CA Secret {kept} is kept for the restored cluster" if kept else ""))
        acting.delete_cluster(ctx.clusters, restore.namespace, restore.spec.etcd_cluster_name, action.cluster_uid)
        return WAIT_POLL_SECONDS

    def _create_cluster(self, raw: dict[str, Any], restore: EtcdRestore, current: dict[str, Any],
                        observed: ObservedRestore, action: a.CreateCluster) -> float:
        ctx = self.context
        assert restore.spec is not None
        assert observed.recorded.snapshot is not None
        body = acting.restored_cluster_body(
            restore, action.cluster_spec, observed.recorded.snapshot, location=restore.spec.storage,
            fetch_image=ctx.settings.fetch_image, bump_revision=action.bump_revision,
            staged_claim=action.staged_claim, staged_claims=action.staged_claims)
        uid = acting.create_cluster(ctx.clusters, body)
        if action.warning:
            ctx.events.record(raw, "Warning", "RevisionNotBumped", action.warning)
        ctx.events.record(raw, "Normal", "ClusterCreated",
                          f"created EtcdCluster {restore.spec.etcd_cluster_name} "
                          f"(size {action.cluster_spec.get('size')}) "
                          f"seeded from revision {observed.recorded.snapshot.revision}")
        updates: dict[str, Any] = {"restoredCluster": {"name": restore.spec.etcd_cluster_name,
                                                       **({"uid": uid} if uid else {})}, **self._staged(current)}
        message = f"{action.describe()}; {action.warning}" if action.warning else action.describe()
        self._write(raw, restore, current, action.phase, message, updates={**updates, "lastError": None},
                    conditions={CONDITION_CLUSTER_RESTORED: ("False", "Seeding", message)})
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
            self._fail(raw, restore, current, REASON_SNAPSHOT_INVALID, message)
            return ctx.settings.resync_seconds
        except ctl.EtcdctlError as error:
            # etcdutl itself failed (a timeout, a full disk): not the snapshot's fault; say so, retry.
            message = f"checking {url} with etcdutl failed: {short_error(error)}"
            self._write(raw, restore, current, PHASE_VERIFYING, f"{message}; retrying",
                        conditions={CONDITION_SNAPSHOT_VERIFIED: ("False", REASON_CHECK_FAILED, message)})
            raise
        ctx.metrics.verify_duration.observe(time.monotonic() - started)
        facts = verified.facts
        message = (f"snapshot verified: revision {facts.revision}, {facts.total_keys} keys, {facts.size} bytes, "
                   f"sha256 {facts.sha256}")
        self._write(raw, restore, current, PHASE_VERIFYING, message,
                    updates={"snapshot": snapshot_to_api(facts), "lastError": None},
                    conditions={CONDITION_SNAPSHOT_VERIFIED: ("True", "Verified", message)})
        ctx.events.record(raw, "Normal", "SnapshotVerified", message)
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
        self.context.events.record(raw, "Warning", "RestoreFailed", f"{reason}: {message}")
        self.context.metrics.count_restore("failed", self._elapsed(current))
        self.log.warning("restore failed (%s): %s", reason, message)

    def _elapsed(self, current: dict[str, Any]) -> float | None:
        start = current.get("startTime")
        if not isinstance(start, str):
            return None
        try:
            began = datetime.strptime(start, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError:
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
