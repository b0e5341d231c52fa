"""Which etcd and object-store (S3, ABS, GCS, OSS) endpoints an EtcdBackup may name (tenant
isolation, no server-side request forgery): pure checks of a URL against what the administrator allowed with the backup operator's
flags. Without flags, `etcdEndpoints` reach only the EtcdBackup's own namespace's services and
pods (`<name>.<namespace>.svc[.<cluster domain>]`) and an object store's `endpoint` may name any host."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from etcd_common.storage.endpoint_allowance import (
    ALLOWED_SCHEMES,
    AWS_HOST_PATTERNS,
    PROVIDER_HOSTS,
    UnusableUrl,
    host_refusal,
    is_ip_literal,
    matches_any,
    url_host,
)
from etcd_common.storage.endpoint_allowance import token_uri_refusal as _token_uri_refusal

__all__ = ["ALLOWED_SCHEMES", "PROVIDER_HOSTS", "UnusableUrl", "is_ip_literal", "matches_any", "url_host"]

CROSS_NAMESPACE_FLAG = "--allow-cross-namespace-endpoints"
ENDPOINT_HOSTS_FLAG = "--allowed-endpoint-hosts"
S3_ENDPOINT_HOSTS_FLAG = "--allowed-s3-endpoint-hosts"
DEFAULT_CLUSTER_DOMAIN = "cluster.local"
# An ExternalName Service naming another ExternalName Service...: followed this many times at most.
MAX_EXTERNAL_NAME_HOPS = 4
# (namespace, name) -> the Service as the API has it, or None when there is none.
ServiceReader = Callable[[str, str], Mapping[str, Any] | None]


@dataclass(frozen=True)
class EndpointPolicy:
    """What the administrator allowed beyond an EtcdBackup's own namespace."""

    # etcdEndpoints may name a service or pod of any namespace (still no IPs or outside names).
    allow_cross_namespace: bool = False
    # Host patterns (`*` wildcards, case-insensitive) etcdEndpoints may name besides those.
    allowed_hosts: tuple[str, ...] = ()
    # Host patterns an S3 endpoint may name besides AWS's own; () = any host.
    allowed_s3_hosts: tuple[str, ...] = ()
    # The DNS domain after `.svc` in full service names (`.svc` alone is accepted too).
    cluster_domain: str = DEFAULT_CLUSTER_DOMAIN


# The defaults: etcdEndpoints in the EtcdBackup's own namespace only, an S3 endpoint anywhere.
DEFAULT_POLICY = EndpointPolicy()


def service_namespace(host: str, cluster_domain: str) -> str | None:
    """The namespace in `<name>.<namespace>.svc` or `<name>.<namespace>.svc.<cluster domain>`
    (the name may have several labels: `<pod>.<service>`), else None."""
    labels = host.split(".")
    for suffix in (["svc"], ["svc", *cluster_domain.lower().strip(".").split(".")]):
        if len(labels) >= len(suffix) + 2 and labels[-len(suffix):] == suffix:
            return labels[-len(suffix) - 1]
    return None


def etcd_endpoint_refusal(url: str, namespace: str, policy: EndpointPolicy) -> str | None:
    """Why an EtcdBackup in `namespace` may not use etcd endpoint `url`, or None when it may."""
    try:
        host = url_host(url)
    except UnusableUrl as error:
        return f"etcd endpoint {url!r} {error}"
    if matches_any(host, policy.allowed_hosts):
        return None
    owner = None if is_ip_literal(host) else service_namespace(host, policy.cluster_domain)
    if owner == namespace or (owner is not None and policy.allow_cross_namespace):
        return None
    if owner is not None:
        where = f"is in namespace {owner}, not the EtcdBackup's namespace {namespace}"
    elif is_ip_literal(host):
        where = "is an IP address"
    else:
        where = f"is not a service or pod of namespace {namespace} (<name>.{namespace}.svc)"
    return (f"etcd endpoint {url!r} {where}; the backup operator's administrator can allow it with "
            f"{CROSS_NAMESPACE_FLAG} or {ENDPOINT_HOSTS_FLAG}")


def s3_endpoint_refusal(url: str, policy: EndpointPolicy, *, where: str) -> str | None:
    """Why an S3 endpoint (`where` names its field) may not be used, or None when it may. A bare
    `host[:port]` means https, as for the SDKs; "" is AWS, always allowed."""
    return storage_endpoint_refusal(url, policy, where=where, provider_hosts=AWS_HOST_PATTERNS, provider="AWS")


def location_endpoint_refusal(storage_type: str, url: str, policy: EndpointPolicy, *, where: str) -> str | None:
    """`storage_endpoint_refusal` for an endpoint of storage type `storage_type` (S3, ABS, GCS, OSS)."""
    provider, hosts = PROVIDER_HOSTS.get(storage_type, (storage_type, ()))
    return storage_endpoint_refusal(url, policy, where=where, provider_hosts=hosts, provider=provider)


def storage_endpoint_refusal(url: str, policy: EndpointPolicy, *, where: str, provider_hosts: tuple[str, ...],
                             provider: str) -> str | None:
    """Why an object-store endpoint (S3, ABS, GCS or OSS; `where` names its field) may not be
    used, or None when it may: the S3 allow list (`--allowed-s3-endpoint-hosts`) applies to every
    object store's endpoint; the provider's own hosts (`provider_hosts`) and "" (the provider's
    default) are always allowed. A bare `host[:port]` means https."""
    return host_refusal(url, policy.allowed_s3_hosts, where=where, provider_hosts=provider_hosts, provider=provider,
                        flag=f"backup operator's {S3_ENDPOINT_HOSTS_FLAG}")


def token_uri_refusal(token_uri: str, policy: EndpointPolicy, *, where: str) -> str | None:
    """Why a gcpSecret's `token_uri` may not be posted to, or None: Google's token hosts, or one
    the S3 allow list (`--allowed-s3-endpoint-hosts`) allows."""
    return _token_uri_refusal(token_uri, policy.allowed_s3_hosts, where=where,
                              flag=f"backup operator's {S3_ENDPOINT_HOSTS_FLAG}")


def service_of(host: str, cluster_domain: str) -> tuple[str, str] | None:
    """(namespace, Service name) behind `<name>.<namespace>.svc[.<domain>]` or
    `<pod>.<service>.<namespace>.svc[.<domain>]`, else None."""
    labels = host.split(".")
    for suffix in (["svc", *cluster_domain.lower().strip(".").split(".")], ["svc"]):
        if len(labels) >= len(suffix) + 2 and labels[-len(suffix):] == suffix:
            namespace_at = len(labels) - len(suffix) - 1
            return labels[namespace_at], labels[namespace_at - 1]
    return None


def resolved_endpoint_refusal(url: str, namespace: str, policy: EndpointPolicy, read_service: ServiceReader,
                              *, hops: int = 0) -> str | None:
    """`etcd_endpoint_refusal` after resolution: a Service the endpoint names that is an
    ExternalName is followed, and its external name must pass the same policy (an ExternalName in
    the EtcdBackup's namespace pointing at another namespace's Service, or outside the cluster,
    is refused unless allowed). Hosts the administrator allowed by name are not resolved."""
    refusal = etcd_endpoint_refusal(url, namespace, policy)
    if refusal is not None:
        return refusal
    host = url_host(url)
    service = None if matches_any(host, policy.allowed_hosts) else service_of(host, policy.cluster_domain)
    if service is None:
        return None
    found = read_service(*service)
    spec = (found or {}).get("spec") or {}
    if spec.get("type") != "ExternalName":
        return None
    target = str(spec.get("externalName") or "").strip().rstrip(".").lower()
    what = f"etcd endpoint {url!r} is ExternalName Service {service[0]}/{service[1]} naming {target or 'nothing'}"
    if not target or hops >= MAX_EXTERNAL_NAME_HOPS:
        return f"{what}; not followed further"
    parts = urlsplit(url)
    resolved = f"{parts.scheme}://{target}{f':{parts.port}' if parts.port else ''}"
    inner = resolved_endpoint_refusal(resolved, namespace, policy, read_service, hops=hops + 1)
    return None if inner is None else f"{what}: {inner}"
