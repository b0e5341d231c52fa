"""Taking over clusters the CoreOS etcd-operator created: what of theirs must change before we run
them like our own, and which of them we must not touch at all (members on etcd 3.2/3.3).
Everything else of a CoreOS cluster (member names `<cluster>-<10 chars>`, its
pods with `restartPolicy: Never`, their command line, its status) is read as it is.

Its headless peer service asked for unready endpoints with the annotation
`service.alpha.kubernetes.io/tolerate-unready-endpoints`, which Kubernetes' EndpointSlices (and
so cluster DNS) do not read; only `spec.publishNotReadyAddresses` counts. Without it a member has
no DNS name until it is ready, and a joining learner, not ready until promoted, could never be
reached by the leader.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from etcd_common.api import constants as c
from etcd_common.api.versions import EtcdVersion
from etcd_operator import versions
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


def unsupported_running_version_problem(running: Iterable[EtcdVersion]) -> str | None:
    """Members still on an etcd older than any this operator runs or upgrades from (a CoreOS
    cluster on 3.2 or 3.3): nothing may be changed, whatever spec.version asks for; the way forward is the
    CoreOS operator's own upgrade to 3.4, or a backup restored into a new cluster."""
    oldest_accepted = min(EtcdVersion.of(f"{minor}.0") for minor in c.ACCEPTED_MINOR_VERSIONS)
    unsupported = sorted(v for v in set(running) if versions.support_of(v) == "unsupported" and v < oldest_accepted)
    if not unsupported:
        return None
    oldest = unsupported[0]
    return (
        f"members run etcd {oldest}, which this operator neither runs nor upgrades (it accepts "
        f"{versions.accepted_versions_text()}); changing nothing. Upgrade the cluster to "
        f"{versions.recommended_version('3.4')} with the CoreOS operator first, or back it up and restore "
        f"it into a new EtcdCluster"
    )
