"""The decision: `plan_next_action(observed) -> Action`, a pure function of one pass's
observation (`observed.py`); the actions are in `actions.py`.

Rules, first match wins:

 1. A spec that cannot be acted on (unreadable, no etcd source or two of them, an etcd or
    object-store endpoint the administrator's `EndpointPolicy` does not allow) ->
    RejectSpec, once per generation and reason; after that -> Done until the spec changes (or,
    for an endpoint, until the operator runs with a wider allowance).
 2. Otherwise the schedule decides (`schedule.next_backup`): TakeBackup when a backup is due,
    Wait until it is, or Done (a one-shot backup taken, given up, or waiting for a fix).
 3. When no backup is due and spec.trialRestore asks for it, a trial restore of the newest
    backup (`verification.next_trial_restore`): RestoreOnTrial when due, else the earlier wait.
"""
from __future__ import annotations

from backup_operator import reasons
from backup_operator.actions import Action, Done, RejectSpec, TakeBackup, Wait
from backup_operator.endpoint_policy import (
    DEFAULT_POLICY,
    EndpointPolicy,
    etcd_endpoint_refusal,
    location_endpoint_refusal,
)
from backup_operator.observed import ObservedBackup
from backup_operator.schedule import next_backup
from backup_operator.verification import next_trial_restore
from etcd_common.api.etcd_backup import EtcdBackup


def plan_next_action(observed: ObservedBackup, policy: EndpointPolicy = DEFAULT_POLICY,
                     min_interval_seconds: float = 0) -> Action:
    backup, recorded = observed.backup, observed.recorded
    problem = spec_problem(backup, policy)
    if problem is not None:
        reason, message = problem
        if recorded.observed_generation == backup.generation and recorded.last_reason == reason:
            return Done(f"waiting for the spec to be fixed ({reason})")
        return RejectSpec(reason, message)
    assert backup.spec is not None
    action = next_backup(backup.spec, backup.generation, recorded, observed.now, min_interval_seconds)
    if isinstance(action, TakeBackup):
        return action
    trial = next_trial_restore(backup.spec.trial_restore, observed.last_backup, observed.trial, observed.now)
    if trial is None or (isinstance(action, Wait) and isinstance(trial, Wait) and action.seconds <= trial.seconds):
        return action
    return trial


def spec_problem(backup: EtcdBackup, policy: EndpointPolicy = DEFAULT_POLICY) -> tuple[str, str] | None:
    """A reason and message when the spec cannot be acted on at all, else None."""
    if backup.spec is None:
        return reasons.INVALID_SPEC, backup.spec_error or "spec is invalid"
    spec = backup.spec
    if not spec.etcd_endpoints and not spec.etcd_cluster_name:
        return reasons.INVALID_SPEC, "one of spec.etcdEndpoints or spec.etcdCluster.name is required"
    if spec.etcd_endpoints and spec.etcd_cluster_name:
        return reasons.INVALID_SPEC, "spec.etcdEndpoints and spec.etcdCluster.name are mutually exclusive"
    return endpoint_problem(backup, policy)


def endpoint_problem(backup: EtcdBackup, policy: EndpointPolicy) -> tuple[str, str] | None:
    """EndpointNotAllowed for the first etcd or object-store endpoint of the spec that `policy` refuses
    (`spec.etcdCluster.name` always names a cluster of the EtcdBackup's own namespace)."""
    assert backup.spec is not None
    for index, url in enumerate(backup.spec.etcd_endpoints):
        refusal = etcd_endpoint_refusal(url, backup.namespace, policy)
        if refusal is not None:
            return reasons.ENDPOINT_NOT_ALLOWED, f"spec.etcdEndpoints[{index}]: {refusal}"
    storage = backup.spec.storage
    refusal = location_endpoint_refusal(storage.storage_type, storage.endpoint, policy,
                                        where=f"spec.{storage.section}.endpoint")
    if refusal is not None:
        return reasons.ENDPOINT_NOT_ALLOWED, refusal
    return None
