"""What a quorum-loss recovery reads beyond the cluster's own objects, and only while one may
start (no quorum shown, a recovery asked for: spec.recovery.quorumLoss FromSurvivor or the
annotation): the namespace's EtcdBackups (planning/recovery.py never rebuilds from a survivor
behind the newest backup of its incarnation) and whether the nodes of member pods being deleted
or terminal still exist (a deleted Node is the proof that the members on it are gone; a node that
exists, NotReady or tainted or not, is none: a partitioned majority may be serving there)."""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from etcd_common.api import constants as c
from etcd_common.api.etcd_backup import parse_etcd_backup
from etcd_operator.observed import ObservedCluster
from kube_adapter.errors import KubeError
from kube_adapter.resources import Resource
from operator_runtime.worker import short_error

log = logging.getLogger(__name__)

NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
# The Node of that name; None: the API says there is none (raises KubeError when it cannot tell).
NodeReader = Callable[[str], Mapping[str, Any] | None]


class BackupLister(Protocol):
    def backups(self, namespace: str) -> Sequence[Mapping[str, Any]]:
        """The EtcdBackups of `namespace` (raises KubeError when they cannot be listed)."""
        ...


def recovery_asked(observed: ObservedCluster) -> bool:
    """No quorum shown and a recovery asked for (by spec or by an annotation)."""
    cluster = observed.cluster
    spec = cluster.require_spec()
    return not observed.quorum_available and (spec.quorum_loss == c.QUORUM_LOSS_FROM_SURVIVOR
                                              or bool(cluster.recovery_request))


def with_recovery_inputs(observed: ObservedCluster, lookups: BackupLister,
                         read_node: NodeReader | None = None) -> ObservedCluster:
    """`observed` with the EtcdBackups (or why they could not be listed) and the nodes gone, when
    a recovery is asked for (`recovery_asked`); else as it is. Without `read_node` no node is
    known gone."""
    if not recovery_asked(observed):
        return observed
    if read_node is not None:
        observed = replace(observed, nodes_gone=nodes_gone(observed, read_node))
    try:
        raw = lookups.backups(observed.cluster.namespace)
    except KubeError as error:
        return replace(observed, backups_error=f"EtcdBackups could not be listed: {short_error(error)}")
    return replace(observed, backups=tuple(parse_etcd_backup(dict(b)) for b in raw))


def nodes_gone(observed: ObservedCluster, read_node: NodeReader) -> frozenset[str]:
    """The nodes of member pods being deleted or terminal that the API says do not exist. A node
    that cannot be read (say, the operator may not read Nodes) is not gone: not known."""
    names = sorted({pod.node_name for pod in observed.pods if pod.node_name and (pod.deleting or pod.terminal)})
    gone = set()
    cluster = observed.cluster
    for name in names:
        try:
            if read_node(name) is None:
                gone.add(name)
        except KubeError as error:
            log.info("%s/%s: cannot tell whether node %s exists: %s", cluster.namespace, cluster.name, name,
                     short_error(error))
    return frozenset(gone)
