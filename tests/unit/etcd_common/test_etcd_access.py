"""EtcdAccess: the operator's client certificate from spec.TLS.static.operatorSecret, how often the
secret is read, and what a missing or incomplete secret turns into."""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from etcd_common.api import constants as c
from etcd_common.etcd.access import SECRET_REFRESH_SECONDS, EtcdAccess
from etcd_common.etcd.etcdctl import ClientTLSUnavailable, EtcdctlError
from kube_adapter.errors import Transient
from tests.unit.etcd_common.operator_secret_fakes import Clock, SecretStore, operator_secret, tls_cluster, tls_flags
from tests.unit.etcd_operator.etcd_cluster_builders import NAMESPACE, make_cluster


def test_client_certificate_files_come_from_the_operator_secret() -> None:
    store = SecretStore(operator_secret())
    access = EtcdAccess(store)
    flags = tls_flags(access, tls_cluster())
    assert store.reads == [(NAMESPACE, "operator")]
    assert {Path(path).name: Path(path).read_bytes() for path in flags.values()} == {
        c.OPERATOR_CA_FILE: b"CA", c.OPERATOR_CERT_FILE: b"CERT", c.OPERATOR_KEY_FILE: b"KEY"}
    key_mode = stat.S_IMODE(os.stat(flags["--key"]).st_mode)
    assert key_mode == 0o600


def test_a_cluster_without_client_tls_reads_no_secret() -> None:
    store = SecretStore(operator_secret())
    command = EtcdAccess(store).client(make_cluster(), ["http://m:2379"]).command_line(["member", "list"])
    assert store.reads == [] and "--cert" not in command


def test_the_secret_is_read_again_only_after_the_refresh_interval() -> None:
    store, clock = SecretStore(operator_secret()), Clock()
    access = EtcdAccess(store, clock=clock)
    cluster = tls_cluster()
    first = tls_flags(access, cluster)
    for _ in range(5):
        assert tls_flags(access, cluster) == first
    assert len(store.reads) == 1

    store.secret = operator_secret(cert=b"ROTATED")
    clock.now += SECRET_REFRESH_SECONDS
    rotated = tls_flags(access, cluster)
    assert len(store.reads) == 2
    assert Path(rotated["--cert"]).read_bytes() == b"ROTATED"
    assert Path(first["--cert"]).read_bytes() == b"CERT", "files in use were overwritten"


@pytest.mark.parametrize("secret, expected", [
    pytest.param(None, "not found", id="missing-secret"),
    pytest.param(operator_secret(key=b""), c.OPERATOR_KEY_FILE, id="missing-key"),
    pytest.param({}, c.OPERATOR_CA_FILE, id="empty-secret"),
])
def test_an_unusable_secret_is_an_etcdctl_error_naming_the_secret(secret: dict[str, Any] | None,
                                                                  expected: str) -> None:
    with pytest.raises(ClientTLSUnavailable) as raised:
        EtcdAccess(SecretStore(secret)).client(tls_cluster(), ["https://m:2379"])
    # An EtcdctlError: observation treats the cluster as unreachable instead of crashing the pass.
    assert isinstance(raised.value, EtcdctlError)
    assert f"{NAMESPACE}/operator" in str(raised.value) and expected in str(raised.value)


def test_a_transient_api_failure_keeps_the_certificate_already_read() -> None:
    store, clock = SecretStore(operator_secret()), Clock()
    access = EtcdAccess(store, clock=clock)
    cluster = tls_cluster()
    before = tls_flags(access, cluster)
    store.error = Transient("apiserver unavailable", status=503)
    clock.now += SECRET_REFRESH_SECONDS
    assert tls_flags(access, cluster) == before

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
