"""Pod and Service DNS names, served through the sandbox hosts file (and the same records by the
cluster DNS server in dns_server.py, for programs that cache the hosts file).

The hosts file is bind-mounted over /etc/hosts in the sandbox's mount namespace, so it must be
rewritten in place (same inode): replacing it would leave the mount pointing at the old file.
Lines above `MARKER` are kept as they are; everything below it is generated.
Services resolve straight to pod IPs (no virtual IPs, no kube-proxy), so a client must use the
target port; `<hostname>.<subdomain>` names exist for every live pod, with or without a Service.
"""
from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MARKER = "# --- kube-sandbox process kubelet: everything below is generated, rewritten in place ---"
LOCALHOST_LINES = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
TOLERATE_UNREADY_ANNOTATION = "service.alpha.kubernetes.io/tolerate-unready-endpoints"
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class PodRecord:
    namespace: str
    name: str
    ip: str
    hostname: str
    subdomain: str
    labels: tuple[tuple[str, str], ...]
    ready: bool
    terminating: bool


@dataclass(frozen=True)
class ServiceRecord:
    namespace: str
    name: str
    selector: tuple[tuple[str, str], ...]
    headless: bool
    publish_not_ready: bool


def pod_record(pod: dict[str, Any]) -> PodRecord | None:
    """The DNS view of a pod, or None when it has no live address."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    ip = status.get("podIP")
    if not ip or status.get("phase") in TERMINAL_PHASES or spec.get("hostNetwork"):
        return None
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return PodRecord(
        namespace=metadata.get("namespace", ""), name=metadata.get("name", ""), ip=ip,
        hostname=spec.get("hostname") or metadata.get("name", ""), subdomain=spec.get("subdomain") or "",
        labels=tuple(sorted((metadata.get("labels") or {}).items())), ready=ready,
        terminating=bool(metadata.get("deletionTimestamp")),
    )


def service_record(service: dict[str, Any]) -> ServiceRecord | None:
    metadata = service.get("metadata") or {}
    spec = service.get("spec") or {}
    if spec.get("type") == "ExternalName" or not spec.get("selector"):
        return None
    annotations = metadata.get("annotations") or {}
    return ServiceRecord(
        namespace=metadata.get("namespace", ""), name=metadata.get("name", ""),
        selector=tuple(sorted(spec["selector"].items())), headless=spec.get("clusterIP") == "None",
        publish_not_ready=bool(spec.get("publishNotReadyAddresses"))
        or annotations.get(TOLERATE_UNREADY_ANNOTATION) == "true",
    )


def _matches(selector: Iterable[tuple[str, str]], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector)


def service_addresses(service: ServiceRecord, pods: Iterable[PodRecord]) -> list[str]:
    """Headless and publishNotReadyAddresses services list every live matching pod, others only
    Ready ones; terminating pods only when not-ready addresses are published."""
    include_unready = service.headless or service.publish_not_ready
    found = set()
    for pod in pods:
        if pod.namespace != service.namespace or not _matches(service.selector, dict(pod.labels)):
            continue
        if pod.terminating and not service.publish_not_ready:
            continue
        if pod.ready or include_unready:
            found.add(pod.ip)
    return sorted(found, key=_ip_key)


def render_generated(pods: Iterable[PodRecord], services: Iterable[ServiceRecord], cluster_domain: str) -> str:
    pods = list(pods)
    names: dict[str, list[str]] = {}

    def add(ip: str, *fqdns: str) -> None:
        for fqdn in fqdns:
            entry = names.setdefault(ip, [])
            if fqdn not in entry:
                entry.append(fqdn)

    for pod in sorted(pods, key=lambda p: (p.namespace, p.name)):
        if pod.subdomain:
            base = f"{pod.hostname}.{pod.subdomain}.{pod.namespace}.svc"
            add(pod.ip, base, f"{base}.{cluster_domain}")
        dashed = f"{pod.ip.replace('.', '-')}.{pod.namespace}.pod"
        add(pod.ip, dashed, f"{dashed}.{cluster_domain}")
    for service in sorted(services, key=lambda s: (s.namespace, s.name)):
        base = f"{service.name}.{service.namespace}.svc"
        for ip in service_addresses(service, pods):
            add(ip, base, f"{base}.{cluster_domain}")
    lines = [f"{ip}\t{' '.join(fqdns)}" for ip, fqdns in sorted(names.items(), key=lambda i: _ip_key(i[0]))]
    return "".join(line + "\n" for line in lines)


def split_static(content: str) -> str:
    """The hand-kept part above MARKER, with localhost lines guaranteed."""
    static = content.split(MARKER, 1)[0] if MARKER in content else content
    if not static.strip():
        return LOCALHOST_LINES
    if "localhost" not in static:
        static = LOCALHOST_LINES + static
    return static if static.endswith("\n") else static + "\n"


def render_hosts(current: str, pods: Iterable[PodRecord], services: Iterable[ServiceRecord],
                 cluster_domain: str) -> str:
    return f"{split_static(current)}{MARKER}\n{render_generated(pods, services, cluster_domain)}"


def write_in_place(path: Path, content: str) -> bool:
    """Rewrite `path` without replacing its inode; returns False when it already had `content`."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    with os.fdopen(fd, "r+", encoding="utf-8") as f:
        if f.read() == content:
            return False
        f.seek(0)
        f.write(content)
        f.truncate()
        f.flush()
    return True


def parse_hosts(content: str) -> dict[str, list[str]]:
    """Lowercase name -> its IPv4 addresses, in file order."""
    names: dict[str, list[str]] = {}
    for line in content.splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) < 2 or ":" in words[0]:
            continue
        for name in words[1:]:
            addresses = names.setdefault(name.lower(), [])
            if words[0] not in addresses:
                addresses.append(words[0])
    return names


class HostsFile:
    """The sandbox hosts file, regenerated from pods and services; `lookup` answers from the
    records last written (what the cluster DNS server serves)."""

    def __init__(self, path: Path, cluster_domain: str) -> None:
        self.path = path
        self.cluster_domain = cluster_domain
        self._lock = threading.Lock()
        self._names: dict[str, list[str]] = {}

    def update(self, pods: Iterable[dict[str, Any]], services: Iterable[dict[str, Any]]) -> bool:
        pod_records = [r for r in (pod_record(p) for p in pods) if r is not None]
        service_records = [r for r in (service_record(s) for s in services) if r is not None]
        with self._lock:
            try:
                current = self.path.read_text(encoding="utf-8")
            except FileNotFoundError:
                current = ""
            content = render_hosts(current, pod_records, service_records, self.cluster_domain)
            changed = write_in_place(self.path, content)
            self._names = parse_hosts(content)
        if changed:
            log.debug("hosts file %s rewritten (%d pods, %d services)", self.path, len(pod_records),
                      len(service_records))
        return changed

    def lookup(self, name: str) -> list[str]:
        return list(self._names.get(name.lower().rstrip("."), ()))


def _ip_key(ip: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in ip.split("."))
    except ValueError:
        return (999,)
