"""One pass's observation: the cluster's Kubernetes objects (from the watch caches) and etcd's own
view (member list, endpoint status and health over etcd's HTTP endpoints, `EtcdAccess.probe`: no
process per question), as an `ObservedCluster`."""
from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Callable, Sequence

from etcd_common.api.etcd_cluster import EtcdCluster
from etcd_common.etcd import etcdctl as ctl
from etcd_common.etcd.access import EtcdAccess
from etcd_common.etcd.tcp_probe import accepting_connections
from etcd_operator.adoption import services_hiding_unready_members
from etcd_operator.manifests import client_selector_outdated, client_service_name, member_client_url
from etcd_operator.observed import MemberHealth, ObservedCluster, parse_pod, parse_pvc

log = logging.getLogger(__name__)

# Observation must stay quick when a member is dead: each dead endpoint costs one command timeout.
PROBE_TIMEOUT_SECONDS = 2.0
# Endpoints that do not accept a TCP connection within this are not asked at all: a refused
# connection is known at once, a black-holed one costs this instead of PROBE_TIMEOUT_SECONDS.
CONNECT_TIMEOUT_SECONDS = 1.0
# A learner that serves clients answers its status in milliseconds; one that does not yet (a new
# etcd 3.6 member before it published itself) costs each pass this instead of PROBE_TIMEOUT_SECONDS.
LEARNER_PROBE_TIMEOUT_SECONDS = 0.5
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
        services_to_fix=services_hiding_unready_members(cluster.name, services),
        client_selector_outdated=any(
            (s.get("metadata") or {}).get("name") == client_service_name(cluster.name) and client_selector_outdated(s)
            for s in services),
        observed_at=now or datetime.now(timezone.utc),
    )
    if cluster.spec is None or cluster.paused:
        return base
    # Ask every member whose pod has an address and whose etcd accepts connections; any one that
    # answers gives the member list. A member whose pod is gone, terminating or not listening is
    # left out of every probe (asking it would only cost a timeout), so it counts as unhealthy.
    # Ready pods first: `member list` goes to the first that answers, and a member still joining
    # (a learner refuses it; a new one may not serve yet) would cost a refusal or a timeout.
    candidates = {member_client_url(cluster, pod.member_name): pod.member_name
                  for pod in sorted(observed_pods, key=lambda p: (not p.ready, p.name))
                  if pod.ip and not pod.deleting and not pod.terminal}
    if not candidates:
        return base
    started = time.monotonic()
    listening = connectable(list(candidates))
    reachable = {name: url for url, name in candidates.items() if url in listening}
    if not reachable:
        return replace(base, member_list_error=NOT_LISTENING)
    try:
        members = etcd.probe(cluster, list(reachable.values()), timeout_seconds=PROBE_TIMEOUT_SECONDS).member_list()
    except (ctl.EtcdctlError, ValueError) as e:
        # etcd 3.5+ answers `member list` only with quorum. The members that still answer
        # `endpoint status` tell whether quorum is lost (no leader) or etcd is just unreachable.
        statuses = _endpoint_status(cluster, reachable, etcd)
        _log_timing(cluster, started, len(reachable), "no member list")
        return replace(base, member_list_error=str(e), endpoint_status=statuses)
    observed_members = tuple(members)
    health, statuses, health_error = _member_health(
        cluster, [m for m in observed_members if m.member_name in reachable], etcd)
    _log_timing(cluster, started, len(reachable), f"{len(observed_members)} member(s), {len(health)} health-checked")
    return replace(base, members=observed_members, health=health, endpoint_status=statuses, health_error=health_error)


def _log_timing(cluster: EtcdCluster, started: float, asked: int, outcome: str) -> None:
    """Per-pass timing of the etcd side (DEBUG): where a slow pass spends its time."""
    if log.isEnabledFor(logging.DEBUG):
        log.debug("%s/%s: etcd observed in %.3fs (%d endpoint(s) asked): %s", cluster.namespace, cluster.name,
                  time.monotonic() - started, asked, outcome)


def _member_health(
    cluster: EtcdCluster, members: Sequence[ctl.Member], etcd: EtcdAccess,
) -> tuple[dict[str, MemberHealth], dict[str, ctl.EndpointStatus], str | None]:
    """Health of voting members and status of the healthy ones and of learners, each asked at
    its own URL, and why the health call failed, if it did (then health is unknown, not bad).

    Learners are left out of the health check (they refuse its linearizable read) and asked
    their status with a short timeout: one that serves clients answers in milliseconds, and a new
    etcd 3.6 learner may serve none for seconds (until it has published itself), which with the
    usual timeout would stall every pass while it joins.
    """
    by_endpoint = {member_client_url(cluster, m.member_name): m for m in members if m.started}
    if not by_endpoint:
        return {}, {}, None
    health: dict[str, MemberHealth] = {}
    voters = [url for url, m in by_endpoint.items() if not m.is_learner]
    if voters:
        try:
            for result in etcd.probe(cluster, voters, timeout_seconds=PROBE_TIMEOUT_SECONDS).endpoint_health():
                member = by_endpoint.get(result.endpoint)
                if member:
                    health[member.member_name] = MemberHealth(healthy=result.healthy, error=result.error or None)
        except ctl.EtcdctlError as e:
            log.warning("%s/%s: health check failed: %s", cluster.namespace, cluster.name, e)
            return health, {}, str(e) or type(e).__name__
    # Status of healthy voters only: a voter that just failed its health check (say, its pod
    # was deleted mid-pass) would make this call wait out a second timeout.
    asked = {m.member_name: url for url, m in by_endpoint.items()
             if not m.is_learner and m.member_name in health and health[m.member_name].healthy}
    statuses = _endpoint_status(cluster, asked, etcd) if asked else {}
    # A leader the others still name but that failed its health check (stuck): whether it still
    # answers `endpoint status` tells the planner whether it can serve move-leader.
    leader_ids = {status.leader_id for status in statuses.values() if status.leader_id}
    stuck_leaders = {m.member_name: url for url, m in by_endpoint.items()
                     if m.id in leader_ids and not m.is_learner and m.member_name not in asked}
    if stuck_leaders:
        statuses = {**statuses, **_endpoint_status(cluster, stuck_leaders, etcd, LEARNER_PROBE_TIMEOUT_SECONDS,
                                                   failure_level=logging.DEBUG)}
    learners = {m.member_name: url for url, m in by_endpoint.items() if m.is_learner}
    if learners:
        statuses = {**statuses, **_endpoint_status(cluster, learners, etcd, LEARNER_PROBE_TIMEOUT_SECONDS,
                                                   failure_level=logging.DEBUG)}
    return health, statuses, None


def _endpoint_status(cluster: EtcdCluster, reachable: dict[str, str], etcd: EtcdAccess,
                     timeout_seconds: float = PROBE_TIMEOUT_SECONDS,
                     failure_level: int = logging.WARNING) -> dict[str, ctl.EndpointStatus]:
    """`endpoint status` of the reachable members (name -> client URL), by member name
    (a joining learner that answers nothing yet is expected: `failure_level` DEBUG)."""
    by_endpoint = {url: name for name, url in reachable.items()}
    statuses: dict[str, ctl.EndpointStatus] = {}
    try:
        probe = etcd.probe(cluster, list(by_endpoint), timeout_seconds=timeout_seconds)
        for status in probe.endpoint_status():
            name = by_endpoint.get(status.endpoint)
            if name and status.reachable:
                statuses[name] = status
    except (ctl.EtcdctlError, ValueError) as e:
        log.log(failure_level, "%s/%s: endpoint status failed: %s", cluster.namespace, cluster.name, e)
    return statuses

