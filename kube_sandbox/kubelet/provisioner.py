"""The sandbox's storage: every PersistentVolumeClaim is bound at once to a new hostPath
PersistentVolume over its own directory `pvc/<namespace>/<claim>-<claim uid>`.

The real kube-scheduler schedules a pod only once its claims are bound, so something must bind them;
here that is this loop, doing what an external provisioner plus the PV binder would (create the PV
pre-bound to the claim, then mark both Bound). Every node shares the host's filesystem, so the
volumes carry no node affinity: a claim follows its pod to any node, like network storage. When a
claim is deleted its PV object goes too; the directory stays (as before: data is never removed).

Sized claims (opt-in by class): a claim of the StorageClass `kube-sandbox-sized`
(sized_volumes.SIZED_STORAGE_CLASS, which this loop creates) gets a tmpfs of its request mounted at
its directory before it is bound, so its pods meet ENOSPC beyond that size as on a real volume;
deleting the claim unmounts it (its data goes, like a deleted volume's), and so does stopping the
kubelet. The no-space fault `fill_volume` (ClaimBinder.fill) leaves a sized claim only a number of
bytes free: at once when the claim is bound, else as soon as it is bound, before any pod can use it
(the scheduler places a pod only once its claims are bound).
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from kube_sandbox.kubelet import sized_volumes
from kube_sandbox.kubelet.kube_api import MERGE_PATCH, ApiError, KubeApi, NotFound, object_path
from kube_sandbox.kubelet.settings import KubeletSettings
from kube_sandbox.kubelet.sized_volumes import SIZED_STORAGE_CLASS, VolumeNotSized
from kube_sandbox.kubelet.watching import list_and_watch

log = logging.getLogger(__name__)

PROVISIONER = "kube-sandbox"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
DEFAULT_STORAGE_REQUEST = "1Gi"
CLAIM_DIRECTORY_MODE = 0o777
SIZED_CLASS_OBJECT: dict[str, Any] = {
    "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
    "metadata": {"name": SIZED_STORAGE_CLASS, "annotations": {
        "kube-sandbox.test/description": "a tmpfs of the claim's size: writes beyond it fail with ENOSPC"}},
    "provisioner": PROVISIONER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
}


def claim_directory(settings: KubeletSettings, namespace: str, claim_name: str, claim_uid: str) -> Path:
    """The host directory behind a claim: the PV's hostPath, and what pods using the claim mount."""
    return settings.pvc_dir / namespace / f"{claim_name}-{claim_uid}"


def volume_name(claim: dict[str, Any]) -> str:
    return f"pvc-{claim['metadata']['uid']}"


def persistent_volume(claim: dict[str, Any], directory: Path) -> dict[str, Any]:
    """A PV for `claim`, pre-bound to it (claimRef with the claim's uid)."""
    metadata, spec = claim["metadata"], claim.get("spec") or {}
    requested = ((spec.get("resources") or {}).get("requests") or {}).get("storage", DEFAULT_STORAGE_REQUEST)
    return {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": volume_name(claim), "annotations": {PROVISIONED_BY: PROVISIONER}},
        "spec": {
            "capacity": {"storage": requested},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "volumeMode": spec.get("volumeMode") or "Filesystem",
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": spec.get("storageClassName") or "",
            "hostPath": {"path": str(directory), "type": "DirectoryOrCreate"},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": metadata["namespace"],
                         "name": metadata["name"], "uid": metadata["uid"]},
        },
    }


class ClaimBinder:
    """Watches claims; binds each new one to its own PV and deletes the PV of a deleted claim."""

    def __init__(self, api: KubeApi, settings: KubeletSettings, stop: threading.Event) -> None:
        self.api = api
        self.settings = settings
        self.stop = stop
        self._lock = threading.Lock()  # mounts, and the no-space faults armed for claims not yet bound
        self._armed_fills: dict[tuple[str, str], int] = {}
        self._mounted: set[Path] = set()

    def run(self) -> None:
        try:
            self.api.create(object_path("storage.k8s.io", "v1", "storageclasses"), SIZED_CLASS_OBJECT)
        except ApiError as e:
            if e.status != 409:
                log.warning("could not create the StorageClass %s (%s); its claims are sized all the same",
                            SIZED_STORAGE_CLASS, e)
        list_and_watch(self.api, object_path("", "v1", "persistentvolumeclaims"), self.stop, self._on_list,
                       self._on_event, "persistentvolumeclaims")

    def _on_list(self, claims: list[dict[str, Any]]) -> None:
        for claim in claims:
            self._on_event("MODIFIED", claim)
        present = {volume_name(c) for c in claims}
        for volume in self.api.get(object_path("", "v1", "persistentvolumes")).get("items") or []:
            annotations = volume["metadata"].get("annotations") or {}
            if annotations.get(PROVISIONED_BY) == PROVISIONER and volume["metadata"]["name"] not in present:
                self._delete_volume(volume["metadata"]["name"])

    def _on_event(self, event_type: str, claim: dict[str, Any]) -> None:
        if event_type == "DELETED":
            self._unmount(claim)
            self._delete_volume(volume_name(claim))
        elif sized_volumes.is_sized(claim) and (claim.get("spec") or {}).get("volumeName"):
            self._mount(claim)  # bound by an earlier kubelet, whose tmpfs went with it
        elif not (claim.get("spec") or {}).get("volumeName") and not claim["metadata"].get("deletionTimestamp"):
            try:
                self.bind(claim)
            except ApiError as e:  # the next event or relist retries
                log.warning("%s/%s: binding the claim failed (%s)", claim["metadata"]["namespace"],
                            claim["metadata"]["name"], e)

    def bind(self, claim: dict[str, Any]) -> None:
        metadata = claim["metadata"]
        namespace, name = metadata["namespace"], metadata["name"]
        directory = claim_directory(self.settings, namespace, name, metadata["uid"])
        directory.mkdir(parents=True, exist_ok=True)
        if sized_volumes.is_sized(claim):
            self._mount(claim)
        elif self._armed_fills.pop((namespace, name), None) is not None:
            log.warning("%s/%s: the no-space fault armed for this claim is dropped: it is not of the StorageClass "
                        "%s", namespace, name, SIZED_STORAGE_CLASS)
        # Writable by the pod's user whoever it is, as hostPath provisioners make their directories
        # (local-path-provisioner, minikube's: 0777): the kubelet applies no fsGroup to a hostPath
        # volume, and a non-root pod (uid 65532: member and restore staging pods) must write it.
        directory.chmod(CLAIM_DIRECTORY_MODE)
        volume = persistent_volume(claim, directory)
        pv_name = volume["metadata"]["name"]
        try:
            self.api.create(object_path("", "v1", "persistentvolumes"), volume)
        except ApiError as e:
            if e.status != 409:
                raise
        self.api.patch(object_path("", "v1", "persistentvolumes", name=pv_name, subresource="status"),
                       {"status": {"phase": "Bound"}}, content_type=MERGE_PATCH)
        claim_path = object_path("", "v1", "persistentvolumeclaims", namespace, name)
        self.api.patch(claim_path, {"metadata": {"uid": metadata["uid"], "annotations": {
            BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"}}, "spec": {"volumeName": pv_name}},
            content_type=MERGE_PATCH)
        spec = volume["spec"]
        self.api.patch(claim_path + "/status", {"status": {
            "phase": "Bound", "accessModes": spec["accessModes"], "capacity": spec["capacity"]}},
            content_type=MERGE_PATCH)
        log.info("%s/%s: claim bound to volume %s (%s)", namespace, name, pv_name, directory)

    def _directory(self, claim: dict[str, Any]) -> Path:
        metadata = claim["metadata"]
        return claim_directory(self.settings, metadata["namespace"], metadata["name"], metadata["uid"])

    def _mount(self, claim: dict[str, Any]) -> None:
        """The claim's tmpfs, and a no-space fault armed for it; once, before the claim is bound."""
        directory, key = self._directory(claim), (claim["metadata"]["namespace"], claim["metadata"]["name"])
        with self._lock:
            if directory in self._mounted:
                return
            directory.mkdir(parents=True, exist_ok=True)
            if not sized_volumes.mount(directory, sized_volumes.requested_bytes(claim, DEFAULT_STORAGE_REQUEST)):
                return
            self._mounted.add(directory)
            log.info("%s/%s: sized claim: a tmpfs of its request at %s", *key, directory)
            leave = self._armed_fills.pop(key, None)
            if leave is not None:
                size = sized_volumes.leave_free(directory, leave)
                log.warning("%s/%s: fault: no space on the claim's volume (%d bytes in all) from its start",
                            *key, size)

    def _unmount(self, claim: dict[str, Any]) -> None:
        directory = self._directory(claim)
        with self._lock:
            if directory in self._mounted:
                self._mounted.discard(directory)
                sized_volumes.unmount(directory)

    def unmount_all(self) -> None:
        """When the kubelet stops: every tmpfs of a sized claim goes (the pods are gone)."""
        with self._lock:
            for directory in sorted(self._mounted):
                try:
                    sized_volumes.unmount(directory)
                except Exception:  # the mount namespace goes with the daemon anyway
                    log.exception("could not unmount %s", directory)
            self._mounted.clear()

    def fill(self, namespace: str, name: str, leave_bytes: int | None) -> str:
        """The no-space fault: the sized claim's volume keeps only `leave_bytes` free, now if the
        claim is bound, else from its binding on (before any pod can use it). None lifts it: the
        volume gets its requested size back, and a fault armed for it is dropped. What was done."""
        try:
            claim: dict[str, Any] | None = self.api.get(
                object_path("", "v1", "persistentvolumeclaims", namespace, name))
        except NotFound:
            claim = None
        with self._lock:
            directory = None if claim is None else self._directory(claim)
            if claim is not None and directory not in self._mounted:
                if not sized_volumes.is_sized(claim):
                    raise VolumeNotSized(f"claim {namespace}/{name} is not of the StorageClass {SIZED_STORAGE_CLASS}: "
                                         "it is a directory on the host's disk, which this fault does not fill")
                if (claim.get("spec") or {}).get("volumeName"):
                    raise VolumeNotSized(f"claim {namespace}/{name} is bound but has no tmpfs (mounting failed: "
                                         "see the daemon log)")
            if directory is None or directory not in self._mounted:
                if leave_bytes is None:
                    self._armed_fills.pop((namespace, name), None)
                    return "disarmed"
                self._armed_fills[(namespace, name)] = leave_bytes
                return "armed: applied when the claim is bound"
            assert claim is not None
            if leave_bytes is None:
                size = sized_volumes.resize(directory, sized_volumes.requested_bytes(claim, DEFAULT_STORAGE_REQUEST))
                return f"lifted: {size} bytes in all"
            size = sized_volumes.leave_free(directory, leave_bytes)
            log.warning("%s/%s: fault: no space on the claim's volume (%d bytes in all)", namespace, name, size)
            return f"filled: {size} bytes in all"

    def _delete_volume(self, name: str) -> None:
        """Release, then delete (the pv-protection controller holds on to a Bound volume)."""
        path = object_path("", "v1", "persistentvolumes", name=name)
        try:
            self.api.patch(path + "/status", {"status": {"phase": "Released"}}, content_type=MERGE_PATCH)
            self.api.delete(path)
            log.info("deleted volume %s of a deleted claim", name)
        except NotFound:
            pass
        except ApiError as e:
            log.warning("could not delete volume %s (%s); retrying on the next relist", name, e)
