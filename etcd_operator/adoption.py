"""Taking over clusters the CoreOS etcd-operator created: what of theirs must change before we run
them like our own. Everything else of a CoreOS cluster (member names `<cluster>-<10 chars>`, its
pods with `restartPolicy: Never`, their command line, its status) is read as it is.

Its headless peer service asked for unready endpoints with the annotation
`service.alpha.kubernetes.io/tolerate-unready-endpoints`, which Kubernetes' EndpointSlices (and
so cluster DNS) do not read; only `spec.publishNotReadyAddresses` counts. Without it a member has
no DNS name until it is ready, and a joining learner, not ready until promoted, could never be
reached by the leader.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from etcd_operator.manifests import peer_service_name

PEER_SERVICE_PATCH: Final = {"spec": {"publishNotReadyAddresses": True}}


def services_hiding_unready_members(cluster_name: str, services: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """Names of the cluster's services that must publish members before they are ready but do
    not: the peer service, when its spec lacks `publishNotReadyAddresses: true`."""
    hiding = set()
    for service in services:
        metadata = service.get("metadata") or {}
        spec = service.get("spec") or {}
        if metadata.get("name") == peer_service_name(cluster_name) and spec.get("publishNotReadyAddresses") is not True:
            if metadata.get("deletionTimestamp") is None:
                hiding.add(str(metadata["name"]))
    return frozenset(hiding)
