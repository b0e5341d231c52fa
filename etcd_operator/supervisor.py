"""The pass of one EtcdCluster's supervisor: observe -> plan one action -> act -> write status
(run by its `operator_runtime.worker.ObjectWorker` thread).

Woken at once by any event about its cluster (the cluster itself, its pods, services, PVCs);
otherwise it re-checks etcd every resync period. After an action it observes again right away;
while waiting on etcd (a learner catching up, a member starting) it polls briefly.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from etcd_common import constants as c
from etcd_common import etcdctl as ctl
from etcd_common.etcd_access import EtcdAccess
from etcd_operator import actions as a
from etcd_operator import versions
from etcd_operator.acting import ActionExecutor
from etcd_operator.cluster_status import compute_status, upgrade_source_event
from etcd_operator.logs import cluster_logger
from etcd_operator.metrics import OperatorMetrics
from etcd_operator.observing import observe_cluster
from etcd_operator.planning import plan_next_action
from etcd_operator.rechecking import stable_recheck_seconds
from etcd_operator.spec import parse_etcd_cluster
from kube_adapter.errors import Forbidden, KubeError, NotFound
from kube_adapter.events import EventRecorder
from kube_adapter.patching import status_merge_patch
from kube_adapter.resources import ResourceClient
from operator_runtime.cache import Key, ObjectCache
from operator_runtime.worker import ObjectWorker, short_error

WAIT_POLL_SECONDS = 0.5  # while something is in progress on the etcd side
# A change etcd refused for now ("unhealthy cluster" for its 5 s after a change, "learner not in
# sync") is asked again this soon: each poll's wait is time added to the change.
POSTPONED_RETRY_SECONDS = 0.2


@dataclass(frozen=True)
class SupervisorContext:
    """What every supervisor shares: caches fed by the controller's watches, clients, settings."""

    clusters: ObjectCache
    pods: ObjectCache
    services: ObjectCache
    pvcs: ObjectCache
    cluster_api: ResourceClient
    executor: ActionExecutor
    etcd: EtcdAccess
    events: EventRecorder
    metrics: OperatorMetrics
    resync_seconds: float
    stop: threading.Event
    may_act: Callable[[], bool] = lambda: True  # asked before every action (leader election)


class ClusterSupervisor:
    """The etcd pass for one EtcdCluster; `worker` is the thread that runs it."""

    def __init__(self, key: Key, context: SupervisorContext) -> None:
        self.key = key
        self.context = context
        self.log = cluster_logger(*key)
        self._last_error: str | None = None
        self._postponed: str | None = None  # kind of the action etcd refused last pass, if any
        self._quiet_passes = 0  # converged passes in a row (they stretch the re-check interval)
        self.worker = ObjectWorker(
            key, self.reconcile_once, stop=context.stop, log=self.log, role="supervisor",
            on_pass=self._count_pass, pause_on=self._pause_on, expected_errors=(ctl.EtcdctlError, KubeError),
            on_lag=context.metrics.observe_recheck_lag,
        )

    def _count_pass(self, seconds: float, error: Exception | None) -> None:
        self.context.metrics.observe_reconcile(seconds, ok=error is None)
        if error is not None:
            self._last_error = short_error(error)
            self.context.metrics.count_error(_error_reason(error))

    def _pause_on(self, error: Exception) -> float | None:
        if isinstance(error, Forbidden) and _namespace_terminating(error):
            # The namespace is being deleted, and this cluster with it: nothing to do.
            self.log.info("namespace is being deleted; waiting for the cluster to go")
            return self.context.resync_seconds
        return None

    def reconcile_once(self) -> float:
        """One pass; returns how long to wait before the next one unless woken earlier."""
        delay = self._reconcile_once()
        if delay != self.context.resync_seconds:
            self._quiet_passes = 0
            return delay
        self._quiet_passes += 1
        return stable_recheck_seconds(delay, self._quiet_passes)

    def _reconcile_once(self) -> float:
        ctx = self.context
        if not all(cache.is_synced() for cache in (ctx.pods, ctx.services, ctx.pvcs)):
            # Until every watch has listed once, a missing pod may just be unlisted: acting now
            # could bootstrap a second seed next to a running cluster.
            return WAIT_POLL_SECONDS
        raw = ctx.clusters.get(self.key)
        if raw is None:
            return ctx.resync_seconds
        cluster = parse_etcd_cluster(raw)
        selector = {c.LABEL_CLUSTER: cluster.name, c.LABEL_APP: c.LABEL_APP_VALUE}
        observed = observe_cluster(
            cluster,
            pods=ctx.pods.select(cluster.namespace, selector),
            services=ctx.services.select(cluster.namespace, selector),
            pvcs=ctx.pvcs.select(cluster.namespace, selector),
            etcd=ctx.etcd,
        )
        action = plan_next_action(observed)
        error: str | None = None
        if action.has_effect and not ctx.may_act():
            # Our lease may have expired (a frozen process, a cut network): a successor may be
            # acting. The elector ends this process once it notices; until then, change nothing.
            self.log.warning("not acting (%s): leadership not confirmed within the renew deadline", action.kind)
            return WAIT_POLL_SECONDS
        if action.has_effect:
            # A change etcd keeps refusing is retried every WAIT_POLL_SECONDS: say so once, not each time.
            retrying = self._postponed == action.kind
            self.log.log(logging.DEBUG if retrying else logging.INFO, "%s", action.describe())
            try:
                ctx.executor.execute(action, observed)
            except (ctl.ClusterUnhealthy, ctl.LearnerNotReady, ctl.TooManyLearners) as e:
                # etcd refuses membership changes until every member has been connected a while,
                # and a promotion until the learner caught up.
                if not retrying:
                    self.log.info("%s postponed: %s; retrying every %.1fs until etcd accepts it",
                                  action.kind, short_error(e), POSTPONED_RETRY_SECONDS)
                self._postponed = action.kind
                self._write_status(raw, observed, action, None)
                return POSTPONED_RETRY_SECONDS
            except (ctl.EtcdctlError, KubeError) as e:
                self._postponed = None
                error = short_error(e)
                self._last_error = error
                self._write_status(raw, observed, action, error)
                raise
            if retrying:
                self.log.info("%s", action.describe())  # the attempt that went through
            self._postponed = None
            self._last_error = None
            ctx.metrics.count_membership_change(cluster.namespace, cluster.name, action.kind)
        else:
            self._postponed = None
        if action.event_reason:
            ctx.events.record(raw, action.event_type, action.event_reason, action.describe())
        if isinstance(action, a.ReportQuorumLoss):
            ctx.metrics.count_error("quorum_lost")
        elif isinstance(action, a.RejectSpec):
            ctx.metrics.count_error("invalid_spec")
        self._write_status(raw, observed, action, self._last_error)
        if action.has_effect:
            return 0.0
        if isinstance(action, (a.Wait, a.ReportQuorumLoss)):
            return WAIT_POLL_SECONDS
        return ctx.resync_seconds

    def _write_status(self, raw: dict[str, Any], observed: Any, action: a.Action, error: str | None) -> None:
        ctx = self.context
        status = _omit_empty(compute_status(observed, action, now=datetime.now(timezone.utc), last_error=error))
        members = observed.members or ()
        ctx.metrics.set_cluster_members(
            observed.cluster.namespace, observed.cluster.name,
            members=len(members), ready=status.get("readyCount", 0), has_quorum=observed.has_quorum,
        )
        spec = observed.cluster.spec
        ctx.metrics.set_cluster_phase(observed.cluster.namespace, observed.cluster.name, status.get("phase", ""),
                                      desired_members=spec.size if spec is not None else None)
        current = raw.get("status") or {}
        if status == current:
            return
        try:
            updated = ctx.cluster_api.patch_status(observed.cluster.namespace, observed.cluster.name,
                                                   status_merge_patch(current, status))
        except NotFound:
            return  # the cluster was deleted meanwhile
        # Keep the cache's copy current so the next pass compares against what we wrote.
        if updated:
            ctx.clusters.upsert(updated)
        warning = upgrade_source_event(observed, status)
        if warning:
            ctx.events.record(raw, "Warning", versions.REASON_UPGRADE_SOURCE_ONLY, warning)
        previous_phase = (raw.get("status") or {}).get("phase")
        if status.get("phase") != previous_phase:
            self.log.info("phase %s -> %s: %s", previous_phase or "(none)", status.get("phase"), status.get("reason"))


def _namespace_terminating(e: Forbidden) -> bool:
    """The apiserver refuses writes into a namespace that is being deleted (cause NamespaceTerminating)."""
    return "being terminated" in str(e) or "NamespaceTerminating" in str(e)


def _omit_empty(status: dict[str, Any]) -> dict[str, Any]:
    """Empty strings are left out, as Kubernetes API types do (`omitempty`)."""
    result = {k: v for k, v in status.items() if v != ""}
    if "conditions" in result:
        result["conditions"] = [{k: v for k, v in cond.items() if v != ""} for cond in result["conditions"]]
    return result


def _error_reason(e: BaseException) -> str:
    if isinstance(e, ctl.EtcdctlError):
        return "etcdctl"
    if isinstance(e, KubeError):
        return "kube_api"
    return "supervisor_crash"
