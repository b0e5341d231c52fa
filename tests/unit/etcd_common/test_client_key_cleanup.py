"""Client keys the operator writes are removed once no longer needed: superseded ones after a
second rotation (the previous set stays for calls in flight), all of a cluster's when it goes."""
from __future__ import annotations

from pathlib import Path

from etcd_common.etcd.access import SECRET_REFRESH_SECONDS, EtcdAccess
from tests.unit.etcd_common.operator_secret_fakes import Clock, SecretStore, operator_secret, tls_cluster, tls_flags


def test_superseded_client_keys_are_removed_after_the_next_rotation() -> None:
    store, clock = SecretStore(operator_secret(key=b"KEY-1")), Clock()
    access = EtcdAccess(store, clock=clock)
    cluster = tls_cluster()
    first = Path(tls_flags(access, cluster)["--key"])
    store.secret = operator_secret(key=b"KEY-2")
    clock.now += SECRET_REFRESH_SECONDS
    second = Path(tls_flags(access, cluster)["--key"])
    assert first.exists(), "the previous key may still be in use by a call in flight"
    store.secret = operator_secret(key=b"KEY-3")
    clock.now += SECRET_REFRESH_SECONDS
    third = Path(tls_flags(access, cluster)["--key"])
    assert not first.exists() and not first.parent.exists()
    assert second.exists() and third.read_bytes() == b"KEY-3"


def test_a_deleted_clusters_client_keys_are_removed() -> None:
    access = EtcdAccess(SecretStore(operator_secret()))
    cluster = tls_cluster()
    key = Path(tls_flags(access, cluster)["--key"])
    access.forget(cluster.namespace, cluster.name)
    assert not key.exists() and not key.parent.exists()
    # used again, it reads the secret again and writes the files again
    assert Path(tls_flags(access, cluster)["--key"]).exists()
