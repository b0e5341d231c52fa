"""One pass's observation of an EtcdRestore: its recorded status, the EtcdCluster it names (read
from the API, not a cache: it decides what is deleted), leftover pods, its staging claims and pods,
and, once the restored cluster reports all members ready, the revision its client service serves."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import CONDITION_MEMBER_START_BLOCKED, parse_etcd_cluster, parse_recorded_status
from etcd_common.api.etcd_restore import EtcdRestore
from etcd_common.etcd import etcdctl as ctl
from etcd_common.etcd.access import EtcdAccess
from kube_adapter.errors import NotFound
from kube_adapter.resources import ResourceClient
from operator_runtime.kube_time import parse_timestamp
from operator_runtime.worker import short_error
from restore_operator.observed import ObservedRestore, RecordedRestore, SnapshotFacts, TargetCluster
from restore_operator.planning import expected_staging_claims
from restore_operator.staging import (
    StagingClaim,
    StagingPod,
    parse_staging_claim,
    parse_staging_pod,
    staging_selector,
)
from restore_operator.status import PHASE_COMPLETED, PHASE_FAILED, TERMINAL_PHASES

T = TypeVar("T")


def observe_restore(restore: EtcdRestore, raw: Mapping[str, Any], *, clusters: ResourceClient,
                    pods: ResourceClient, etcd: EtcdAccess, claims: ResourceClient | None = None,
                    find_restore: Callable[[str, str], Mapping[str, Any] | None] = lambda ns, name: None,
                    now: datetime | None = None) -> ObservedRestore:
    """`find_restore(namespace, name)` gives another EtcdRestore as last seen (None if unknown);
    `claims`: PersistentVolumeClaims (None: the staging objects are not looked for)."""
    recorded = parse_recorded(raw.get("status"), generation=restore.generation)
    now = now or datetime.now(UTC)
    if restore.spec is None or recorded.snapshot is None:
        return ObservedRestore(restore, recorded, now=now)
    observed = _observe_cluster(restore, recorded, clusters=clusters, pods=pods, etcd=etcd,
                                find_restore=find_restore, now=now)
    staging_claims, staging_pods = observe_staging(restore, pods, claims, expected_staging_claims(observed))
    return replace(observed, staging_claims=staging_claims, staging_pods=staging_pods)


def observe_staging(restore: EtcdRestore, pods: ResourceClient, claims: ResourceClient | None,
                    expected: Sequence[str]) -> tuple[dict[str, StagingClaim], dict[str, StagingPod]]:
    """The restore's staging claims and pods, by name, as they are (absent: not there). Each
    kind: those labelled as this restore's (all it made, whatever the cluster's size was), and
    each of `expected` (a pod is named as its claim) not among them got by name (another object
    may hold the name)."""
    if claims is None:
        return {}, {}
    selector = staging_selector(restore.name)
    found_claims = _labelled_then_named(claims, restore, selector, expected, parse_staging_claim)
    found_pods = _labelled_then_named(pods, restore, selector, expected, parse_staging_pod)
    return found_claims, found_pods


def _labelled_then_named(client: ResourceClient, restore: EtcdRestore, selector: str, expected: Sequence[str],
                            parse: Callable[[Mapping[str, Any], str], T]) -> dict[str, T]:
    found = {str(raw["metadata"]["name"]): parse(raw, restore.uid)
             for raw in client.list(restore.namespace, label_selector=selector)}
    for name in expected:
        if name not in found:
            try:
                found[name] = parse(client.get(restore.namespace, name), restore.uid)
            except NotFound:
                pass
    return found


def _observe_cluster(restore: EtcdRestore, recorded: RecordedRestore, *, clusters: ResourceClient,
                     pods: ResourceClient, etcd: EtcdAccess,
                     find_restore: Callable[[str, str], Mapping[str, Any] | None],
                     now: datetime) -> ObservedRestore:
    assert restore.spec is not None
    name = restore.spec.etcd_cluster_name
    try:
        raw_cluster: dict[str, Any] | None = clusters.get(restore.namespace, name)
    except NotFound:
        raw_cluster = None
    cluster = None if raw_cluster is None else parse_target_cluster(raw_cluster)
    selector = f"{c.LABEL_APP}={c.LABEL_APP_VALUE},{c.LABEL_CLUSTER}={name}"
    leftover = 0
    if cluster is None:
        leftover = len(pods.list(restore.namespace, label_selector=selector))
    observed = ObservedRestore(restore, recorded, cluster, leftover, now=now)
    if raw_cluster is None or cluster is None:
        return observed
    if not observed.cluster_is_ours():
        other = other_restore_in_progress(raw_cluster, cluster.restore_uid, find_restore)
        return replace(observed, other_restore_in_progress=other)
    if observed.cluster_serves_all_members():
        served, error = served_revision(raw_cluster, etcd)
        return replace(observed, served_revision=served, served_revision_error=error)
    return replace(observed, seed_problem=seed_problem(pods.list(restore.namespace, label_selector=selector)))


def other_restore_in_progress(raw_cluster: Mapping[str, Any], restore_uid: str,
                              find_restore: Callable[[str, str], Mapping[str, Any] | None]) -> str:
    """The name of the unfinished EtcdRestore whose uid the cluster carries, or ""."""
    if not restore_uid:
        return ""
    metadata = raw_cluster.get("metadata") or {}
    name = str((metadata.get("labels") or {}).get(c.LABEL_RESTORE) or "")
    other = find_restore(str(metadata.get("namespace") or ""), name) if name else None
    if other is None or (other.get("metadata") or {}).get("uid") != restore_uid:
        return ""
    phase = str((other.get("status") or {}).get("phase") or "")
    return "" if phase in TERMINAL_PHASES else name


def seed_problem(pods: list[dict[str, Any]]) -> str:
    """A failing restore init container of the cluster's pods, said the way `kubectl` would
    ("seed pod c-x Init:CrashLoopBackOff: restore-snapshot exited 128 (18 restarts); ...")."""
    for pod in sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("name"))):
        name = (pod.get("metadata") or {}).get("name")
        for status in (pod.get("status") or {}).get("initContainerStatuses") or []:
            state = status.get("state") or {}
            last = (status.get("lastState") or {}).get("terminated") or state.get("terminated") or {}
            waiting = (state.get("waiting") or {}).get("reason")
            container = status.get("name")
            if last.get("exitCode", 0) != 0:
                return (f"seed pod {name}{f' Init:{waiting}' if waiting else ''}: {container} exited "
                        f"{last.get('exitCode')} ({status.get('restartCount', 0)} restarts); see "
                        f"`kubectl logs {name} -c {container}`")
            if waiting and waiting not in ("PodInitializing", "ContainerCreating"):  # e.g. ImagePullBackOff
                detail = (state.get("waiting") or {}).get("message")
                return f"seed pod {name} Init:{waiting}: {container}{f': {detail}' if detail else ''}"
    return ""


def parse_target_cluster(raw: Mapping[str, Any]) -> TargetCluster:
    metadata = raw.get("metadata") or {}
    status = raw.get("status") or {}
    members = status.get("members") or {}
    ready = members.get("ready") or []
    unready = members.get("unready") or []
    blocked = parse_recorded_status(status).condition(CONDITION_MEMBER_START_BLOCKED)
    if blocked is not None and blocked.status != "True":
        blocked = None
    return TargetCluster(
        uid=str(metadata.get("uid") or ""),
        restore_uid=str((metadata.get("annotations") or {}).get(c.ANNOTATION_RESTORE_UID) or ""),
        deleting=bool(metadata.get("deletionTimestamp")),
        spec=dict(raw.get("spec") or {}),
        phase=str(status.get("phase") or ""),
        ready=_int(status.get("readyCount")),
        members=len(ready) + len(unready) if (ready or unready) else _int(status.get("size")),
        start_blocked_reason=blocked.reason if blocked is not None else "",
        start_blocked=(blocked.message or blocked.reason) if blocked is not None else "",
    )


def client_service_url(raw_cluster: Mapping[str, Any]) -> tuple[str, Any]:
    cluster = parse_etcd_cluster(raw_cluster)
    spec = cluster.require_spec()
    scheme = "https" if spec.tls.client_tls else "http"
    host = f"{cluster.name}{c.CLIENT_SERVICE_SUFFIX}.{cluster.namespace}.svc{spec.pod.cluster_domain}"
    return f"{scheme}://{host}:{c.CLIENT_PORT}", cluster


def served_revision(raw_cluster: Mapping[str, Any], etcd: EtcdAccess) -> tuple[int | None, str]:
    """The revision the client service answers with (through the cluster's client TLS, if any)."""
    try:
        url, cluster = client_service_url(raw_cluster)
        statuses = etcd.client(cluster, [url]).endpoint_status()
    except (ctl.EtcdctlError, ValueError) as error:
        return None, short_error(error)
    reachable = [status for status in statuses if status.reachable]
    if not reachable:
        errors = "; ".join(e for status in statuses for e in status.errors)
        return None, f"client service not answering: {errors or 'no answer'}"
    return reachable[0].revision, ""


def parse_recorded(raw: Any, *, generation: int = 0) -> RecordedRestore:
    """What earlier passes recorded. A status the CoreOS restore operator left (no `phase`, its
    `succeeded` or `reason` set) is a finished restore: Completed or Failed for this generation,
    so a migrated EtcdRestore never restores (and replaces a live cluster) a second time."""
    if not isinstance(raw, Mapping):
        return RecordedRestore()
    if not raw.get("phase") and (raw.get("succeeded") is True or raw.get("reason")):
        return RecordedRestore(phase=PHASE_COMPLETED if raw.get("succeeded") is True else PHASE_FAILED,
                               observed_generation=generation)
    snapshot = raw.get("snapshot")
    facts = None
    if isinstance(snapshot, Mapping) and snapshot.get("sha256"):
        facts = SnapshotFacts(
            sha256=str(snapshot.get("sha256")), size=_int(snapshot.get("size")),
            revision=_int(snapshot.get("revision")), total_keys=_int(snapshot.get("totalKeys")),
            hash=_int(snapshot.get("hash")), etag=str(snapshot.get("etag") or ""),
            version_id=str(snapshot.get("versionId") or ""),
            compression=str(snapshot.get("compression") or ""),
            key_id=str(snapshot.get("encryptionKeyId") or ""),
            snapshot_size=_int(snapshot.get("snapshotSize")),
        )
    cluster_spec = raw.get("clusterSpec")
    restored = raw.get("restoredCluster")
    staging = raw.get("staging")
    staging = staging if isinstance(staging, Mapping) else {}
    return RecordedRestore(
        staged_claim=str(staging.get("claim") or ""),
        staged=staging.get("staged") is True,
        restored_cluster_uid=str(restored.get("uid") or "") if isinstance(restored, Mapping) else "",
        phase=str(raw.get("phase") or ""),
        phase_started=parse_timestamp(raw.get("phaseStartTime")),
        message=str(raw.get("message") or ""),
        observed_generation=_int(raw.get("observedGeneration")),
        snapshot=facts,
        cluster_spec=dict(cluster_spec) if isinstance(cluster_spec, Mapping) else None,
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
