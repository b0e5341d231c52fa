"""How the operator reaches one cluster's etcd: which endpoints, and which client certificate.

With `spec.TLS.static.operatorSecret` the client certificate comes from that secret (CoreOS file
names) and is written to a private directory the etcdctl wrapper reads. The secret is read again
at most every SECRET_REFRESH_SECONDS: every pass makes several etcdctl calls, and reading it for
each would multiply the operator's API requests for TLS clusters.
"""
from __future__ import annotations

import base64
import hashlib
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from etcd_common.api import constants as c
from etcd_common.api.cert_manager_tls import secret_file
from etcd_common.api.etcd_cluster import EtcdCluster
from etcd_common.etcd.etcdctl import ClientTLSUnavailable, Etcdctl
from etcd_common.etcd.maintenance import EtcdMaintenance
from etcd_common.etcd.probe import EtcdProbe
from etcd_common.etcd.types import ClientTLS
from kube_adapter.errors import KubeError, Transient

log = logging.getLogger(__name__)

SecretReader = Callable[[str, str], dict[str, Any]]  # (namespace, name) -> Secret dict
SECRET_REFRESH_SECONDS = c.SECRET_REFRESH_SECONDS  # a rotated operator certificate is picked up within this time


@dataclass(frozen=True)
class _CachedTLS:
    tls: ClientTLS
    read_at: float  # monotonic seconds


class EtcdAccess:
    """Builds `Etcdctl` clients for etcd clusters, with client certificates read from secrets;
    shared by all workers."""

    def __init__(self, read_secret: SecretReader, *, binary: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._read_secret = read_secret
        self._binary = binary
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str, str], _CachedTLS] = {}
        self._tls_root = Path(tempfile.mkdtemp(prefix="etcd-operator-tls-"))
        os.chmod(self._tls_root, 0o700)
        # Key directories per (namespace, owner), oldest first: the current one and the one
        # before (calls started before a rotation may still read it); older ones are removed.
        self._directories: dict[tuple[str, str], list[Path]] = {}

    def forget(self, namespace: str, owner: str) -> None:
        """The object is gone: remove the client keys written for it (and forget the secret)."""
        with self._lock:
            for key in [k for k in self._cache if k[:2] == (namespace, owner)]:
                del self._cache[key]
            directories = self._directories.pop((namespace, owner), [])
        for directory in directories:
            shutil.rmtree(directory, ignore_errors=True)

    def client(self, cluster: EtcdCluster, endpoints: Sequence[str], *,
               command_timeout_seconds: float = 5.0) -> Etcdctl:
        """etcdctl for the cluster; raises `ClientTLSUnavailable` (an `EtcdctlError`, handled
        like an unreachable cluster) when the cluster needs a client certificate we cannot get."""
        spec = cluster.require_spec()
        return self.client_with_secret(
            cluster.namespace, cluster.name, endpoints,
            spec.tls.operator_secret if spec.reaches_members_over_https else None,
            secret_field="spec.TLS.static.operatorSecret", command_timeout_seconds=command_timeout_seconds,
        )

    def probe(self, cluster: EtcdCluster, endpoints: Sequence[str], *, timeout_seconds: float = 2.0) -> EtcdProbe:
        """Read-only questions (member list, status, health) over etcd's HTTP endpoints, with the
        same client certificate as `client`; raises `ClientTLSUnavailable` as `client` does. A
        question etcd's gateway cannot answer for the TLS layout is asked with etcdctl (probe.py)."""
        return EtcdProbe(endpoints, tls=self._cluster_tls(cluster), timeout_seconds=timeout_seconds,
                         etcdctl_binary=self._binary)

    def maintenance(self, cluster: EtcdCluster) -> EtcdMaintenance:
        """Compaction, defragmentation and alarm calls, with the same client certificate as `probe`."""
        return EtcdMaintenance(tls=self._cluster_tls(cluster))

    def _cluster_tls(self, cluster: EtcdCluster) -> ClientTLS | None:
        spec = cluster.require_spec()
        if not spec.reaches_members_over_https:  # bridging to TLS: members are reached on http
            return None
        return self._client_tls(cluster.namespace, cluster.name, spec.tls.operator_secret,
                                "spec.TLS.static.operatorSecret")

    def client_with_secret(self, namespace: str, owner: str, endpoints: Sequence[str], secret_name: str | None, *,
                           secret_field: str = "client TLS secret", command_timeout_seconds: float = 5.0) -> Etcdctl:
        """etcdctl for `endpoints` on behalf of the object `namespace/owner`, with the client
        certificate in secret `secret_name` (CoreOS file names, or cert-manager's keys; None: plain http).
        `secret_field` names where the secret was given, for error messages."""
        tls = self._client_tls(namespace, owner, secret_name, secret_field) if secret_name else None
        return Etcdctl(endpoints, binary=self._binary, tls=tls, command_timeout_seconds=command_timeout_seconds)

    def _client_tls(self, namespace: str, owner: str, secret_name: str, secret_field: str) -> ClientTLS:
        key = (namespace, owner, secret_name)
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and self._clock() - cached.read_at < SECRET_REFRESH_SECONDS:
            return cached.tls
        where = f"secret {namespace}/{secret_name} ({secret_field})"
        try:
            secret = self._read_secret(namespace, secret_name)
        except Transient as e:
            if cached is not None:  # keep the certificate we have through an API hiccup
                log.warning("%s/%s: cannot re-read %s, keeping the one read before: %s",
                            namespace, owner, where, e)
                return cached.tls
            raise ClientTLSUnavailable(f"cannot read {where}: {e}") from e
        except KubeError as e:
            raise ClientTLSUnavailable(f"cannot read {where}: {e}") from e
        tls = self._write_files(namespace, owner, where, secret)
        with self._lock:
            self._cache[key] = _CachedTLS(tls, self._clock())
        return tls

    def _write_files(self, namespace: str, owner: str, where: str, secret: dict[str, Any]) -> ClientTLS:
        data = secret.get("data") or {}
        files = {name: base64.b64decode(secret_file(data, name) or "") for name in
                 (c.OPERATOR_CA_FILE, c.OPERATOR_CERT_FILE, c.OPERATOR_KEY_FILE)}
        missing = [name for name, content in files.items() if not content]
        if missing:
            raise ClientTLSUnavailable(f"{where} lacks {', '.join(missing)}")
        digest = hashlib.sha256(b"".join(files.values())).hexdigest()[:12]
        directory = self._tls_root / f"{namespace}_{owner}_{digest}"
        superseded: list[Path] = []
        with self._lock:
            if not directory.exists():
                staging = Path(tempfile.mkdtemp(dir=self._tls_root))
                for name, content in files.items():
                    (staging / name).write_bytes(content)
                    os.chmod(staging / name, 0o600)
                staging.rename(directory)
            kept = self._directories.setdefault((namespace, owner), [])
            if directory in kept:
                kept.remove(directory)
            kept.append(directory)
            while len(kept) > 2:
                superseded.append(kept.pop(0))
        for old in superseded:
            shutil.rmtree(old, ignore_errors=True)
        return ClientTLS(ca_file=str(directory / c.OPERATOR_CA_FILE),
                         cert_file=str(directory / c.OPERATOR_CERT_FILE),
                         key_file=str(directory / c.OPERATOR_KEY_FILE))
