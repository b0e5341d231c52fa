"""Which object-store hosts an operator may send requests to (no server-side request forgery):
pure checks, shared by the backup and restore operators, of an endpoint (S3, ABS, GCS, OSS) and of
a gcpSecret's `token_uri` against the administrator's allow list. An empty allow list allows any
host; each provider's own hosts are always allowed."""
from __future__ import annotations

import ipaddress
import re
from fnmatch import fnmatchcase
from typing import Final
from urllib.parse import urlsplit

from etcd_common.api.storage_locations import STORAGE_TYPE_ABS, STORAGE_TYPE_GCS, STORAGE_TYPE_OSS, STORAGE_TYPE_S3

ALLOWED_SCHEMES: Final = ("http", "https")
# The backup and the restore operator's flag for the allow list.
S3_ENDPOINT_HOSTS_FLAG: Final = "--allowed-s3-endpoint-hosts"
# AWS's own S3 endpoints stay allowed whatever the S3 allow list says.
AWS_HOST_PATTERNS: Final = ("*.amazonaws.com", "*.amazonaws.com.cn")
# And each provider's own endpoints for its storage type (the allow list applies to all four).
PROVIDER_HOSTS: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    STORAGE_TYPE_S3: ("AWS", AWS_HOST_PATTERNS),
    STORAGE_TYPE_ABS: ("Azure", ("*.blob.core.windows.net", "*.blob.core.usgovcloudapi.net",
                                 "*.blob.core.chinacloudapi.cn", "*.blob.core.cloudapi.de")),
    STORAGE_TYPE_GCS: ("Google", ("storage.googleapis.com",)),
    STORAGE_TYPE_OSS: ("Alibaba Cloud", ("*.aliyuncs.com",)),
}
# Where Google's libraries post a service-account key's signed grant (its `token_uri`).
GOOGLE_TOKEN_HOSTS: Final = ("oauth2.googleapis.com", "accounts.google.com", "www.googleapis.com")
_DNS_NAME = re.compile(r"^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$")


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


def matches_any(host: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatchcase(host, pattern.strip().lower().strip("[]").rstrip(".")) for pattern in patterns)


def host_refusal(url: str, allowed_hosts: tuple[str, ...], *, where: str, provider_hosts: tuple[str, ...],
                 provider: str, flag: str) -> str | None:
    """Why the request to `url` (`where` names its field) may not be sent, or None when it may: its
    host is the provider's (`provider_hosts`) or in `allowed_hosts` (the administrator's `flag`), or
    `allowed_hosts` is empty (any host); "" is the provider's default. A bare `host[:port]` means https."""
    url = url.strip()
    if not url:
        return None
    if "://" not in url:
        url = f"https://{url}"
    try:
        host = url_host(url)
    except UnusableUrl as error:
        return f"{where} {url!r} {error}"
    if not allowed_hosts or matches_any(host, allowed_hosts + provider_hosts):
        return None
    return f"{where} {url!r}: host {host} is not in the operator's {flag} ({','.join(allowed_hosts)}) nor one of {provider}'s"


def storage_endpoint_refusal(storage_type: str, url: str, allowed_hosts: tuple[str, ...], *, where: str,
                             flag: str) -> str | None:
    """`host_refusal` for an object-store endpoint of `storage_type` (S3, ABS, GCS, OSS)."""
    provider, hosts = PROVIDER_HOSTS.get(storage_type, (storage_type, ()))
    return host_refusal(url, allowed_hosts, where=where, provider_hosts=hosts, provider=provider, flag=flag)


def token_uri_refusal(token_uri: str, allowed_hosts: tuple[str, ...], *, where: str, flag: str) -> str | None:
    """`host_refusal` for a gcpSecret's service-account `token_uri`: the operator posts a signed
    grant there, so it is checked like an endpoint (Google's token hosts always allowed)."""
    return host_refusal(token_uri, allowed_hosts, where=where, provider_hosts=GOOGLE_TOKEN_HOSTS, provider="Google",
                        flag=flag)


def storage_refusal(storage_type: str, endpoint: str, token_uri: str, allowed_hosts: tuple[str, ...], *,
                    where: str, secret: str, flag: str) -> str | None:
    """Why a store client may not send its first request: its endpoint (`where` names the field it
    came from) or its service-account key's token_uri (in `secret`) outside the allow list; None when it may."""
    return storage_endpoint_refusal(storage_type, endpoint, allowed_hosts, where=where, flag=flag) or \
        token_uri_refusal(token_uri, allowed_hosts, where=f"token_uri of the service-account key in secret {secret}",
                          flag=flag)
