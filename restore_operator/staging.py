"""The staging step (pure): before anything of a cluster is deleted, one pod of the EtcdRestore per
member of the restored cluster, each with its own claim, runs the seed's own fetch step (each
downloads the verified object itself) and `etcdutl snapshot status`
(`etcd_common.seed.pod.staging_pod`); each claim is sized by the seed's space rule and holds the
same checked snapshot. A staging pod is placed like the members (their nodeSelector, tolerations
and node affinity) and apart from the other staging pods of its restore (required when the
members require distinct nodes, `spec.pod.antiAffinity`), so that a claim bound where its first
consumer runs (WaitForFirstConsumer) binds where a member can run. Each member of the restored
cluster then copies the snapshot from its own claim and all of them bootstrap at once
(`spec.restore.stagedClaim`, the first, and `spec.restore.stagedClaims`, all). Here: the claims'
and pods' names and manifests, and what a pod's status says (done, failing and why, or still
going)."""
from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import ClusterSpec
from etcd_common.api.etcd_restore import EtcdRestore
from etcd_common.api.maintenance import format_bytes
from etcd_common.api.restore_source import RestoreSource
from etcd_common.seed.pod import CHECK_CONTAINER, FETCH_CONTAINER, staging_pod
from etcd_common.seed.security import etcd_container_security_context, member_pod_security_context
from etcd_common.seed.space import seed_space_needed_bytes

STAGING_SUFFIX: Final = "-staging"
STAGING_COMPONENT: Final = "restore-staging"  # the app.kubernetes.io/component of the staging objects
HOSTNAME_TOPOLOGY_KEY: Final = "kubernetes.io/hostname"
PREFERRED_APART_WEIGHT: Final = 100
# Waiting reasons of a container that will not start by waiting (with restartPolicy Never, an
# image that cannot be pulled or a container that cannot be configured is as good as failed).
FAILING_WAIT_REASONS: Final = frozenset({
    "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
    "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
})
TERMINATION_MESSAGE_CHARS: Final = 600
# strerror(ENOSPC), as the fetch step (Python) and etcdutl (Go) both print it.
NO_SPACE_WORDS: Final = "no space left on device"


def staging_name(restore_name: str) -> str:
    """The first staging claim's and pod's name."""
    return f"{restore_name}{STAGING_SUFFIX}"


def staging_claim_names(restore_name: str, members: int) -> tuple[str, ...]:
    """The staging claims for a restored cluster of `members` members (at least one): the first is
    `staging_name`, claim i >= 1 `<restore>-staging-<i>`; each claim's staging pod has its name."""
    first = staging_name(restore_name)
    return (first, *(f"{first}-{i}" for i in range(1, members)))


def staging_claim_bytes(snapshot_bytes: int) -> int:
    """The claim's size: the seed's rule (`etcd_common.seed.space`), rounded up to MiB."""
    needed = seed_space_needed_bytes(snapshot_bytes)
    return -(-needed // c.MIB) * c.MIB


def no_space_hint(problem: str, snapshot_bytes: int | None) -> str:
    """For a staging pod that ran out of space (its `problem` says ENOSPC): what the claim asked
    for and what that means; "" for any other problem."""
    if NO_SPACE_WORDS not in problem.lower():
        return ""
    asked = "" if snapshot_bytes is None else \
        f", which asked for {format_bytes(staging_claim_bytes(snapshot_bytes))} (the seed's rule for this snapshot)"
    return (f"no space left on the staging claim{asked}: its volume holds less than the claim asked for, or "
            "something else fills it, and a seed's volume of the same storage class may too")


def staging_labels(restore_name: str) -> dict[str, str]:
    """The labels of a restore's staging claims and pods. Not the cluster's labels: a staging pod
    is no member (nor a leftover one)."""
    return {c.LABEL_RESTORE: restore_name, "app.kubernetes.io/component": STAGING_COMPONENT}


def staging_selector(restore_name: str) -> str:
    """A label selector for a restore's staging objects."""
    return ",".join(f"{key}={value}" for key, value in staging_labels(restore_name).items())


def _metadata(restore: EtcdRestore, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": restore.namespace,
        "labels": staging_labels(restore.name),
        "ownerReferences": [{"apiVersion": c.API_GROUP_VERSION, "kind": "EtcdRestore", "name": restore.name,
                             "uid": restore.uid, "controller": True}],
    }


def build_staging_claim(restore: EtcdRestore, spec: ClusterSpec, snapshot_bytes: int, *,
                        name: str) -> dict[str, Any]:
    """Staging claim `name`: ReadWriteOnce, of the target cluster's storage class when its members
    use claims (else the default class), big enough for the seed's rule (all claims alike)."""
    claim: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": format_bytes(staging_claim_bytes(snapshot_bytes))}},
    }
    members = spec.pod.persistent_volume_claim_spec or {}
    if members.get("storageClassName"):
        claim["storageClassName"] = members["storageClassName"]
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _metadata(restore, name),
            "spec": claim}


def build_staging_pod(restore: EtcdRestore, spec: ClusterSpec, source: RestoreSource, *, claim: str,
                      deadline_seconds: float) -> dict[str, Any]:
    """Staging pod `claim` (named as its claim, which it alone mounts): it fetches and checks
    `source` (the verified object, pinned) as the seed would, with the seed's image choices, the
    target cluster's pod security context and `staging_placement`."""
    return staging_pod(
        source, metadata=_metadata(restore, claim), claim=claim, etcd_image=spec.image,
        etcd_version=spec.version, pod_security_context=member_pod_security_context(spec),
        security_context=etcd_container_security_context(), deadline_seconds=int(deadline_seconds) + 1,
        placement=staging_placement(restore.name, spec),
    )


def staging_placement(restore_name: str, spec: ClusterSpec) -> dict[str, Any]:
    """Where a staging pod may run: where a member of `spec` may (its nodeSelector, tolerations and
    the nodeAffinity of its affinity; not its pod (anti-)affinity, which selects member pods, while
    the old members still run and a staging pod is none), on another node than the restore's other
    staging pods: required when the members require distinct nodes (`spec.pod.antiAffinity`; too
    few nodes then leave a staging pod unscheduled, before anything is deleted), else preferred."""
    pod = spec.pod
    apart = {"labelSelector": {"matchLabels": staging_labels(restore_name)}, "topologyKey": HOSTNAME_TOPOLOGY_KEY}
    anti_affinity = ({"requiredDuringSchedulingIgnoredDuringExecution": [apart]} if pod.anti_affinity else
                     {"preferredDuringSchedulingIgnoredDuringExecution": [
                         {"weight": PREFERRED_APART_WEIGHT, "podAffinityTerm": apart}]})
    node_affinity = (pod.affinity or {}).get("nodeAffinity")
    placement: dict[str, Any] = {
        "affinity": {**({"nodeAffinity": copy.deepcopy(node_affinity)} if node_affinity else {}),
                     "podAntiAffinity": anti_affinity},
    }
    if pod.node_selector:
        placement["nodeSelector"] = dict(pod.node_selector)
    if pod.tolerations:
        placement["tolerations"] = [copy.deepcopy(toleration) for toleration in pod.tolerations]
    return placement


@dataclass(frozen=True)
class StagingPod:
    """A staging pod as observed."""

    phase: str  # the pod's status.phase ("" before the kubelet reported)
    owned: bool  # owned by this EtcdRestore (else: another object took the name)
    deleting: bool = False
    # Why it failed or will not start ("" when it did not): said from its status.
    problem: str = ""
    # What it is doing now (for the Staging phase's message).
    progress: str = ""

    @property
    def succeeded(self) -> bool:
        return self.phase == "Succeeded"


@dataclass(frozen=True)
class StagingClaim:
    owned: bool
    deleting: bool = False
    phase: str = ""  # Pending, Bound


def owned_by(raw: Mapping[str, Any], uid: str) -> bool:
    references = (raw.get("metadata") or {}).get("ownerReferences") or []
    return bool(uid) and any(isinstance(r, Mapping) and r.get("uid") == uid for r in references)


def parse_staging_claim(raw: Mapping[str, Any], restore_uid: str) -> StagingClaim:
    return StagingClaim(owned=owned_by(raw, restore_uid),
                        deleting=bool((raw.get("metadata") or {}).get("deletionTimestamp")),
                        phase=str((raw.get("status") or {}).get("phase") or ""))


def parse_staging_pod(raw: Mapping[str, Any], restore_uid: str) -> StagingPod:
    status = raw.get("status") or {}
    phase = str(status.get("phase") or "")
    return StagingPod(phase=phase, owned=owned_by(raw, restore_uid),
                      deleting=bool((raw.get("metadata") or {}).get("deletionTimestamp")),
                      problem=staging_pod_problem(status), progress=staging_pod_progress(status))


def _containers(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]


def _short(text: str) -> str:
    text = " ".join(line.strip() for line in text.strip().splitlines() if line.strip())
    return text if len(text) <= TERMINATION_MESSAGE_CHARS else "..." + text[-TERMINATION_MESSAGE_CHARS:]


def staging_pod_problem(status: Mapping[str, Any]) -> str:
    """Why the staging pod failed or cannot start, from its status: a container that exited
    non-zero (its termination message: the fetch step's error, the check's output), a waiting
    reason that waiting does not cure (an image not pulled, a container not configured), or the
    pod's own reason (DeadlineExceeded, Evicted); "" when none."""
    for container in _containers(status):
        name = container.get("name")
        state = container.get("state") or {}
        terminated = state.get("terminated") or {}
        if terminated and terminated.get("exitCode", 0) != 0:
            message = _short(str(terminated.get("message") or ""))
            why = terminated.get("reason") or "Error"
            return f"{name} exited {terminated.get('exitCode')} ({why}){f': {message}' if message else ''}"
        waiting = state.get("waiting") or {}
        if waiting.get("reason") in FAILING_WAIT_REASONS:
            message = _short(str(waiting.get("message") or ""))
            return f"{name} {waiting['reason']}{f': {message}' if message else ''}"
    if status.get("phase") == "Failed":
        return f"pod failed ({status.get('reason') or 'no reason given'}): {_short(str(status.get('message') or ''))}"
    return ""


def staging_pod_progress(status: Mapping[str, Any]) -> str:
    """Where a staging pod is: unscheduled (and why), a container waiting (and why), running."""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return f"not scheduled ({condition.get('reason')}: {_short(str(condition.get('message') or ''))})"
    for container in _containers(status):
        state = container.get("state") or {}
        if "running" in state:
            return f"{container.get('name')} {_step(str(container.get('name')))}"
        waiting = state.get("waiting") or {}
        if waiting:
            message = _short(str(waiting.get("message") or ""))
            return f"{container.get('name')} waiting ({waiting.get('reason')}{f': {message}' if message else ''})"
    return f"pod {status.get('phase') or 'Pending'}"


def _step(container: str) -> str:
    if container == FETCH_CONTAINER:
        return "fetching the snapshot"
    if container == CHECK_CONTAINER:
        return "checking the snapshot"
    return "running"
