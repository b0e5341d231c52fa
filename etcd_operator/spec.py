"""The EtcdCluster as the etcd operator reads it: the shared parse of the API shape
(`etcd_common.api.etcd_cluster`), then the checks that are this operator's own.

The CRD schema already refuses wrong types and ranges; `check_cluster_spec` catches what a schema
cannot (unsupported etcd versions, labels and annotations the operator reserves, conflicting pod
policy, TLS halves, environment variables that shadow the flags it sets) and says why in a
`SpecError` that ends up in the cluster's status and a Warning event.
"""
from __future__ import annotations

import dataclasses

from etcd_common.api import constants as c
from etcd_common.api import etcd_cluster as shared
from etcd_common.api.etcd_cluster import ClusterSpec, EtcdCluster, PodPolicy, UnsupportedVersion
from etcd_common.api.fields import JsonDict, SpecError
from etcd_common.api.images import TRUSTED_REPOSITORIES_FLAG, repository_trusted, untrusted_image_problem
from etcd_common.api.maintenance import (
    QUOTA_ENV_VARIABLE,
    Compaction,
    env_quota_bytes,
    format_bytes,
    parse_quantity_bytes,
)
from etcd_operator.manifests import COMPACTION_ENV, QUOTA_ENV, etcd_env_sets
from etcd_operator.versions import (
    accepted_versions_text,
    support_of,
    unsupported_version_problem,
    upgrade_source_warning,
)

# etcd environment variables that would override what the operator manages, besides the
# ETCD_<FLAG> of each flag it sets: a config file replaces every flag, force-new-cluster and
# discovery rewrite membership, strict-reconfig-check off lets unsafe member changes through,
# auto-TLS replaces the cluster's certificates.
DENIED_ETCD_ENV = frozenset({
    "ETCD_CONFIG_FILE",
    "ETCD_FORCE_NEW_CLUSTER",
    "ETCD_STRICT_RECONFIG_CHECK",
    "ETCD_DISCOVERY",
    "ETCD_DISCOVERY_SRV",
    "ETCD_DISCOVERY_SRV_NAME",
    "ETCD_DISCOVERY_PROXY",
    "ETCD_DISCOVERY_FALLBACK",
    "ETCD_DISCOVERY_TOKEN",
    "ETCD_DISCOVERY_ENDPOINTS",
    "ETCD_AUTO_TLS",
    "ETCD_PEER_AUTO_TLS",
})


# What a member's volume must hold beyond twice the backend quota (defragmentation writes a
# second copy of the database beside the first): WAL segments and snapshots.
QUOTA_VOLUME_HEADROOM_BYTES = 256 * c.MIB
_STORAGE_FIELD = "spec.pod.persistentVolumeClaimSpec.resources.requests.storage"


def check_trusted_repository(cluster: EtcdCluster, trusted: tuple[str, ...]) -> EtcdCluster:
    """The cluster, or a copy whose spec is refused because spec.repository, or the
    spec.restore.fetchImage of a cluster not bootstrapped yet, is not from one of `trusted` (an
    entry ending in "/" trusts every repository under it): the operator starts pods for whoever
    can write an EtcdCluster, and must not run just any image for them. A bootstrapped cluster's
    fetchImage is never run again, so it is not held against the cluster."""
    spec = cluster.spec
    if spec is None:
        return cluster
    problem = None
    if not repository_trusted(spec.repository, trusted):
        problem = (f"spec.repository {spec.repository} is not a repository this operator trusts "
                   f"(trusted: {', '.join(trusted) or 'none'}; an administrator sets them with "
                   f"{TRUSTED_REPOSITORIES_FLAG})")
    elif spec.restore is not None and not cluster.recorded.bootstrapped:
        problem = untrusted_image_problem("spec.restore.fetchImage", spec.restore.fetch_image, trusted)
    if problem is None:
        return cluster
    return dataclasses.replace(cluster, spec=None, spec_error=problem)


def parse_etcd_cluster(obj: JsonDict) -> EtcdCluster:
    """Parse a whole EtcdCluster object and check its spec. Spec problems do not raise: they
    become `spec_error`, so the supervisor can still report them in status."""
    return shared.parse_etcd_cluster(obj, parse_spec=parse_cluster_spec)


def parse_cluster_spec(spec: JsonDict) -> ClusterSpec:
    """Parse and check `spec`; raises SpecError with a reason a user can act on."""
    try:
        parsed = shared.parse_cluster_spec(spec)
    except UnsupportedVersion as error:
        raise UnsupportedVersion(f"{error.reason} (supported: {accepted_versions_text()})") from error
    return check_cluster_spec(parsed)


def check_cluster_spec(spec: ClusterSpec) -> ClusterSpec:
    """What this operator refuses in a well-formed spec; returns it with this operator's
    warnings added (version warnings first, then the shape's, then the pod's)."""
    problem = unsupported_version_problem(spec.version)
    if problem:
        raise UnsupportedVersion(problem)
    warnings: list[str] = []
    if support_of(spec.version) == "upgrade-source":
        warnings.append(upgrade_source_warning(spec.version))
    warnings.extend(spec.warnings)
    warnings.extend(_check_pod_policy(spec.pod))
    _check_tls(spec)
    warnings.extend(_check_maintenance_env(spec))
    warnings.extend(_check_backend_quota(spec))
    return dataclasses.replace(spec, warnings=tuple(warnings))


def _check_pod_policy(pod: PodPolicy) -> list[str]:
    """Raises SpecError for a pod policy the operator cannot honour; returns the warnings."""
    reserved = sorted(set(pod.labels) & c.RESERVED_LABEL_KEYS)
    if reserved:
        raise SpecError(
            f"spec.pod.labels may not set {', '.join(reserved)}: the operator uses "
            f"{', '.join(sorted(c.RESERVED_LABEL_KEYS))} to find its pods and route clients to them"
        )
    reserved = sorted(set(pod.annotations) & c.RESERVED_ANNOTATION_KEYS)
    if reserved:
        raise SpecError(f"spec.pod.annotations may not set {', '.join(reserved)}: the operator writes them")
    if pod.anti_affinity and pod.affinity is not None and pod.affinity.get("podAntiAffinity"):
        raise SpecError(
            "spec.pod.antiAffinity and spec.pod.affinity.podAntiAffinity are both set; "
            "antiAffinity is CoreOS's deprecated shortcut, keep only affinity"
        )
    managed = {"ETCD_" + flag.upper().replace("-", "_") for flag in c.OPERATOR_MANAGED_ETCD_FLAGS}
    managed.add(c.POD_IP_ENV)
    managed |= DENIED_ETCD_ENV
    for variable in pod.etcd_env:
        name = variable.get("name")
        if name in managed:
            raise SpecError(
                f"spec.pod.etcdEnv may not set {name}: the operator sets it for every member "
                f"(etcd refuses to start when a variable shadows a command-line flag)"
            )
    warnings: list[str] = []
    if pod.busybox_image:
        warnings.append(
            "spec.pod.busyboxImage is ignored: no DNS-wait init container is used; "
            "a member that starts before its DNS name resolves restarts in place"
        )
    if pod.dns_timeout_seconds:
        warnings.append("spec.pod.DNSTimeoutInSecond is ignored: no DNS-wait init container is used")
    return warnings


def _check_tls(spec: ClusterSpec) -> None:
    if bool(spec.tls.member_server_secret) != bool(spec.tls.operator_secret):
        raise SpecError(
            "spec.TLS.static.member.serverSecret and spec.TLS.static.operatorSecret go together: "
            "members serve client TLS with the first and the operator connects with the second"
        )


def _check_maintenance_env(spec: ClusterSpec) -> list[str]:
    """CoreOS-era manifests set compaction and the quota with etcdEnv: still honoured (the
    operator then leaves its flags out, see `manifests.maintenance_flags`), with a warning;
    refused beside the spec field that says the same."""
    warnings: list[str] = []
    for names, field, is_set in (
        (COMPACTION_ENV, "spec.compaction", spec.compaction != Compaction()),
        (QUOTA_ENV, "spec.backendQuota", spec.backend_quota_bytes is not None),
    ):
        used = [name for name in names if etcd_env_sets(spec.pod, name)]
        if not used:
            continue
        if is_set:
            raise SpecError(
                f"spec.pod.etcdEnv sets {', '.join(used)} and {field} is set too: keep only {field}"
            )
        warnings.append(f"spec.pod.etcdEnv sets {', '.join(used)}: honoured, but {field} is the field for it")
    return warnings


def volume_needed_bytes(quota_bytes: int) -> int:
    """The smallest member volume a backend quota fits: 2 x quota + the headroom."""
    return 2 * quota_bytes + QUOTA_VOLUME_HEADROOM_BYTES


def _check_backend_quota(spec: ClusterSpec) -> list[str]:
    """Raises SpecError for a spec.backendQuota the member volumes cannot hold; warns about one
    above etcd's suggested maximum, and about a volume too small for etcd's default quota (not
    refused: CoreOS manifests must keep working). No check on emptyDir, nor when the quota is
    left to an etcdEnv variable (`_check_env_quota` warns about that one)."""
    if etcd_env_sets(spec.pod, *QUOTA_ENV):
        return _check_env_quota(spec)
    warnings: list[str] = []
    quota = spec.backend_quota_bytes
    if quota is not None and quota > c.SUGGESTED_MAX_QUOTA_BACKEND_BYTES:
        warnings.append(
            f"spec.backendQuota {format_bytes(quota)} is above "
            f"{format_bytes(c.SUGGESTED_MAX_QUOTA_BACKEND_BYTES)}, etcd's suggested maximum: a bigger database "
            f"makes defragmentation, snapshots and member restarts slow"
        )
    storage = _volume_storage(spec)
    if storage is None:
        return warnings
    written, volume = storage
    needed = volume_needed_bytes(spec.effective_quota_bytes)
    if volume >= needed:
        return warnings
    rule = (
        f"a member's volume must hold 2 x the quota + {format_bytes(QUOTA_VOLUME_HEADROOM_BYTES)} = "
        f"{format_bytes(needed)} (defragmentation writes a second copy of the database; the WAL and "
        f"snapshots need room)"
    )
    fits = (volume - QUOTA_VOLUME_HEADROOM_BYTES) // 2 // c.MIB * c.MIB
    if quota is None:
        advice = f"set spec.backendQuota to at most {format_bytes(fits)}" if fits > 0 else "request more storage"
        warnings.append(
            f"{_STORAGE_FIELD} {written} is too small for etcd's default quota of "
            f"{format_bytes(c.ETCD_DEFAULT_QUOTA_BACKEND_BYTES)}: {rule}; {advice}"
        )
        return warnings
    advice = f"lower spec.backendQuota to at most {format_bytes(fits)} or " if fits > 0 else ""
    raise SpecError(
        f"spec.backendQuota {format_bytes(quota)} does not fit {_STORAGE_FIELD} {written}: {rule}; "
        f"{advice}request at least {format_bytes(needed)} of storage"
    )


def _check_env_quota(spec: ClusterSpec) -> list[str]:
    """ETCD_QUOTA_BACKEND_BYTES in etcdEnv: honoured by etcd, and the operator's decisions use it
    (`ClusterSpec.effective_quota_bytes`); a warning when the operator cannot read it (it then
    decides with etcd's default) or when the member volume cannot hold it."""
    if env_quota_bytes(spec.pod.etcd_env) is None:
        return [f"spec.pod.etcdEnv sets {QUOTA_ENV_VARIABLE} to something this operator does not read as a "
                f"number of bytes (valueFrom, a negative or an unreadable value): NOSPACE and defragmentation "
                f"are decided with etcd's default quota of {format_bytes(c.ETCD_DEFAULT_QUOTA_BACKEND_BYTES)}; "
                f"set spec.backendQuota instead"]
    storage = _volume_storage(spec)
    needed = volume_needed_bytes(spec.effective_quota_bytes)
    if storage is None or storage[1] >= needed:
        return []
    return [f"{_STORAGE_FIELD} {storage[0]} is too small for the quota {QUOTA_ENV_VARIABLE} sets "
            f"({format_bytes(spec.effective_quota_bytes)}): a member's volume must hold 2 x the quota + "
            f"{format_bytes(QUOTA_VOLUME_HEADROOM_BYTES)} = {format_bytes(needed)}"]


def _volume_storage(spec: ClusterSpec) -> tuple[str, int] | None:
    """The member volume's size as written and in bytes; None on emptyDir (or a size this parser
    does not read: the API server judges the claim)."""
    claim = spec.pod.persistent_volume_claim_spec
    if claim is None:
        return None
    storage = ((claim.get("resources") or {}).get("requests") or {}).get("storage")
    volume = parse_quantity_bytes(storage)
    return None if volume is None else (str(storage), volume)
