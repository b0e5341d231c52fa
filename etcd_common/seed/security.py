"""The `restricted` Pod Security Standard as member pods run it (pure): the pod's and the etcd
container's security contexts. Shared by the etcd operator's member pods and the restore
operator's staging pod, which writes the snapshot a seed member then reads (same user and group)."""
from __future__ import annotations

import json
from typing import Any

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import ClusterSpec


def default_pod_security_context() -> dict[str, Any]:
    """What every member pod runs with unless spec.pod.securityContext says otherwise."""
    return {
        "runAsNonRoot": True,
        "runAsUser": c.MEMBER_RUN_AS_USER,
        "runAsGroup": c.MEMBER_RUN_AS_GROUP,
        "fsGroup": c.MEMBER_FS_GROUP,
        # Re-own a volume only when its root is not ours yet (a PVC of millions of files
        # would otherwise be walked on every pod start).
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def member_pod_security_context(spec: ClusterSpec) -> dict[str, Any]:
    """The defaults with spec.pod.securityContext (CoreOS field) over them: each field the user
    sets wins as a whole. A user who weakens it (runAsUser 0, no seccomp) gets pods that
    namespaces enforcing `restricted` refuse."""
    return {**default_pod_security_context(), **json.loads(json.dumps(spec.pod.security_context or {}))}


def etcd_container_security_context() -> dict[str, Any]:
    """etcd needs no privilege at all: no capabilities, no escalation, and writes only its data
    volume."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
