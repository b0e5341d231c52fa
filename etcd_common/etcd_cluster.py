"""The EtcdCluster resource (CoreOS etcd.database.coreos.com/v1beta2) as frozen dataclasses:
what every operator reads from an EtcdCluster once it has been parsed at the edge
(`etcd_operator.spec.parse_etcd_cluster` parses and checks it)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from etcd_common import constants as c
from etcd_common.etcd_version import EtcdVersion

JsonDict = Mapping[str, Any]


class SpecError(ValueError):
    """The spec cannot be run; `reason` says what to change."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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

    @property
    def image(self) -> str:
        return f"{self.repository}:v{self.version}"

    @property
    def uses_persistent_volumes(self) -> bool:
        return self.pod.uses_persistent_volumes


@dataclass(frozen=True)
class Condition:
    """One entry of `status.conditions`, as stored."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""


@dataclass(frozen=True)
class RecordedStatus:
    """What the last status write recorded; only facts observation cannot recover live here."""

    phase: str = ""
    # Sticky: once true, "no pods and no members" means data loss, never "bootstrap again".
    bootstrapped: bool = False
    conditions: tuple[Condition, ...] = ()

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

    def require_spec(self) -> ClusterSpec:
        if self.spec is None:
            raise SpecError(self.spec_error or "spec is invalid")
        return self.spec
