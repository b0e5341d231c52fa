"""Reading a cluster's keys and members the way a client would, for checks that nothing was lost."""
from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from kube_sandbox.testing import Sandbox
from tests.integration.etcd_operator.operator_clusters import Clusters


def member_url(clusters: Clusters, cluster: str, member: str) -> str:
    return f"http://{member}.{cluster}.{clusters.namespace}.svc:2379"


def peer_url(clusters: Clusters, cluster: str, member: str) -> str:
    return f"http://{member}.{cluster}.{clusters.namespace}.svc:2380"


def read_prefix(sandbox: Sandbox, endpoints: Sequence[str], prefix: str, *,
                serializable: bool = False, flags: Sequence[str] = ()) -> dict[str, str]:
    """Every key under `prefix` with its value; `serializable` reads the endpoint's local copy;
    `flags` are extra etcdctl flags (e.g. TLS files)."""
    args = [*flags, "get", prefix, "--prefix", "-w", "json"]
    if serializable:
        args.append("--consistency=s")
    result = sandbox.etcdctl(endpoints, *args)
    if result.returncode != 0:
        raise AssertionError(f"etcdctl get {prefix} --prefix at {list(endpoints)} failed: {result.stderr.strip()[-500:]}")
    kvs = json.loads(result.stdout).get("kvs") or []
    return {base64.b64decode(kv["key"]).decode(): base64.b64decode(kv.get("value", "")).decode() for kv in kvs}


def started(member: dict[str, Any]) -> bool:
    """etcd fills in a member's name and client URLs when its process first runs."""
    return bool(member.get("name")) and bool(member.get("clientURLs"))


def member_ids(clusters: Clusters, cluster: str) -> dict[str, int]:
    """name -> member ID of the started members."""
    return {m["name"]: int(m["ID"]) for m in clusters.member_list(cluster) if started(m)}


def describe_members(members: Sequence[dict[str, Any]]) -> str:
    return "; ".join(
        f"{m.get('name') or '(unstarted)'} id={int(m['ID']):x} learner={bool(m.get('isLearner'))} "
        f"peers={','.join(m.get('peerURLs') or [])}"
        for m in members
    )
