"""The sandbox's storage: every PersistentVolumeClaim is bound at once to a new hostPath
PersistentVolume over its own directory `pvc/<namespace>/<claim>-<claim uid>`.

The real kube-scheduler schedules a pod only once its claims are bound, so something must bind them;
here that is this loop, doing what an external provisioner plus the PV binder would (create the PV
pre-bound to the claim, then mark both Bound). Every node shares the host's filesystem, so the
volumes carry no node affinity: a claim follows its pod to any node, like network storage. When a
claim is deleted its PV object goes too; the directory stays (as before: data is never removed).
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from kube_sandbox.kubelet.kube_api import MERGE_PATCH, ApiError, KubeApi, NotFound, object_path
from kube_sandbox.kubelet.settings import KubeletSettings
from kube_sandbox.kubelet.watching import list_and_watch

log = logging.getLogger(__name__)

PROVISIONER = "kube-sandbox"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
DEFAULT_STORAGE_REQUEST = "1Gi"


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

    def run(self) -> None:
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
            self._delete_volume(volume_name(claim))
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
