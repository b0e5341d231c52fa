"""Where clients reach an EtcdCluster the etcd operator runs: its client service URL and the
secret with the client certificate, for the backup and restore operators (which may not import
the etcd operator). Same names as etcd_operator.manifests builds."""
from __future__ import annotations

from dataclasses import dataclass

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import EtcdCluster


@dataclass(frozen=True)
class ClusterClientAccess:
    """The client URL of a cluster and its client-certificate secret ("" = plain http)."""

    url: str
    tls_secret: str


def client_service_url(cluster: EtcdCluster) -> str:
    """`http(s)://<cluster>-client.<ns>.svc[<cluster domain>]:2379`; raises SpecError for a
    cluster whose spec cannot be read."""
    spec = cluster.require_spec()
    scheme = "https" if spec.tls.client_tls else "http"
    host = f"{cluster.name}{c.CLIENT_SERVICE_SUFFIX}.{cluster.namespace}.svc{spec.pod.cluster_domain}"
    return f"{scheme}://{host}:{c.CLIENT_PORT}"


def cluster_client_access(cluster: EtcdCluster) -> ClusterClientAccess:
    spec = cluster.require_spec()
    return ClusterClientAccess(client_service_url(cluster), spec.tls.operator_secret if spec.tls.client_tls else "")
