"""The pass of one EtcdRestore: observe -> plan one action -> act (the executor writes the status
it leads to) (run by its `operator_runtime.worker.ObjectWorker` thread). Progress lives in the
restore's status, its staging claims and pods, and on the EtcdCluster (the restore's uid), so a
restart at any point continues where it was."""
from __future__ import annotations

import logging
import time

from etcd_common.api.etcd_restore import parse_etcd_restore
from etcd_common.etcd import etcdctl as ctl
from etcd_common.storage.objects import StorageError
from kube_adapter.errors import KubeError
from operator_runtime.cache import Key
from operator_runtime.logs import object_logger
from operator_runtime.worker import ObjectWorker
from restore_operator import actions as a
from restore_operator.acting import WAIT_POLL_SECONDS, ActionExecutor, RestorePass, SupervisorContext
from restore_operator.metrics import error_kind
from restore_operator.observing import observe_restore
from restore_operator.planning import plan_next_action
from restore_operator.preflight import RestorePolicy

__all__ = ["RestoreSupervisor", "SupervisorContext"]

# The longest one action may take before its effect is in (a status write, the cluster's delete
# or create, the staging objects' creation, each with the API's retries): it is started only while
# the lease stays surely ours at least that long.
ACTION_MAX_SECONDS = 10.0


class RestoreSupervisor:
    def __init__(self, key: Key, context: SupervisorContext) -> None:
        self.key = key
        self.context = context
        self.log = object_logger(key[0], key[1], logging.getLogger(__name__), field="restore")
        self._started = time.monotonic()
        settings = context.settings
        self.policy = RestorePolicy(fetch_image=settings.fetch_image, bump_revision=settings.bump_revision,
                                    trusted_repositories=settings.trusted_repositories)
        self.executor = ActionExecutor(key, context, self.log)
        self.worker = ObjectWorker(key, self.reconcile_once, stop=context.stop, log=self.log, role="restore",
                                   on_pass=self._count_pass, expected_errors=(KubeError, StorageError, ctl.EtcdctlError))

    def _count_pass(self, seconds: float, error: Exception | None) -> None:
        if error is not None:
            self.context.metrics.errors.labels(reason=error_kind(error)).inc()

    def reconcile_once(self) -> float:
        ctx = self.context
        raw = ctx.restores.get(self.key)
        if raw is None:
            return ctx.settings.resync_seconds
        restore = parse_etcd_restore(raw)
        observed = observe_restore(restore, raw, clusters=ctx.clusters, pods=ctx.pods, etcd=ctx.etcd,
                                   claims=ctx.claims, find_restore=lambda ns, name: ctx.restores.get((ns, name)))
        action = plan_next_action(observed, self.policy)
        if not self._may_act(action):
            return WAIT_POLL_SECONDS
        delay = self.executor.execute(action, RestorePass(raw, restore, observed))
        return ctx.settings.resync_seconds if delay is None else delay

    def _may_act(self, action: a.Action) -> bool:
        """An action with an effect starts only while the lease stays surely ours ACTION_MAX_SECONDS:
        a deposed leader's late delete or create would race its successor's."""
        if not action.has_effect:
            return True
        if not self.context.may_act(ACTION_MAX_SECONDS):
            self.log.warning("not acting (%s): leadership not confirmed for the next %.0fs", action.describe(),
                             ACTION_MAX_SECONDS)
            return False
        self.log.info("%s", action.describe())
        return True
