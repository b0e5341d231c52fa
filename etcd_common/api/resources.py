"""The etcd kinds as `kube_adapter` resources, for `ResourceClient` and the controller."""
from __future__ import annotations

from etcd_common.api import cert_manager_tls as cm
from etcd_common.api import constants as c
from kube_adapter.resources import Resource

ETCD_CLUSTERS = Resource(c.API_GROUP, c.API_VERSION, c.PLURAL, c.KIND)
ETCD_BACKUPS = Resource(c.API_GROUP, c.API_VERSION, c.BACKUP_PLURAL, c.BACKUP_KIND)
ETCD_RESTORES = Resource(c.API_GROUP, c.API_VERSION, c.RESTORE_PLURAL, c.RESTORE_KIND)
# spec.TLS.certManager: cert-manager's kinds the etcd operator reads (and creates, Certificates).
CERT_MANAGER_CERTIFICATES = Resource(cm.GROUP, cm.VERSION, cm.CERTIFICATES, "Certificate")
CERT_MANAGER_ISSUERS = Resource(cm.GROUP, cm.VERSION, "issuers", "Issuer")
CERT_MANAGER_CLUSTER_ISSUERS = Resource(cm.GROUP, cm.VERSION, "clusterissuers", "ClusterIssuer", namespaced=False)
