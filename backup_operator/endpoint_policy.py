"""Which etcd and object-store (S3, ABS, GCS, OSS) endpoints an EtcdBackup may name (tenant
isolation, no server-side request forgery): pure checks of a URL against what the administrator allowed with the backup operator's
flags. Without flags, `etcdEndpoints` reach only the EtcdBackup's own namespace's services and
pods (`<name>.<namespace>.svc[.<cluster domain>]`) and an object store's `endpoint` may name any host."""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from urllib.parse import urlsplit

from etcd_common.api.storage_locations import STORAGE_TYPE_ABS, STORAGE_TYPE_GCS, STORAGE_TYPE_OSS, STORAGE_TYPE_S3

CROSS_NAMESPACE_FLAG = "--allow-cross-namespace-endpoints"
ENDPOINT_HOSTS_FLAG = "--allowed-endpoint-hosts"
S3_ENDPOINT_HOSTS_FLAG = "--allowed-s3-endpoint-hosts"
ALLOWED_SCHEMES = ("http", "https")
DEFAULT_CLUSTER_DOMAIN = "cluster.local"
# AWS's own S3 endpoints stay allowed whatever the S3 allow list says.
AWS_HOST_PATTERNS = ("*.amazonaws.com", "*.amazonaws.com.cn")
# And each provider's own endpoints for its storage type (the allow list applies to all four).
PROVIDER_HOSTS: dict[str, tuple[str, tuple[str, ...]]] = {
    STORAGE_TYPE_S3: ("AWS", AWS_HOST_PATTERNS),
    STORAGE_TYPE_ABS: ("Azure", ("*.blob.core.windows.net", "*.blob.core.usgovcloudapi.net",
                                 "*.blob.core.chinacloudapi.cn", "*.blob.core.cloudapi.de")),
    STORAGE_TYPE_GCS: ("Google", ("storage.googleapis.com",)),
    STORAGE_TYPE_OSS: ("Alibaba Cloud", ("*.aliyuncs.com",)),
}
_DNS_NAME = re.compile(r"^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$")


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


class UnusableUrl(ValueError):
    """A URL that is not a plain http(s) URL with a host; the message says why."""


def url_host(url: str) -> str:
    """The host of an http(s) URL, lower-case, without a trailing dot or IPv6 brackets; raises
    UnusableUrl for another scheme, user information, a missing or malformed host or port."""
    if any(ch.isspace() or ord(ch) < 0x20 or ch == "\\" for ch in url):
        raise UnusableUrl("contains whitespace, control characters or a backslash")
    parts = urlsplit(url)
    if parts.scheme.lower() not in ALLOWED_SCHEMES:
        raise UnusableUrl("must be an http:// or https:// URL")
    if "@" in parts.netloc:
        raise UnusableUrl("must not carry user information (user@host)")
    try:
        _ = parts.port  # parsing the port raises for a malformed one
    except ValueError as error:
        raise UnusableUrl(f"has a malformed port ({error})") from error
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise UnusableUrl("has no host")
    if not is_ip_literal(host) and not _DNS_NAME.match(host):
        raise UnusableUrl(f"host {host!r} is neither a DNS name nor an IP address")
    return host


def is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def service_namespace(host: str, cluster_domain: str) -> str | None:
    """The namespace in `<name>.<namespace>.svc` or `<name>.<namespace>.svc.<cluster domain>`
    (the name may have several labels: `<pod>.<service>`), else None."""
    labels = host.split(".")
    for suffix in (["svc"], ["svc", *cluster_domain.lower().strip(".").split(".")]):
        if len(labels) >= len(suffix) + 2 and labels[-len(suffix):] == suffix:
            return labels[-len(suffix) - 1]
    return None


def matches_any(host: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatchcase(host, pattern.strip().lower().strip("[]").rstrip(".")) for pattern in patterns)


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
    url = url.strip()
    if not url:
        return None
    if "://" not in url:
        url = f"https://{url}"
    try:
        host = url_host(url)
    except UnusableUrl as error:
        return f"{where} {url!r} {error}"
    if not policy.allowed_s3_hosts or matches_any(host, policy.allowed_s3_hosts + provider_hosts):
        return None
    return (f"{where} {url!r}: host {host} is not in the backup operator's {S3_ENDPOINT_HOSTS_FLAG} "
            f"({','.join(policy.allowed_s3_hosts)}) nor one of {provider}'s")
