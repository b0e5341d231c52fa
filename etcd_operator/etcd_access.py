"""How the operator reaches one cluster's etcd: which endpoints, and which client certificate.

With `spec.TLS.static.operatorSecret` the client certificate comes from that secret (CoreOS file
names) and is written to a private directory the etcdctl wrapper reads.
"""
from __future__ import annotations

import base64
import hashlib
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

from etcd_operator import constants as c
from etcd_operator.etcdctl import ClientTLS, Etcdctl
from etcd_operator.spec import EtcdCluster

SecretReader = Callable[[str, str], dict[str, Any]]  # (namespace, name) -> Secret dict


class EtcdAccess:
    """Builds `Etcdctl` clients for clusters; shared by all supervisors."""

    def __init__(self, read_secret: SecretReader, *, binary: str | None = None) -> None:
        self._read_secret = read_secret
        self._binary = binary
        self._lock = threading.Lock()
        self._tls_root = Path(tempfile.mkdtemp(prefix="etcd-operator-tls-"))
        os.chmod(self._tls_root, 0o700)

    def client(self, cluster: EtcdCluster, endpoints: Sequence[str], *,
               command_timeout_seconds: float = 5.0) -> Etcdctl:
        spec = cluster.require_spec()
        tls = self._client_tls(cluster) if spec.tls.client_tls else None
        return Etcdctl(endpoints, binary=self._binary, tls=tls, command_timeout_seconds=command_timeout_seconds)

    def _client_tls(self, cluster: EtcdCluster) -> ClientTLS:
        secret_name = cluster.require_spec().tls.operator_secret
        secret = self._read_secret(cluster.namespace, secret_name)
        data = secret.get("data") or {}
        files = {name: base64.b64decode(data.get(name, "")) for name in
                 (c.OPERATOR_CA_FILE, c.OPERATOR_CERT_FILE, c.OPERATOR_KEY_FILE)}
        missing = [name for name, content in files.items() if not content]
        if missing:
            raise ValueError(f"secret {cluster.namespace}/{secret_name} lacks {', '.join(missing)}")
        digest = hashlib.sha256(b"".join(files.values())).hexdigest()[:12]
        directory = self._tls_root / f"{cluster.namespace}_{cluster.name}_{digest}"
        with self._lock:
            if not directory.exists():
                staging = Path(tempfile.mkdtemp(dir=self._tls_root))
                for name, content in files.items():
                    (staging / name).write_bytes(content)
                    os.chmod(staging / name, 0o600)
                staging.rename(directory)
        return ClientTLS(ca_file=str(directory / c.OPERATOR_CA_FILE),
                         cert_file=str(directory / c.OPERATOR_CERT_FILE),
                         key_file=str(directory / c.OPERATOR_KEY_FILE))
