"""Which objects are this EtcdCluster's own, and whose names it cannot take: pure checks on API
dicts. A cluster acts only on objects whose owner reference carries its UID (a pod labelled
like a member but made by someone else, or left by a deleted cluster of the same name, is not
its to delete), and refuses to run when a name it needs belongs to someone else."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from etcd_operator.manifests import client_service_name, service_names

REASON_SERVICE_NAME_TAKEN = "ServiceNameTaken"
REASON_NAME_CONFLICT = "NameConflict"
REASON_DISRUPTION_BUDGET_NAME_TAKEN = "DisruptionBudgetNameTaken"


@dataclass(frozen=True)
class NameProblem:
    """Why the cluster cannot have its names: `reason` is the status reason and event reason."""

    reason: str
    message: str


def owner_uids(obj: Mapping[str, Any]) -> frozenset[str]:
    references = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return frozenset(str(ref.get("uid")) for ref in references if isinstance(ref, Mapping) and ref.get("uid"))


def is_owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    return bool(uid) and uid in owner_uids(obj)


def owned_by(objects: Iterable[Mapping[str, Any]], uid: str) -> list[dict[str, Any]]:
    """The objects owned by `uid` (an EtcdCluster's UID)."""
    return [dict(obj) for obj in objects if is_owned_by(obj, uid)]


def describe_owner(obj: Mapping[str, Any]) -> str:
    """`owned by EtcdCluster x` / `not owned by any object`, for messages."""
    references = [ref for ref in (obj.get("metadata") or {}).get("ownerReferences") or () if isinstance(ref, Mapping)]
    if not references:
        return "not owned by any object"
    return "owned by " + ", ".join(f"{ref.get('kind', '?')} {ref.get('name', '?')} (uid {ref.get('uid', '?')})"
                                   for ref in references)


def service_name_problem(cluster_name: str, foreign: Mapping[str, Mapping[str, Any]]) -> NameProblem | None:
    """`foreign`: services with this cluster's service names that it does not own (name -> object)."""
    if not foreign:
        return None
    parts = [f"Service {name} exists and is {describe_owner(obj)}" for name, obj in sorted(foreign.items())]
    return NameProblem(
        REASON_SERVICE_NAME_TAKEN,
        f"{'; '.join(parts)}; cluster {cluster_name} needs the names {', '.join(service_names(cluster_name))} "
        f"and does not take over objects it does not own: delete or rename that Service, or rename the cluster",
    )


def disruption_budget_name_problem(cluster_name: str, foreign: Mapping[str, Any] | None) -> NameProblem | None:
    """`foreign`: a PodDisruptionBudget with the cluster's budget name that it does not own."""
    if foreign is None:
        return None
    name = (foreign.get("metadata") or {}).get("name")
    return NameProblem(
        REASON_DISRUPTION_BUDGET_NAME_TAKEN,
        f"PodDisruptionBudget {name} exists and is {describe_owner(foreign)}; cluster {cluster_name} "
        f"keeps its own budget under that name and does not take over objects it does not own: "
        f"delete that PodDisruptionBudget, or rename the cluster",
    )


def cluster_name_conflict(cluster: Mapping[str, Any], neighbours: Sequence[Mapping[str, Any]]) -> NameProblem | None:
    """Clusters `x` and `x-client` in one namespace both need the Service `x-client` (the client
    service of one, the peer service of the other). The older one keeps its names; the newer
    one is refused. `neighbours` are the EtcdClusters of the same namespace."""
    name = str((cluster.get("metadata") or {}).get("name") or "")
    mine = set(service_names(name))
    for other in neighbours:
        other_name = str((other.get("metadata") or {}).get("name") or "")
        if other_name == name or not mine & set(service_names(other_name)):
            continue
        if _age_key(other) < _age_key(cluster):
            shared = sorted(mine & set(service_names(other_name)))
            return NameProblem(
                REASON_NAME_CONFLICT,
                f"EtcdCluster {other_name} in this namespace already uses the Service name(s) "
                f"{', '.join(shared)} (a cluster named x uses x and {client_service_name('x')}); "
                f"rename this cluster",
            )
    return None


def _age_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    """Older first: creation time (RFC 3339 sorts as text), then name."""
    metadata = obj.get("metadata") or {}
    return str(metadata.get("creationTimestamp") or ""), str(metadata.get("name") or "")


def is_being_deleted(obj: Mapping[str, Any]) -> bool:
    return (obj.get("metadata") or {}).get("deletionTimestamp") is not None

