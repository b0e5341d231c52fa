"""The EtcdCluster resource (CoreOS etcd.database.coreos.com/v1beta2) as frozen dataclasses, and
its parsing at the edge: what every operator reads from an EtcdCluster.

`parse_etcd_cluster` checks the API shape only (types, ranges the CRD schema also holds, names the
cluster's services and pods are built from). What the etcd operator additionally refuses or warns
about (its version policy, labels it reserves, ...) it checks itself: `etcd_operator.spec`.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from etcd_common.api import constants as c
from etcd_common.api.cert_manager_tls import (
    CertManagerNames,
    CertManagerTLS,
    cert_manager_secret_names,
    parse_cert_manager_tls,
)
from etcd_common.api.fields import FieldReader, JsonDict, SpecError, object_identity
from etcd_common.api.issued_tls import IssuedSecretNames, IssuedTLS, issued_secret_names, parse_issued_tls
from etcd_common.api.maintenance import (
    Alarms,
    Compaction,
    Defragmentation,
    env_quota_bytes,
    env_sets_quota,
    parse_alarms,
    parse_backend_quota,
    parse_compaction,
    parse_defragmentation,
)
from etcd_common.api.restore_source import RestoreSource, parse_restore_source
from etcd_common.api.versions import EtcdVersion


class UnsupportedVersion(SpecError):
    """spec.version is not an etcd version this operator runs."""


@dataclass(frozen=True)
class StaticTLS:
    """CoreOS `spec.TLS.static`: secret names; empty string when not set."""

    member_peer_secret: str = ""
    member_server_secret: str = ""
    operator_secret: str = ""

    @property
    def peer_tls(self) -> bool:
        return bool(self.member_peer_secret)

    @property
    def client_tls(self) -> bool:
        return bool(self.operator_secret)


@dataclass(frozen=True)
class PodPolicy:
    """CoreOS `spec.pod`. Kubernetes sub-objects (affinity, resources, ...) stay as API dicts."""

    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    anti_affinity: bool = False
    affinity: JsonDict | None = None
    resources: JsonDict | None = None
    tolerations: tuple[JsonDict, ...] = ()
    etcd_env: tuple[JsonDict, ...] = ()
    persistent_volume_claim_spec: JsonDict | None = None
    security_context: JsonDict | None = None
    busybox_image: str = ""
    dns_timeout_seconds: int = 0
    # Appended to `<member>.<cluster>.<ns>.svc`: "" or ".cluster.local" (leading dot kept).
    cluster_domain: str = ""

    @property
    def uses_persistent_volumes(self) -> bool:
        return self.persistent_volume_claim_spec is not None


@dataclass(frozen=True)
class ClusterSpec:
    size: int
    version: EtcdVersion
    repository: str = c.DEFAULT_REPOSITORY
    paused: bool = False
    pod: PodPolicy = field(default_factory=PodPolicy)
    tls: StaticTLS = field(default_factory=StaticTLS)
    # Accepted fields that have no effect here; reported in status so nothing is silently ignored.
    warnings: tuple[str, ...] = ()
    # `spec.restore` (addition): the snapshot the seed member is restored from at bootstrap.
    restore: RestoreSource | None = None
    # Day two (additions, etcd_common.api.maintenance): `spec.compaction`, `spec.backendQuota`
    # (bytes; None: etcd's default), `spec.defragmentation`, `spec.alarms`.
    compaction: Compaction = field(default_factory=Compaction)
    backend_quota_bytes: int | None = None
    defragmentation: Defragmentation = field(default_factory=Defragmentation)
    alarms: Alarms = field(default_factory=Alarms)
    # `spec.TLS.issued` (addition, issued_tls.py): the operator issues the certificates; `tls`
    # then names the Secrets it writes (`with_issued_secret_names`).
    issued_tls: IssuedTLS | None = None
    # `spec.TLS.certManager` (addition, cert_manager_tls.py): cert-manager issues the certificates;
    # `tls` then names the Secrets it writes (`with_issued_secret_names`).
    cert_manager_tls: CertManagerTLS | None = None
    # `spec.recovery.quorumLoss` (addition): Report (default) or FromSurvivor (planning/recovery.py).
    quorum_loss: str = c.QUORUM_LOSS_REPORT
    # Not an API field: set by the etcd operator's observation while a running plaintext cluster
    # moves to TLS and some member pod still serves plaintext (step 1 of etcd_operator/
    # tls/transition.py), and while a TLS cluster moves off TLS and some member pod still serves
    # TLS only (step 1 off): new pods bridge (TLS files, peers on http, clients on http and https).
    tls_bridge: bool = False
    # Not an API field: set by the etcd operator's observation while a running TLS cluster moves off
    # TLS (spec.TLS removed) and some member pod still serves TLS only: `tls` then holds the Secrets
    # the members run with, as the last status recorded them (`RecordedStatus.tls_secrets`), and the
    # operator keeps speaking https to every member (bridge pods serve it too).
    tls_off: bool = False

    @property
    def reaches_members_over_https(self) -> bool:
        """The operator dials members with its client certificate: client TLS, but while a move to
        TLS bridges (every member still serves http then); moving off TLS it still does."""
        return self.tls.client_tls and (not self.tls_bridge or self.tls_off)

    @property
    def effective_quota_bytes(self) -> int:
        """The quota etcd runs with: spec.backendQuota, else ETCD_QUOTA_BACKEND_BYTES in
        spec.pod.etcdEnv (CoreOS-era manifests; etcd honours it), else etcd's default (2 GiB)."""
        if self.backend_quota_bytes is not None:
            return self.backend_quota_bytes
        from_env = env_quota_bytes(self.pod.etcd_env)
        return from_env if from_env is not None else c.ETCD_DEFAULT_QUOTA_BACKEND_BYTES

    @property
    def quota_from_env(self) -> bool:
        """The quota is set by ETCD_QUOTA_BACKEND_BYTES in spec.pod.etcdEnv, not spec.backendQuota."""
        return self.backend_quota_bytes is None and env_sets_quota(self.pod.etcd_env)

    @property
    def image(self) -> str:
        return f"{self.repository}:v{self.version}"

    @property
    def uses_persistent_volumes(self) -> bool:
        return self.pod.uses_persistent_volumes


# Is a member pod kept from starting (no node fits, image, volume, crash loop)? Written by the etcd
# operator with the pod's own reason; read by the restore operator to say why a restore waits.
CONDITION_MEMBER_START_BLOCKED = "MemberStartBlocked"


@dataclass(frozen=True)
class Condition:
    """One entry of `status.conditions`, as stored."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""


RECOVERY_SEEDING = "Seeding"
RECOVERY_RECOVERED = "Recovered"
RECOVERY_FAILED = "Failed"
# status.recovery.source: what the seed restores: a snapshot of the survivor, or the newest
# succeeded EtcdBackup of the cluster when that one is ahead of the survivor.
RECOVERY_SOURCE_SURVIVOR = "Survivor"
RECOVERY_SOURCE_BACKUP = "Backup"


@dataclass(frozen=True)
class RecordedRecovery:
    """`status.recovery`: a quorum-loss recovery from the surviving member furthest ahead, as
    the operator recorded it before its first step (every later step is decided from this and
    the pods). `phase` Seeding while in progress, then Recovered or Failed."""

    phase: str
    survivor: str
    seed_member: str
    survivor_revision: int = 0
    survivor_raft_index: int = 0
    lost_members: tuple[str, ...] = ()
    started_at: str = ""
    finished_at: str = ""
    # The value of the one-off annotation this recovery acted on ("" when spec.recovery asked).
    request: str = ""
    reason: str = ""
    # Recovered: the revision the seed served when the old members were retired.
    recovered_revision: int = 0
    source: str = RECOVERY_SOURCE_SURVIVOR
    # source Backup: the EtcdBackup, the revision it recorded, and its object as `spec.restore`
    # would name it (what the seed's init containers fetch; None when unreadable).
    backup: str = ""
    backup_revision: int = 0
    restore: RestoreSource | None = None

    @property
    def in_progress(self) -> bool:
        return self.phase == RECOVERY_SEEDING

    @property
    def from_backup(self) -> bool:
        return self.source == RECOVERY_SOURCE_BACKUP

    @property
    def target_revision(self) -> int:
        """The revision the seed must serve (at least) to count as serving the kept data."""
        return self.backup_revision if self.from_backup else self.survivor_revision


@dataclass(frozen=True)
class RecordedStatus:
    """What the last status write recorded; only facts observation cannot recover live here."""

    phase: str = ""
    # Sticky: once true, "no pods and no members" means data loss, never "bootstrap again".
    bootstrapped: bool = False
    conditions: tuple[Condition, ...] = ()
    recovery: RecordedRecovery | None = None
    # `status.tls.<role>.secret` for peer, server and operator: the Secrets the members ran with,
    # which a move off TLS needs once spec.TLS is gone (etcd_operator/tls/transition.py).
    tls_secrets: Mapping[str, str] = field(default_factory=dict)

    def condition(self, condition_type: str) -> Condition | None:
        for condition in self.conditions:
            if condition.type == condition_type:
                return condition
        return None


@dataclass(frozen=True)
class EtcdCluster:
    """An EtcdCluster as read from the API. `spec` is None when it cannot be run (`spec_error`)."""

    name: str
    namespace: str
    uid: str
    generation: int
    spec: ClusterSpec | None
    spec_error: str | None = None
    # The spec error is about spec.version (an etcd version we do not run).
    unsupported_version: bool = False
    paused: bool = False
    recorded: RecordedStatus = field(default_factory=RecordedStatus)
    # The annotation ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR's value ("" when absent).
    recovery_request: str = ""
    # The annotation ANNOTATION_ROTATE_CA's value ("" when absent): rotate the issued CA.
    ca_rotation_request: str = ""

    def require_spec(self) -> ClusterSpec:
        if self.spec is None:
            raise SpecError(self.spec_error or "spec is invalid")
        return self.spec


# ---------------------------------------------------------------------------------------------
# Parsing (the API shape)

_DNS_1035_LABEL_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_CLUSTER_DOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_ENV_NAME_RE = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


class _ClusterFields(FieldReader):
    """An EtcdCluster's fields, worded as its errors always were (older than the other kinds'): a
    wrong value as itself (`got 1`), a wrong object by its Python type (`got str`); and a flag
    that is null is wrong, not false."""

    @staticmethod
    def type_of(value: Any) -> str:
        return type(value).__name__

    @staticmethod
    def shown(value: Any) -> str:
        return repr(value)

    def boolean(self, key: str) -> bool:
        if key in self.raw and self.raw[key] is None:
            raise self.wrong(key, "true or false", None)
        return super().boolean(key)


def parse_etcd_cluster(obj: JsonDict, *, parse_spec: Callable[[JsonDict], ClusterSpec] | None = None) -> EtcdCluster:
    """Parse a whole EtcdCluster object. Spec problems do not raise: they become `spec_error`,
    so the supervisor can still report them in status. `parse_spec` (default
    `parse_cluster_spec`) lets an operator add its own checks to the shape's."""
    identity = object_identity(obj)
    raw_spec = obj.get("spec")
    paused = isinstance(raw_spec, Mapping) and raw_spec.get("paused") is True
    spec: ClusterSpec | None = None
    spec_error: str | None = None
    unsupported_version = False
    try:
        check_cluster_name(identity.name)
        spec = (parse_spec or parse_cluster_spec)(_ClusterFields(raw_spec, "spec", SpecError).raw)
        spec = with_issued_secret_names(spec, identity.name)
    except SpecError as error:
        spec_error = error.reason
        unsupported_version = isinstance(error, UnsupportedVersion)
    return EtcdCluster(
        name=identity.name,
        namespace=identity.namespace,
        uid=identity.uid,
        generation=identity.generation,
        spec=spec,
        spec_error=spec_error,
        unsupported_version=unsupported_version,
        paused=paused,
        recorded=parse_recorded_status(obj.get("status")),
        recovery_request=_annotation(obj, c.ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR),
        ca_rotation_request=_annotation(obj, c.ANNOTATION_ROTATE_CA),
    )


def _annotation(obj: JsonDict, key: str) -> str:
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    value = annotations.get(key) if isinstance(annotations, Mapping) else None
    return value.strip() if isinstance(value, str) else ""


def parse_cluster_spec(raw: JsonDict) -> ClusterSpec:
    """Parse `spec` (shape only); raises SpecError with a reason a user can act on, and
    UnsupportedVersion when spec.version is not an etcd version at all."""
    spec = _ClusterFields(raw, "spec", SpecError)
    size = spec.raw.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= 7:
        raise SpecError(f"spec.size must be an integer from 1 to 7, got {size!r}")
    version = _parse_version(spec.raw.get("version", c.DEFAULT_VERSION))
    warnings: list[str] = []
    repository = _parse_repository(spec, warnings)
    paused = spec.boolean("paused")
    pod = _parse_pod_policy(spec.section("pod"))
    tls, issued_tls, cert_manager_tls = _parse_tls(spec.section("TLS"))
    restore = parse_restore_source(spec.raw.get("restore"))
    compaction = parse_compaction(spec.section("compaction"), warnings)
    return ClusterSpec(
        size=size,
        version=version,
        repository=repository,
        paused=paused,
        pod=pod,
        tls=tls,
        warnings=tuple(warnings),
        restore=restore,
        compaction=compaction,
        backend_quota_bytes=parse_backend_quota(spec),
        defragmentation=parse_defragmentation(spec.section("defragmentation")),
        alarms=parse_alarms(spec.section("alarms")),
        issued_tls=issued_tls,
        cert_manager_tls=cert_manager_tls,
        quorum_loss=_parse_quorum_loss(spec.section("recovery")),
    )


def _parse_quorum_loss(recovery: FieldReader) -> str:
    policy = recovery.raw.get("quorumLoss")
    if policy is None or policy == "":
        return c.QUORUM_LOSS_REPORT
    if policy not in c.QUORUM_LOSS_POLICIES:
        raise SpecError(f"spec.recovery.quorumLoss must be one of {', '.join(c.QUORUM_LOSS_POLICIES)}, got {policy!r}")
    return str(policy)


def with_issued_secret_names(spec: ClusterSpec, cluster_name: str) -> ClusterSpec:
    """An issued (or cert-manager) cluster's `tls` names the Secrets the operator (cert-manager)
    writes, as spec.TLS.static would: everything that reads the static secrets reads these."""
    if spec.cert_manager_tls is not None:
        names: CertManagerNames | IssuedSecretNames = cert_manager_secret_names(cluster_name)
    elif spec.issued_tls is not None:
        names = issued_secret_names(cluster_name)
    else:
        return spec
    return replace(spec, tls=StaticTLS(member_peer_secret=names.peer, member_server_secret=names.server,
                                       operator_secret=names.operator))


def parse_recorded_status(status: Any) -> RecordedStatus:
    if not isinstance(status, Mapping):
        return RecordedStatus()
    conditions = tuple(
        Condition(
            type=str(raw.get("type") or ""),
            status=str(raw.get("status") or ""),
            reason=str(raw.get("reason") or ""),
            message=str(raw.get("message") or ""),
            last_transition_time=str(raw.get("lastTransitionTime") or ""),
        )
        for raw in status.get("conditions") or ()
        if isinstance(raw, Mapping)
    )
    phase = str(status.get("phase") or "")
    size = status.get("size")
    if "bootstrapped" in status:
        bootstrapped = status["bootstrapped"] is True
    else:
        # A cluster adopted from the CoreOS operator has no `bootstrapped`, but Running or a
        # non-zero size tells the same. (Our own status counts a seed pod in `size` before its
        # member ever ran, so this is only for statuses we did not write.)
        bootstrapped = phase == "Running" or (isinstance(size, int) and size > 0)
    return RecordedStatus(phase=phase, bootstrapped=bootstrapped, conditions=conditions,
                          recovery=_parse_recorded_recovery(status.get("recovery")),
                          tls_secrets=_parse_recorded_tls_secrets(status.get("tls")))


def _parse_recorded_tls_secrets(raw: Any) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        return {}
    found = {role: (raw.get(role) or {}).get("secret") for role in ("peer", "server", "operator")
             if isinstance(raw.get(role), Mapping)}
    return {role: str(secret) for role, secret in found.items() if isinstance(secret, str) and secret}


def _parse_recorded_recovery(raw: Any) -> RecordedRecovery | None:
    if not isinstance(raw, Mapping) or not raw.get("phase") or not raw.get("seedMember"):
        return None

    def number(key: str) -> int:
        value = raw.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    lost = raw.get("lostMembers")
    return RecordedRecovery(
        phase=str(raw.get("phase")),
        survivor=str(raw.get("survivor") or ""),
        seed_member=str(raw.get("seedMember")),
        survivor_revision=number("survivorRevision"),
        survivor_raft_index=number("survivorRaftIndex"),
        lost_members=tuple(str(name) for name in lost) if isinstance(lost, list) else (),
        started_at=str(raw.get("startedAt") or ""),
        finished_at=str(raw.get("finishedAt") or ""),
        request=str(raw.get("request") or ""),
        reason=str(raw.get("reason") or ""),
        recovered_revision=number("recoveredRevision"),
        source=str(raw.get("source") or RECOVERY_SOURCE_SURVIVOR),
        backup=str(raw.get("backup") or ""),
        backup_revision=number("backupRevision"),
        restore=_recorded_restore_source(raw.get("restore")),
    )


def _recorded_restore_source(raw: Any) -> RestoreSource | None:
    try:
        return parse_restore_source(raw) if isinstance(raw, Mapping) else None
    except SpecError:
        return None


def check_cluster_name(name: str) -> None:
    if not _DNS_1035_LABEL_RE.match(name) or len(name) > c.MAX_CLUSTER_NAME_LENGTH:
        raise SpecError(
            f"metadata.name {name!r} cannot be used: it names the services `<name>` and "
            f"`<name>{c.CLIENT_SERVICE_SUFFIX}` and the member pods `<name>-xxxxx`, so it must be "
            f"a DNS label (lowercase letters, digits and '-', starting with a letter) of at most "
            f"{c.MAX_CLUSTER_NAME_LENGTH} characters"
        )


def _parse_version(raw: Any) -> EtcdVersion:
    version = EtcdVersion.parse(raw) if isinstance(raw, str) else None
    if version is None:
        raise UnsupportedVersion(f"spec.version {raw!r} is not an etcd version like \"{c.DEFAULT_VERSION}\"")
    return version


def _parse_repository(spec: FieldReader, warnings: list[str]) -> str:
    repository = spec.string("repository")
    base_image = spec.raw.get("baseImage")
    if isinstance(base_image, str) and base_image and repository in ("", c.DEFAULT_REPOSITORY):
        # CoreOS's deprecated name for the same field; the CRD defaults `repository`, so a
        # manifest that only sets baseImage arrives with the default repository beside it.
        repository = base_image
        warnings.append("spec.baseImage is deprecated; use spec.repository")
    repository = repository or c.DEFAULT_REPOSITORY
    last_segment = repository.rsplit("/", 1)[-1]
    if ":" in last_segment or "@" in last_segment:
        raise SpecError(
            f"spec.repository {repository!r} must not carry a tag or digest; the image tag is "
            f"`v<spec.version>`"
        )
    return repository


def _parse_pod_policy(pod: FieldReader) -> PodPolicy:
    labels = pod.string_map("labels")
    annotations = pod.string_map("annotations")
    anti_affinity = pod.boolean("antiAffinity")
    affinity = pod.mapping("affinity")

    etcd_env = pod.objects("etcdEnv")
    for variable in etcd_env:
        name = variable.get("name")
        if not isinstance(name, str) or not _ENV_NAME_RE.match(name):
            raise SpecError(f"{pod.path('etcdEnv')}: {name!r} is not a valid environment variable name")

    pvc_spec = pod.mapping("persistentVolumeClaimSpec")
    if pvc_spec is not None:
        # Its errors name the path from persistentVolumeClaimSpec on, as they always have.
        pvc = _ClusterFields(pvc_spec, "persistentVolumeClaimSpec", pod.error)
        requests = pvc.section("resources").section("requests")
        if not requests.raw.get("storage"):
            raise SpecError(
                "spec.pod.persistentVolumeClaimSpec.resources.requests.storage is required "
                "(the size of each member's volume, e.g. \"1Gi\")"
            )

    dns_timeout = pod.raw.get("DNSTimeoutInSecond") or 0
    if not isinstance(dns_timeout, int) or isinstance(dns_timeout, bool) or dns_timeout < 0:
        raise SpecError(f"spec.pod.DNSTimeoutInSecond must be a non-negative integer, got {dns_timeout!r}")

    return PodPolicy(
        labels=labels,
        annotations=annotations,
        node_selector=pod.string_map("nodeSelector"),
        anti_affinity=anti_affinity,
        affinity=affinity,
        resources=pod.mapping("resources") or None,
        tolerations=pod.objects("tolerations"),
        etcd_env=etcd_env,
        persistent_volume_claim_spec=pvc_spec,
        security_context=pod.mapping("securityContext"),
        busybox_image=str(pod.raw.get("busyboxImage") or ""),
        dns_timeout_seconds=dns_timeout,
        cluster_domain=_parse_cluster_domain(pod.raw.get("ClusterDomain")),
    )


def _parse_cluster_domain(raw: Any) -> str:
    if raw is None or raw == "":
        return ""
    if not isinstance(raw, str) or not _CLUSTER_DOMAIN_RE.match(raw.strip(".")):
        raise SpecError(f"spec.pod.ClusterDomain {raw!r} is not a DNS domain like \"cluster.local\"")
    return "." + raw.strip(".")


def _parse_tls(tls: FieldReader) -> tuple[StaticTLS, IssuedTLS | None, CertManagerTLS | None]:
    static = tls.section("static")
    member = static.section("member")
    static_tls = StaticTLS(
        member_peer_secret=member.string("peerSecret"),
        member_server_secret=member.string("serverSecret"),
        operator_secret=static.string("operatorSecret"),
    )
    sources = [key for key in ("static", "issued", "certManager") if tls.has(key)]
    if len(sources) > 1:
        raise SpecError(f"spec.TLS.{' and spec.TLS.'.join(sources)} cannot both be set: the certificates come from "
                        "one of your secrets (static), the operator (issued) or cert-manager (certManager)")
    issued = tls.child("issued")
    cert_manager = tls.child("certManager")
    return (static_tls, parse_issued_tls(issued) if issued is not None else None,
            parse_cert_manager_tls(cert_manager) if cert_manager is not None else None)
