"""The effects of the actions that touch an EtcdCluster: delete the one being replaced, create the
restored one; and of the staging step: create and remove the staging claim and pod. All
idempotent: a delete of an object already gone (or, for the cluster, replaced by another object
of that name: uid precondition) is fine, a create that finds ours already there is fine."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from etcd_common.api import constants as c
from etcd_common.api.etcd_restore import EtcdRestore
from etcd_common.api.issued_tls import issued_secret_names
from etcd_common.api.restore_source import RestoreSource, restore_source_to_api
from etcd_common.api.storage_locations import S3Location, StorageLocation
from kube_adapter.errors import AlreadyExists, NotFound
from kube_adapter.resources import ResourceClient
from restore_operator.observed import SnapshotFacts


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


def create_cluster(clusters: ResourceClient, body: dict[str, Any]) -> str:
    """Create the cluster; returns its uid ("" when it existed already: the next pass reads it)."""
    try:
        created = clusters.create(str(body["metadata"]["namespace"]), body)
    except AlreadyExists:
        return ""
    return str((created.get("metadata") or {}).get("uid") or "")
