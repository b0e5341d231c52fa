"""The pass of one EtcdCluster's supervisor: observe -> plan one action -> act -> write status
(run by its `operator_runtime.worker.ObjectWorker` thread; `rechecking.Pacing` says when the
next pass comes unless an event about the cluster, its pods, services or PVCs wakes it first).
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from etcd_common.api.etcd_cluster import CONDITION_MEMBER_START_BLOCKED
from etcd_common.api.images import DEFAULT_TRUSTED_REPOSITORIES
from etcd_common.etcd import etcdctl as ctl
from etcd_common.etcd.access import EtcdAccess
from etcd_operator import actions as a
from etcd_operator import reasons, versions
from etcd_operator.acting import ActionExecutor
from etcd_operator.disruption_budget import plan_disruption_budget
from etcd_operator.logs import cluster_logger
from etcd_operator.member_start import StartProblem, start_problems
from etcd_operator.metrics import OperatorMetrics
from etcd_operator.observed import ObservedCluster
from etcd_operator.observing import KubeSources, observe
from etcd_operator.ownership import is_being_deleted
from etcd_operator.planning import PlanningPolicy, plan_next_action
from etcd_operator.rechecking import POSTPONED_RETRY_SECONDS, WAIT_MAX_SECONDS, Outcome, Pacing
from etcd_operator.spec import check_trusted_repository, parse_etcd_cluster
from etcd_operator.status import (
    alarm_event,
    compute_status,
    peer_view_event,
    static_tls_event,
    upgrade_source_event,
)
from etcd_operator.tls import certificates
from kube_adapter.errors import Conflict, Forbidden, KubeError, NotFound
from kube_adapter.events import EventRecorder
from kube_adapter.patching import status_merge_patch
from operator_runtime.cache import Key
from operator_runtime.cached_client import CachedClient
from operator_runtime.running import MayAct, always_may_act
from operator_runtime.worker import ObjectWorker, short_error

# The longest one action may take (etcdctl's command timeout plus API writes with their retries):
# it is started only while the lease stays surely ours at least that long.
ACTION_MAX_SECONDS = 10.0


@dataclass(frozen=True)
class SupervisorContext:
    """What every supervisor shares: the EtcdClusters (the watch cache; status written through),
    what an observation reads (`kube`: the owned kinds' watch caches and lookups), the executor,
    settings."""

    clusters: CachedClient
    kube: KubeSources
    executor: ActionExecutor
    etcd: EtcdAccess
    events: EventRecorder
    metrics: OperatorMetrics
    resync_seconds: float
    stop: threading.Event
    may_act: MayAct = always_may_act  # asked before every action, status write and event (leader election)
    trusted_repositories: tuple[str, ...] = DEFAULT_TRUSTED_REPOSITORIES
    policy: PlanningPolicy = PlanningPolicy()  # the settings the planner follows


class ClusterSupervisor:
    """The etcd pass for one EtcdCluster; `worker` is the thread that runs it."""

    def __init__(self, key: Key, context: SupervisorContext) -> None:
        self.key = key
        self.context = context
        self.log = cluster_logger(*key)
        self.pacing = Pacing(context.resync_seconds)
        self._last_error: str | None = None
        self._reported: tuple[str, str] | None = None  # (reason, message) of the last report's event
        self._status_from_before = True  # until our first pass wrote it, the status is a predecessor's
        self._deleting = False
        self._start_incidents: set[tuple[str, str]] | None = None  # None: not yet compared with status
        self._failing_with: str | None = None  # the failure of the last pass, if it failed
        self.worker = ObjectWorker(
            key, self.reconcile_once, stop=context.stop, log=self.log, role="supervisor",
            on_pass=self._count_pass, pause_on=self._pause_on, expected_errors=(ctl.EtcdctlError, KubeError),
            on_lag=context.metrics.observe_recheck_lag,
        )

    def _count_pass(self, seconds: float, error: Exception | None) -> None:
        self.context.metrics.observe_reconcile(seconds, ok=error is None)
        if error is None:
            self._failing_with = None
            return
        self._last_error = short_error(error)
        # The same failure pass after pass is one incident: counted once, until a pass succeeds
        # or the failure changes.
        if self._last_error != self._failing_with:
            self.context.metrics.count_error(_error_reason(error))
            if _error_reason(error) == "supervisor_crash":
                self._report_crash(self._last_error)
        self._failing_with = self._last_error

    def _report_crash(self, error: str) -> None:
        """A pass that crashed (a bug, not an API or etcd failure) may have crashed before it wrote
        the status; say so in status.lastError once per new failure, so `kubectl get` tells more
        than the operator's log. Best effort: that write failing too is only logged."""
        if not self.context.may_act():
            return
        namespace, name = self.key
        try:
            self.context.clusters.patch_status(namespace, name, {
                "lastError": f"the operator's pass failed: {error}; it retries (its log has the traceback)"})
        except Exception as e:  # the crash itself is what matters; it is in the log already
            self.log.debug("could not report the failed pass in status: %s", short_error(e))

    def _pause_on(self, error: Exception) -> float | None:
        if isinstance(error, Forbidden) and _namespace_terminating(error):
            # The namespace is being deleted, and this cluster with it: nothing to do.
            self.log.info("namespace is being deleted; waiting for the cluster to go")
            return self.context.resync_seconds
        return None

    def reconcile_once(self) -> float:
        """One pass; returns how long to wait before the next one unless woken earlier."""
        ctx = self.context
        if not ctx.kube.synced():
            # Until every watch has listed once, a missing pod may just be unlisted: acting now
            # could bootstrap a second seed next to a running cluster.
            return self.pacing.delay_after(None, Outcome.HELD_BACK)
        raw = ctx.clusters.cached(*self.key)
        if raw is None or self._being_deleted(raw):
            return self.pacing.delay_after(None, Outcome.IDLE)
        cluster = check_trusted_repository(parse_etcd_cluster(raw), ctx.trusted_repositories)
        observed = observe(cluster, ctx.kube, ctx.etcd)
        self._keep_disruption_budget(raw, observed)
        action = plan_next_action(observed, ctx.policy)
        if (action.has_effect or self._is_news(action)) and self._deletion_started():
            return self.pacing.delay_after(action, Outcome.IDLE)
        if not self._may_act(action):
            return self.pacing.delay_after(action, Outcome.HELD_BACK)
        outcome = self._act(raw, observed, action)
        if outcome is Outcome.DONE:
            self._report(raw, observed, action)
        self._write_status(raw, observed, action, self._last_error if outcome is Outcome.DONE else None)
        self._status_from_before = False
        return self.pacing.delay_after(action, outcome)

    def _being_deleted(self, raw: dict[str, Any]) -> bool:
        """The garbage collector removes what the cluster owns (first, with foreground
        propagation): recreating it, or reporting its members lost, would fight it."""
        if not is_being_deleted(raw):
            self._deleting = False
            return False
        if not self._deleting:
            self.log.info("cluster is being deleted; leaving its objects to the garbage collector")
        self._deleting = True
        return True

    def _keep_disruption_budget(self, raw: dict[str, Any], observed: ObservedCluster) -> None:
        """The PodDisruptionBudget is kept current on every pass, beside the one membership action."""
        ctx = self.context
        budget_action = plan_disruption_budget(observed, observed.disruption_budget)
        if budget_action is None or not ctx.may_act(ACTION_MAX_SECONDS) or self._deletion_started():
            return
        self.log.info("%s", budget_action.describe())
        try:
            ctx.executor.execute(budget_action, observed)
        except KubeError as e:
            # The budget protects the members; failing to keep it must not stop their care.
            self.log.warning("%s failed: %s; retried next pass", budget_action.kind, short_error(e))
        else:
            ctx.events.record(raw, budget_action.event_type, budget_action.event_reason, budget_action.describe())

    def _may_act(self, action: a.Action) -> bool:
        """Our lease may have expired (a frozen process, a cut network), or may before the action
        could end: a successor may be acting. The elector ends this process once it notices; until
        then, change nothing: no action, no status, no event."""
        seconds = ACTION_MAX_SECONDS if action.has_effect else 0.0
        if self.context.may_act(seconds):
            return True
        self.log.warning("not acting (%s): leadership not confirmed for the next %.0fs", action.kind, seconds)
        return False

    def _act(self, raw: dict[str, Any], observed: ObservedCluster, action: a.Action) -> Outcome:
        """Carry out the action (one without effect has nothing to carry out); a failure is
        raised once the status says so."""
        retrying = self.pacing.begin(action)
        if not action.has_effect:
            return Outcome.DONE
        # A change etcd keeps refusing is retried pass after pass: say so once, not each time.
        self.log.log(logging.DEBUG if retrying else logging.INFO, "%s", action.describe())
        try:
            self.context.executor.execute(action, observed)
        except (ctl.ClusterUnhealthy, ctl.LearnerNotReady, ctl.TooManyLearners) as e:
            # etcd refuses membership changes until every member has been connected a while,
            # and a promotion until the learner caught up.
            if not retrying:
                self.log.info("%s postponed: %s; retrying (every %.1f-%.1fs) until etcd accepts it",
                              action.kind, short_error(e), POSTPONED_RETRY_SECONDS, WAIT_MAX_SECONDS)
            return Outcome.POSTPONED
        except (ctl.EtcdctlError, KubeError) as e:
            error = short_error(e)
            if isinstance(action, a.IssueCertificates) and error != self._last_error:
                # Certificates that are not written end some day: say so where people look (once
                # per distinct error; status.lastError has it too).
                self.context.events.record(raw, "Warning", certificates.REASON_CERTIFICATE_ISSUE_FAILED,
                                           f"{action.describe()} failed: {error}")
            self._last_error = error
            self._write_status(raw, observed, action, self._last_error)
            raise
        if retrying:
            self.log.info("%s", action.describe())  # the attempt that went through
        self._last_error = None
        self.context.metrics.count_membership_change(observed.cluster.namespace, observed.cluster.name, action.kind)
        return Outcome.DONE

    def _report(self, raw: dict[str, Any], observed: ObservedCluster, action: a.Action) -> None:
        """Events and error counts of this pass: one per incident, however many passes see it."""
        ctx = self.context
        if not action.has_effect and not action.event_reason:
            self._reported = None
        news = bool(action.event_reason) and self._new_incident(raw, action)
        if news and action.event_reason:
            ctx.events.record(raw, action.event_type, action.event_reason, action.describe())
        for problem in self._new_start_problems(observed):
            ctx.events.record(raw, "Warning", reasons.MEMBER_NOT_STARTING, problem.describe())
        if news and isinstance(action, a.ReportQuorumLoss):
            ctx.metrics.count_error("quorum_lost")
        elif news and isinstance(action, a.RejectSpec):
            ctx.metrics.count_error("invalid_spec")

    def _new_start_problems(self, observed: ObservedCluster) -> list[StartProblem]:
        """Member start problems not reported yet: one Warning event per incident, and one again
        only once it went away and came back. After a restart, those the status names already
        count as reported."""
        problems = start_problems(observed)
        known = self._start_incidents
        if known is None:
            recorded = observed.cluster.recorded.condition(CONDITION_MEMBER_START_BLOCKED)
            shown = recorded.message if recorded is not None and recorded.status == "True" else ""
            known = {p.incident for p in problems if f"pod {p.pod} " in shown}
        self._start_incidents = {p.incident for p in problems}
        return [p for p in problems if p.incident not in known]

    def _deletion_started(self) -> bool:
        """Asked of the API itself before a change or a new warning: the cache may show pods
        the garbage collector is deleting before it shows the cluster's own deletionTimestamp
        (separate watches), and a pass then would see members lost that are merely being deleted."""
        try:
            fresh = self.context.clusters.fetch(*self.key)
        except NotFound:
            return True
        if is_being_deleted(fresh):
            self.log.info("cluster is being deleted; leaving its objects to the garbage collector")
            self._deleting = True
            return True
        return False

    def _is_news(self, action: a.Action) -> bool:
        """Would this report's event be new (see `_new_incident`, which also records it)?"""
        return bool(action.event_reason) and action.event_type == "Warning" and \
            self._reported != (str(action.event_reason), action.describe())

    def _new_incident(self, raw: dict[str, Any], action: a.Action) -> bool:
        """Is the event of this action news? An action with an effect always is; a report (quorum
        lost, spec rejected, names refused) is one incident for as long as it stays the same,
        however many passes see it, and one the status already shows when we (re)started."""
        if action.has_effect:
            self._reported = None
            return True
        incident = (str(action.event_reason), action.describe())
        previous, self._reported = self._reported, incident
        if self._status_from_before:
            # Only a predecessor's status says it was reported: one written by a pass of ours
            # may carry the same reason without this report (an alarm keeps the status' reason
            # while the report changes, with waiting passes in between).
            return (raw.get("status") or {}).get("reason") != action.event_reason
        return previous != incident

    def _write_status(self, raw: dict[str, Any], observed: Any, action: a.Action, error: str | None) -> None:
        ctx = self.context
        status = _omit_empty(compute_status(observed, action, now=datetime.now(UTC), last_error=error))
        members = observed.members or ()
        ctx.metrics.set_cluster_members(
            observed.cluster.namespace, observed.cluster.name,
            members=len(members), ready=status.get("readyCount", 0), has_quorum=observed.quorum_available,
        )
        spec = observed.cluster.spec
        ctx.metrics.set_cluster_phase(observed.cluster.namespace, observed.cluster.name, status.get("phase", ""),
                                      desired_members=spec.size if spec is not None else None)
        if spec is not None:
            ctx.metrics.set_storage(
                observed.cluster.namespace, observed.cluster.name, quota_bytes=spec.effective_quota_bytes,
                alarms={alarm.kind for alarm in observed.alarms},
                members={name: (s.db_size, s.db_size_in_use) for name, s in observed.endpoint_status.items()})
        if "tls" in status:
            ctx.metrics.set_certificates(observed.cluster.namespace, observed.cluster.name, _not_after(status["tls"]))
        current = raw.get("status") or {}
        if status == current:
            return
        version = (raw.get("metadata") or {}).get("resourceVersion")
        try:
            # Against the version this pass read: a writer holding an older copy (a deposed
            # leader, a stale cache) is refused instead of overwriting a newer status. Written
            # through: the next pass compares against what we wrote.
            ctx.clusters.patch_status(observed.cluster.namespace, observed.cluster.name,
                                      status_merge_patch(current, status),
                                      resource_version=str(version) if version else None)
        except NotFound:
            return  # the cluster was deleted meanwhile
        except Conflict:
            # The cluster changed since this pass read it; its watch event wakes the next pass,
            # which writes the status from the newer copy.
            self.log.debug("status not written: the cluster changed since this pass read it")
            return
        warning = upgrade_source_event(observed, status)
        if warning:
            ctx.events.record(raw, "Warning", versions.REASON_UPGRADE_SOURCE_ONLY, warning)
        alarm = alarm_event(observed, status)
        if alarm is not None:
            ctx.events.record(raw, "Warning", *alarm)
        peer_view = peer_view_event(observed, status)
        if peer_view is not None:
            ctx.events.record(raw, "Warning", *peer_view)
        certificate = static_tls_event(observed, raw.get("status"), status)
        if certificate is not None:
            ctx.events.record(raw, "Warning", *certificate)
        previous_phase = (raw.get("status") or {}).get("phase")
        if status.get("phase") != previous_phase:
            self.log.info("phase %s -> %s: %s", previous_phase or "(none)", status.get("phase"), status.get("reason"))


def _not_after(tls: dict[str, Any]) -> dict[str, float]:
    """status.tls's notAfter of each certificate, in Unix seconds."""
    return {role: datetime.fromisoformat(entry["notAfter"]).timestamp()
            for role, entry in tls.items() if entry.get("notAfter")}


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
