"""An EtcdCluster that bootstraps from a backup (spec.restore) and the member pod built for it, as the
restore-source and seed tests build them."""
from __future__ import annotations

from typing import Any

from etcd_common.api.etcd_cluster import parse_etcd_cluster
from etcd_operator.manifests import build_member_pod, member_peer_url

SHA = "0123456789abcdef" * 4
RESTORE = {"backupStorageType": "S3", "s3": {"path": "bucket/dir/snap.db", "awsSecret": "aws",
                                             "endpoint": "http://127.0.0.1:9000", "forcePathStyle": True},
           "sha256": SHA, "revision": 42}


def cluster(restore: dict[str, Any] | None = RESTORE, **spec: Any) -> Any:
    body = {"metadata": {"name": "example", "namespace": "ns", "uid": "cluster-uid"},
            "spec": {"size": 3, "version": "3.5.35", **({"restore": restore} if restore else {}), **spec}}
    return parse_etcd_cluster(body)


def seed_pod(parsed: Any) -> dict[str, Any]:
    member = "example-abcde"
    return build_member_pod(parsed, member, state="new", initial_cluster=[(member, member_peer_url(parsed, member))])
