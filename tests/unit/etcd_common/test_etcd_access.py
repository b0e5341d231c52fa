"""EtcdAccess: the operator's client certificate from spec.TLS.static.operatorSecret, how often the
secret is read, and what a missing or incomplete secret turns into."""
from __future__ import annotations

import base64
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import EtcdCluster
from etcd_common.etcd.access import SECRET_REFRESH_SECONDS, EtcdAccess
from etcd_common.etcd.etcdctl import ClientTLSUnavailable, EtcdctlError
from kube_adapter.errors import NotFound, Transient
from tests.unit.etcd_operator.etcd_cluster_builders import NAMESPACE, make_cluster

TLS_SPEC = {"TLS": {"static": {"member": {"peerSecret": "peer", "serverSecret": "server"},
                               "operatorSecret": "operator"}}}


def _secret(ca: bytes = b"CA", cert: bytes = b"CERT", key: bytes = b"KEY") -> dict[str, Any]:
    files = {c.OPERATOR_CA_FILE: ca, c.OPERATOR_CERT_FILE: cert, c.OPERATOR_KEY_FILE: key}
    return {"data": {name: base64.b64encode(content).decode() for name, content in files.items() if content}}


class SecretStore:
    """Answers secret reads from a dict (or raises the queued error) and counts them."""

    def __init__(self, secret: dict[str, Any] | None) -> None:
        self.secret = secret
        self.error: Exception | None = None
        self.reads: list[tuple[str, str]] = []

    def __call__(self, namespace: str, name: str) -> dict[str, Any]:
        self.reads.append((namespace, name))
        if self.error is not None:
            raise self.error
        if self.secret is None:
            raise NotFound(f'secrets "{name}" not found', status=404, reason="NotFound")
        return self.secret


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _tls_cluster() -> EtcdCluster:
    return make_cluster(TLS_SPEC)


def _tls_flags(access: EtcdAccess, cluster: EtcdCluster) -> dict[str, str]:
    command = access.client(cluster, ["https://m:2379"]).command_line(["member", "list"])
    return {flag: command[command.index(flag) + 1] for flag in ("--cacert", "--cert", "--key")}


def test_client_certificate_files_come_from_the_operator_secret() -> None:
    store = SecretStore(_secret())
    access = EtcdAccess(store)
    flags = _tls_flags(access, _tls_cluster())
    assert store.reads == [(NAMESPACE, "operator")]
    assert {Path(path).name: Path(path).read_bytes() for path in flags.values()} == {
        c.OPERATOR_CA_FILE: b"CA", c.OPERATOR_CERT_FILE: b"CERT", c.OPERATOR_KEY_FILE: b"KEY"}
    key_mode = stat.S_IMODE(os.stat(flags["--key"]).st_mode)
    assert key_mode == 0o600


def test_a_cluster_without_client_tls_reads_no_secret() -> None:
    store = SecretStore(_secret())
    command = EtcdAccess(store).client(make_cluster(), ["http://m:2379"]).command_line(["member", "list"])
    assert store.reads == [] and "--cert" not in command


def test_the_secret_is_read_again_only_after_the_refresh_interval() -> None:
    store, clock = SecretStore(_secret()), Clock()
    access = EtcdAccess(store, clock=clock)
    cluster = _tls_cluster()
    first = _tls_flags(access, cluster)
    for _ in range(5):
        assert _tls_flags(access, cluster) == first
    assert len(store.reads) == 1

    store.secret = _secret(cert=b"ROTATED")
    clock.now += SECRET_REFRESH_SECONDS
    rotated = _tls_flags(access, cluster)
    assert len(store.reads) == 2
    assert Path(rotated["--cert"]).read_bytes() == b"ROTATED"
    assert Path(first["--cert"]).read_bytes() == b"CERT", "files in use were overwritten"


@pytest.mark.parametrize("secret, expected", [
    pytest.param(None, "not found", id="missing-secret"),
    pytest.param(_secret(key=b""), c.OPERATOR_KEY_FILE, id="missing-key"),
    pytest.param({}, c.OPERATOR_CA_FILE, id="empty-secret"),
])
def test_an_unusable_secret_is_an_etcdctl_error_naming_the_secret(secret: dict[str, Any] | None,
                                                                  expected: str) -> None:
    with pytest.raises(ClientTLSUnavailable) as raised:
        EtcdAccess(SecretStore(secret)).client(_tls_cluster(), ["https://m:2379"])
    # An EtcdctlError: observation treats the cluster as unreachable instead of crashing the pass.
    assert isinstance(raised.value, EtcdctlError)
    assert f"{NAMESPACE}/operator" in str(raised.value) and expected in str(raised.value)


def test_a_transient_api_failure_keeps_the_certificate_already_read() -> None:
    store, clock = SecretStore(_secret()), Clock()
    access = EtcdAccess(store, clock=clock)
    cluster = _tls_cluster()
    before = _tls_flags(access, cluster)
    store.error = Transient("apiserver unavailable", status=503)
    clock.now += SECRET_REFRESH_SECONDS
    assert _tls_flags(access, cluster) == before

    with pytest.raises(ClientTLSUnavailable):
        EtcdAccess(store).client(cluster, ["https://m:2379"])


def test_any_object_may_name_the_secret_and_where_it_came_from() -> None:
    """What the backup and restore operators use: a secret named by their own resources."""
    store = SecretStore(None)
    access = EtcdAccess(store)
    with pytest.raises(ClientTLSUnavailable, match=r"secret team-a/backup-tls \(spec.clientTLSSecret\)"):
        access.client_with_secret("team-a", "nightly", ["https://m:2379"], "backup-tls", secret_field="spec.clientTLSSecret")
    assert store.reads == [("team-a", "backup-tls")]
    plain = access.client_with_secret("team-a", "nightly", ["http://m:2379"], None).command_line(["member", "list"])
    assert "--cacert" not in plain and store.reads == [("team-a", "backup-tls")]
