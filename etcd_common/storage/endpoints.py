"""Checking a store's endpoint URL (from a spec or a secret) the same way for every backend:
http or https, a host, a port that is a number if any."""
from __future__ import annotations

import urllib.parse

from etcd_common.storage.objects import LocationInvalid, StorageError


def is_http_url(url: str) -> bool:
    """An http:// or https:// URL with a host (and a valid port, if it names one)."""
    try:
        parts = urllib.parse.urlsplit(url)
        return parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port is None or parts.port > 0)
    except ValueError:  # a port that is no number or out of range, a bad IPv6 literal
        return False


def endpoint_url(endpoint: str, *, where: str, backend: str, error: type[StorageError] = LocationInvalid,
                 of: str = "") -> str:
    """`endpoint` (already stripped) as a URL: a bare `host[:port]/path` gets https://, a trailing
    `/` goes. `error` naming `where` when it is not an http(s) URL (`of` ends the message: what
    the URL should reach)."""
    if "://" not in endpoint:
        endpoint = f"https://{endpoint}"
    if not is_http_url(endpoint):
        raise error(f"{where} {endpoint!r} is not an http:// or https:// URL{of}", backend=backend)
    return endpoint.rstrip("/")
