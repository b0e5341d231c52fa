"""Names, keys, ports and versions shared by the etcd operator: one place, so a label key or a
port is never spelled twice. Values follow the CoreOS etcd-operator where it defined them, so
clusters it created are recognised."""
from __future__ import annotations

from typing import Final

# --- the EtcdCluster API (CoreOS v1beta2, unchanged)
API_GROUP: Final = "etcd.database.coreos.com"
API_VERSION: Final = "v1beta2"
API_GROUP_VERSION: Final = f"{API_GROUP}/{API_VERSION}"
KIND: Final = "EtcdCluster"
LIST_KIND: Final = "EtcdClusterList"
PLURAL: Final = "etcdclusters"
SINGULAR: Final = "etcdcluster"
SHORT_NAMES: Final = ("etcd",)
CRD_NAME: Final = f"{PLURAL}.{API_GROUP}"

# --- labels on every pod, PVC and service of a cluster (CoreOS keys)
LABEL_APP: Final = "app"
LABEL_APP_VALUE: Final = "etcd"
LABEL_CLUSTER: Final = "etcd_cluster"
LABEL_MEMBER: Final = "etcd_node"
# On a member pod while the client service may send it clients; the etcd operator removes it
# (drains the member) before it removes or restarts that member. The client service selects it.
LABEL_SERVING: Final = f"{API_GROUP}/serving"
LABEL_SERVING_VALUE: Final = "true"
# When the serving label was removed (RFC 3339): the wait for the endpoint to go is bounded.
ANNOTATION_DRAINED_AT: Final = f"{API_GROUP}/drained-at"
# Labels the operator sets on its pods and selects them by: spec.pod.labels may not set them.
RESERVED_LABEL_KEYS: Final = frozenset({LABEL_APP, LABEL_CLUSTER, LABEL_MEMBER, LABEL_SERVING})

# --- pod annotations
# CoreOS wrote the etcd version under this bare key; keeping it lets us read its pods.
ANNOTATION_ETCD_VERSION: Final = "etcd.version"
# "new" for the seed member that bootstraps the cluster, "existing" for every later member.
ANNOTATION_INITIAL_CLUSTER_STATE: Final = f"{API_GROUP}/initial-cluster-state"
# Hash of the pod policy the pod was built from; a different hash means the pod is outdated.
ANNOTATION_POD_POLICY_HASH: Final = f"{API_GROUP}/pod-policy-hash"
# When the operator last defragmented the member (RFC 3339), and when a defragmentation last failed.
ANNOTATION_DEFRAGMENTED_AT: Final = f"{API_GROUP}/defragmented-at"
ANNOTATION_DEFRAGMENT_FAILED_AT: Final = f"{API_GROUP}/defragment-failed-at"
# Set with an in-place image change (UpgradeMember in place): when (RFC 3339), and the etcd
# container's restart count before it; the member is restarting until that count grows.
ANNOTATION_RESTARTED_AT: Final = f"{API_GROUP}/restarted-at"
ANNOTATION_RESTARTED_FROM_COUNT: Final = f"{API_GROUP}/restarted-from-count"
# spec.TLS.issued: fingerprint of the CA bundle the member's Secrets held when its pod was created
# (etcd reads its trusted CA files only at start: a CA rotation rolls pods trusting less). Not
# reserved: the operator sets it after spec.pod.annotations, so its own value wins.
ANNOTATION_TRUSTED_CA: Final = f"{API_GROUP}/trusted-ca"
RESERVED_ANNOTATION_KEYS: Final = frozenset(
    {ANNOTATION_ETCD_VERSION, ANNOTATION_INITIAL_CLUSTER_STATE, ANNOTATION_POD_POLICY_HASH, ANNOTATION_DRAINED_AT,
     ANNOTATION_DEFRAGMENTED_AT, ANNOTATION_DEFRAGMENT_FAILED_AT, ANNOTATION_RESTARTED_AT,
     ANNOTATION_RESTARTED_FROM_COUNT}
)
# --- PVC annotations
# On the volume of a member the operator stopped to remove it (RFC 3339): its pod is not
# recreated on it; the member is removed and the claim deleted.
ANNOTATION_LEAVING_AT: Final = f"{API_GROUP}/leaving-at"

# Prometheus's conventional scrape annotations, set on every member pod (its metrics listener);
# the same keys in spec.pod.annotations win, so a user can turn scraping off ("false").
ANNOTATION_PROMETHEUS_SCRAPE: Final = "prometheus.io/scrape"
ANNOTATION_PROMETHEUS_PORT: Final = "prometheus.io/port"
ANNOTATION_PROMETHEUS_PATH: Final = "prometheus.io/path"

INITIAL_CLUSTER_STATE_NEW: Final = "new"
INITIAL_CLUSTER_STATE_EXISTING: Final = "existing"

# --- ports and names of the things a cluster is made of
CLIENT_PORT: Final = 2379
PEER_PORT: Final = 2380
# Plain-HTTP listener of every member for /metrics and /health (`--listen-metrics-urls`).
METRICS_PORT: Final = 2381
METRICS_PORT_NAME: Final = "metrics"
METRICS_PATH: Final = "/metrics"
CLIENT_PORT_NAME: Final = "client"
PEER_PORT_NAME: Final = "peer"
CLIENT_SERVICE_SUFFIX: Final = "-client"  # client service `<cluster>-client`; peer service `<cluster>`
ETCD_CONTAINER_NAME: Final = "etcd"
ETCD_BINARY: Final = "/usr/local/bin/etcd"
ETCDCTL_BINARY: Final = "/usr/local/bin/etcdctl"
DATA_VOLUME_NAME: Final = "etcd-data"
DATA_VOLUME_MOUNT_PATH: Final = "/var/etcd"
DATA_DIR: Final = "/var/etcd/data"
POD_IP_ENV: Final = "POD_IP"

# --- member pod security: the `restricted` Pod Security Standard by default.
# etcd runs as this uid/gid: 65532 is "nonroot" in the distroless images etcd is released on,
# and fsGroup makes the data volume (emptyDir or PVC) writable for it.
MEMBER_RUN_AS_USER: Final = 65532
MEMBER_RUN_AS_GROUP: Final = 65532
MEMBER_FS_GROUP: Final = 65532

# Member names are `<cluster>-<suffix>`, CoreOS style; the name is also the pod's name and hostname.
NAME_SUFFIX_LENGTH: Final = 5
NAME_SUFFIX_ALPHABET: Final = "abcdefghijklmnopqrstuvwxyz0123456789"
# A member name must be a DNS label (<= 63), and `<cluster>-client` a DNS-1035 label (<= 63).
MAX_CLUSTER_NAME_LENGTH: Final = 63 - len(CLIENT_SERVICE_SUFFIX)

# --- TLS (CoreOS spec.TLS.static layout: secret names in the spec, fixed file names inside)
PEER_TLS_VOLUME: Final = "member-peer-tls"
PEER_TLS_DIR: Final = "/etc/etcdtls/member/peer-tls"
PEER_CERT_FILE: Final = "peer.crt"
PEER_KEY_FILE: Final = "peer.key"
PEER_CA_FILE: Final = "peer-ca.crt"
SERVER_TLS_VOLUME: Final = "member-server-tls"
SERVER_TLS_DIR: Final = "/etc/etcdtls/member/server-tls"
SERVER_CERT_FILE: Final = "server.crt"
SERVER_KEY_FILE: Final = "server.key"
SERVER_CA_FILE: Final = "server-ca.crt"
OPERATOR_TLS_VOLUME: Final = "etcd-client-tls"
OPERATOR_TLS_DIR: Final = "/etc/etcdtls/operator/etcd-tls"
OPERATOR_CERT_FILE: Final = "etcd-client.crt"
OPERATOR_KEY_FILE: Final = "etcd-client.key"
OPERATOR_CA_FILE: Final = "etcd-client-ca.crt"

# --- etcd versions
DEFAULT_REPOSITORY: Final = "quay.io/coreos/etcd"
DEFAULT_VERSION: Final = "3.6.16"
# Minor versions we run and create clusters with.
SUPPORTED_MINOR_VERSIONS: Final = ("3.5", "3.6")
# Minor versions accepted only to be upgraded away from: clusters the CoreOS operator left often
# run 3.4. They keep running (and scaling), with a warning in status, until upgraded to 3.5.
UPGRADE_SOURCE_MINOR_VERSIONS: Final = ("3.4",)
ACCEPTED_MINOR_VERSIONS: Final = UPGRADE_SOURCE_MINOR_VERSIONS + SUPPORTED_MINOR_VERSIONS
# The newest patch release of each accepted minor version this operator is tested with; named in
# messages that tell a user which version to move to.
RECOMMENDED_VERSIONS: Final = {"3.4": "3.4.23", "3.5": "3.5.35", "3.6": "3.6.16"}
# etcd upgrades one minor version at a time. Some minor upgrades also need a minimum patch release
# of the minor version they leave (target minor -> oldest patch every member must run first):
# etcd's v3.5 -> v3.6 upgrade guide asks for 3.5.32 or later (3.5.20-3.5.26 fix membership data
# that etcd 3.6 would read wrongly: "too many learner members", removed "zombie" members; 3.5.32
# adds the v2 WAL checks and options the guide walks through).
MINIMUM_VERSION_BEFORE_MINOR_UPGRADE: Final = {"3.6": "3.5.32"}
# Minor versions with learner support (`member add --learner`, `member promote`): all we accept.
LEARNER_MINOR_VERSIONS: Final = frozenset({"3.4", "3.5", "3.6"})
# etcd promotes a learner only once its log is within 10% of the leader's; we wait for the same.
LEARNER_CATCH_UP_RATIO: Final = 0.9

# --- the backend quota (`--quota-backend-bytes`)
KIB: Final = 1024
MIB: Final = 1024 * KIB
GIB: Final = 1024 * MIB
# What etcd uses when the flag is not given (spec.backendQuota unset).
ETCD_DEFAULT_QUOTA_BACKEND_BYTES: Final = 2 * GIB
# etcd's documented suggested maximum: above it a warning in status.
SUGGESTED_MAX_QUOTA_BACKEND_BYTES: Final = 8 * GIB
# The most spec.backendQuota may ask for (the CRD schema holds the same for integers).
MAX_QUOTA_BACKEND_BYTES: Final = 100 * GIB

# Flags the operator sets on every member; `spec.pod.etcdEnv` may not set them again (etcd refuses
# to start when an ETCD_* variable shadows a flag given on the command line).
OPERATOR_MANAGED_ETCD_FLAGS: Final = (
    "name",
    "data-dir",
    "listen-client-urls",
    "listen-peer-urls",
    "advertise-client-urls",
    "initial-advertise-peer-urls",
    "initial-cluster",
    "initial-cluster-state",
    "initial-cluster-token",
    "peer-client-cert-auth",
    "peer-trusted-ca-file",
    "peer-cert-file",
    "peer-key-file",
    "client-cert-auth",
    "trusted-ca-file",
    "cert-file",
    "key-file",
    "listen-metrics-urls",
)

# --- the EtcdBackup API (CoreOS v1beta2, same group and version)
BACKUP_KIND: Final = "EtcdBackup"
BACKUP_PLURAL: Final = "etcdbackups"
BACKUP_CRD_NAME: Final = f"{BACKUP_PLURAL}.{API_GROUP}"

# --- restores (EtcdRestore)
RESTORE_KIND: Final = "EtcdRestore"
RESTORE_PLURAL: Final = "etcdrestores"
# On an EtcdCluster the restore operator created: the uid of the EtcdRestore (annotation: it is
# what "this cluster already serves that restore's data" is decided on) and its name (label: the
# restore operator's watch finds its clusters by it).
ANNOTATION_RESTORE_UID: Final = f"{API_GROUP}/restore-uid"
LABEL_RESTORE: Final = f"{API_GROUP}/restore"
# On an EtcdRestore from the moment it deletes the cluster it replaces until it has finished (or
# failed): a restore deleted meanwhile still creates the restored cluster before it goes, so that
# deleting it never leaves no cluster at all.
RESTORE_FINALIZER: Final = f"{API_GROUP}/restore-completes"

# --- quorum-loss recovery (spec.recovery.quorumLoss; etcd_operator/planning/recovery.py)
QUORUM_LOSS_REPORT: Final = "Report"
QUORUM_LOSS_FROM_SURVIVOR: Final = "FromSurvivor"
QUORUM_LOSS_POLICIES: Final = (QUORUM_LOSS_REPORT, QUORUM_LOSS_FROM_SURVIVOR)
# On an EtcdCluster whose policy is Report: a one-off request to recover from the survivor. Any
# non-empty value; honoured once (status.recovery.request records the value acted on).
ANNOTATION_RECOVER_QUORUM_FROM_SURVIVOR: Final = f"{API_GROUP}/recover-quorum-from-survivor"

# --- CA rotation of spec.TLS.issued (etcd_operator/tls/ca_rotation.py)
# On an EtcdCluster: a request to rotate its CA now. Any non-empty value; honoured once (the CA
# Secret's ANNOTATION_CA_ROTATION_REQUEST records the value acted on).
ANNOTATION_ROTATE_CA: Final = f"{API_GROUP}/rotate-ca"
# On the CA Secret: the rotate-ca value the running (or last) rotation acted on, and when it started.
ANNOTATION_CA_ROTATION_REQUEST: Final = f"{API_GROUP}/ca-rotation-request"
ANNOTATION_CA_ROTATION_STARTED_AT: Final = f"{API_GROUP}/ca-rotation-started-at"
# On a leaf Secret: when its CA file last changed to another set of CAs (RFC 3339).
ANNOTATION_TRUST_PUBLISHED_AT: Final = f"{API_GROUP}/trust-published-at"
# The operators re-read their client certificate Secret at most this often: a rotated operator
# certificate is picked up within this time (etcd_common/etcd/access.py).
SECRET_REFRESH_SECONDS: Final = 30.0
