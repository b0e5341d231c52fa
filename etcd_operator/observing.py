"""One pass's observation: the cluster's Kubernetes objects (from the watch caches) and etcd's own
view (member list, endpoint status and health through etcdctl), as an `ObservedCluster`."""
from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Callable, Sequence

from etcd_common import etcdctl as ctl
from etcd_common.etcd_access import EtcdAccess
from etcd_common.etcd_cluster import EtcdCluster
from etcd_common.tcp_probe import accepting_connections
from etcd_operator.manifests import member_client_url
from etcd_operator.observed import MemberHealth, ObservedCluster, parse_pod, parse_pvc

log = logging.getLogger(__name__)

# Observation must stay quick when a member is dead: each dead endpoint costs one command timeout.
PROBE_TIMEOUT_SECONDS = 2.0
# Endpoints that do not accept a TCP connection within this are not asked at all: a refused
# connection is known at once, a black-holed one costs this instead of PROBE_TIMEOUT_SECONDS.
CONNECT_TIMEOUT_SECONDS = 1.0
NOT_LISTENING = "no member pod accepts connections on its client port"

Connectable = Callable[[Sequence[str]], set[str]]  # URLs -> those accepting a connection now


def _accepting(urls: Sequence[str]) -> set[str]:
    return accepting_connections(urls, CONNECT_TIMEOUT_SECONDS)


def observe_cluster(
    cluster: EtcdCluster,
    *,
    pods: Sequence[dict[str, Any]],
    services: Sequence[dict[str, Any]],
    pvcs: Sequence[dict[str, Any]],
    etcd: EtcdAccess,
    now: datetime | None = None,
    connectable: Connectable = _accepting,
) -> ObservedCluster:
    observed_pods = tuple(sorted((parse_pod(p) for p in pods), key=lambda p: p.name))
    base = ObservedCluster(
        cluster=cluster,
        pods=observed_pods,
        pvcs=tuple(parse_pvc(p) for p in pvcs),
        services=frozenset(str((s.get("metadata") or {}).get("name")) for s in services),
        observed_at=now or datetime.now(timezone.utc),
    )
    if cluster.spec is None or cluster.paused:
        return base
    # Ask every member whose pod has an address and whose etcd accepts connections; any one that
    # answers gives the member list. A member whose pod is gone, terminating or not listening is
    # left out of every probe (asking it would only cost a timeout), so it counts as unhealthy.
    candidates = {member_client_url(cluster, pod.member_name): pod.member_name for pod in observed_pods
                  if pod.ip and not pod.deleting and not pod.terminal}
    if not candidates:
        return base
    listening = connectable(list(candidates))
    reachable = {name: url for url, name in candidates.items() if url in listening}
    if not reachable:
        return replace(base, member_list_error=NOT_LISTENING)
    try:
        client = etcd.client(cluster, list(reachable.values()), command_timeout_seconds=PROBE_TIMEOUT_SECONDS)
        members = client.member_list()
    except (ctl.EtcdctlError, ValueError) as e:
        # etcd 3.5+ answers `member list` only with quorum. The members that still answer
        # `endpoint status` tell whether quorum is lost (no leader) or etcd is just unreachable.
        statuses = _endpoint_status(cluster, reachable, etcd)
        return replace(base, member_list_error=str(e), endpoint_status=statuses)
    observed_members = tuple(members)
    health, statuses, health_error = _member_health(
        cluster, [m for m in observed_members if m.member_name in reachable], etcd)
    return replace(base, members=observed_members, health=health, endpoint_status=statuses, health_error=health_error)


def _member_health(
    cluster: EtcdCluster, members: Sequence[ctl.Member], etcd: EtcdAccess,
) -> tuple[dict[str, MemberHealth], dict[str, ctl.EndpointStatus], str | None]:
    """Health of voting members and status of every started member, each asked at its own URL,
    and why the health call failed, if it did (then health is unknown, not bad).

    Learners are left out of the health check: they refuse the linearizable read it makes, and
    the client retries until its timeout, which would stall every pass while a learner exists.
    Their progress comes from endpoint status (raft index) instead.
    """
    by_endpoint = {member_client_url(cluster, m.member_name): m for m in members if m.started}
    if not by_endpoint:
        return {}, {}, None
    health: dict[str, MemberHealth] = {}
    voters = [url for url, m in by_endpoint.items() if not m.is_learner]
    if voters:
        try:
            for result in etcd.client(cluster, voters, command_timeout_seconds=PROBE_TIMEOUT_SECONDS).endpoint_health():
                member = by_endpoint.get(result.endpoint)
                if member:
                    health[member.member_name] = MemberHealth(healthy=result.healthy, error=result.error or None)
        except ctl.EtcdctlError as e:
            log.warning("%s/%s: health check failed: %s", cluster.namespace, cluster.name, e)
            return health, {}, str(e) or type(e).__name__
    # Status of learners and healthy voters only: a voter that just failed its health check
    # (say, its pod was deleted mid-pass) would make this call wait out a second timeout.
    asked = {m.member_name: url for url, m in by_endpoint.items()
             if m.is_learner or (m.member_name in health and health[m.member_name].healthy)}
    return health, _endpoint_status(cluster, asked, etcd) if asked else {}, None


def _endpoint_status(cluster: EtcdCluster, reachable: dict[str, str], etcd: EtcdAccess) -> dict[str, ctl.EndpointStatus]:
    """`endpoint status` of the reachable members (name -> client URL), by member name."""
    by_endpoint = {url: name for name, url in reachable.items()}
    statuses: dict[str, ctl.EndpointStatus] = {}
    try:
        client = etcd.client(cluster, list(by_endpoint), command_timeout_seconds=PROBE_TIMEOUT_SECONDS)
        for status in client.endpoint_status():
            name = by_endpoint.get(status.endpoint)
            if name and status.reachable:
                statuses[name] = status
    except (ctl.EtcdctlError, ValueError) as e:
        log.warning("%s/%s: endpoint status failed: %s", cluster.namespace, cluster.name, e)
    return statuses

