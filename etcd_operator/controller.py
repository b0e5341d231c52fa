"""The controller: watches EtcdClusters and their pods, services and PVCs, and runs one
supervisor thread per cluster (started on add, woken on any change, stopped on delete)."""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from etcd_common import constants as c
from etcd_operator.acting import ActionExecutor
from operator_runtime.cache import Key, ObjectCache, object_key
from etcd_common.etcd_access import EtcdAccess
from etcd_common.resources import ETCD_CLUSTERS
from kube_adapter.client import KubeApi
from kube_adapter.events import EventRecorder
from kube_adapter.resources import PERSISTENT_VOLUME_CLAIMS, PODS, SECRETS, SERVICES, ResourceClient
from kube_adapter.watching import DELETED, RELISTED, SYNC
from etcd_operator.metrics import OperatorMetrics
from etcd_operator.settings import OperatorSettings
from etcd_operator.supervisor import ClusterSupervisor, SupervisorContext

log = logging.getLogger(__name__)

MEMBER_SELECTOR = f"{c.LABEL_APP}={c.LABEL_APP_VALUE},{c.LABEL_CLUSTER}"  # every object a cluster owns
SUPERVISOR_JOIN_SECONDS = 10.0


class Controller:
    def __init__(self, api: KubeApi, settings: OperatorSettings, metrics: OperatorMetrics,
                 stop: threading.Event, *, may_act: Callable[[], bool] = lambda: True) -> None:
        """`may_act` is asked before every action (leader election: is the lease surely ours?)."""
        self.settings = settings
        self.stop = stop
        self.metrics = metrics
        self._clusters = ResourceClient(api, ETCD_CLUSTERS)
        self._pods = ResourceClient(api, PODS)
        self._services = ResourceClient(api, SERVICES)
        self._pvcs = ResourceClient(api, PERSISTENT_VOLUME_CLAIMS)
        self._secrets = ResourceClient(api, SECRETS)
        self._supervisors: dict[Key, ClusterSupervisor] = {}
        self._lock = threading.Lock()
        pods, services, pvcs = ObjectCache(), ObjectCache(), ObjectCache()
        etcd = EtcdAccess(self._secrets.get, binary=settings.etcdctl_binary)
        self.context = SupervisorContext(
            clusters=ObjectCache(), pods=pods, services=services, pvcs=pvcs,
            cluster_api=self._clusters,
            executor=ActionExecutor(self._pods, self._services, self._pvcs,
                                    etcd, pod_cache=pods, service_cache=services, pvc_cache=pvcs),
            etcd=etcd,
            events=EventRecorder(api, component="etcd-operator"),
            metrics=metrics,
            resync_seconds=settings.resync_seconds,
            stop=stop,
            may_act=may_act,
        )

    # --- running

    def run(self) -> None:
        """Watch and supervise until `stop` is set; then stop every supervisor."""
        ns = self.settings.namespace
        log.info("controller watching EtcdClusters in %s", ns or "all namespaces")
        ctx = self.context
        watches: list[tuple[str, Callable[[], None]]] = [
            ("pods", lambda: self._pods.watch(ns, MEMBER_SELECTOR, stop=self.stop,
                                              on_event=self._on_owned_event(ctx.pods))),
            ("services", lambda: self._services.watch(ns, MEMBER_SELECTOR, stop=self.stop,
                                                      on_event=self._on_owned_event(ctx.services))),
            ("pvcs", lambda: self._pvcs.watch(ns, MEMBER_SELECTOR, stop=self.stop,
                                              on_event=self._on_owned_event(ctx.pvcs))),
            ("etcdclusters", lambda: self._clusters.watch(ns, stop=self.stop, on_event=self._on_cluster_event)),
        ]
        threads = [threading.Thread(target=self._guard(name, fn), name=f"watch {name}", daemon=True)
                   for name, fn in watches]
        for thread in threads:
            thread.start()
        resync = threading.Thread(target=self._resync_loop, name="resync", daemon=True)
        resync.start()
        self.stop.wait()
        log.info("controller stopping %d supervisors", len(self._supervisors))
        with self._lock:
            supervisors = list(self._supervisors.values())
        for supervisor in supervisors:
            supervisor.stop()
        for supervisor in supervisors:
            supervisor.join(SUPERVISOR_JOIN_SECONDS)

    def _guard(self, name: str, fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            while not self.stop.is_set():
                try:
                    fn()
                except Exception:  # a watch must never die silently
                    log.exception("watch %s failed; restarting it", name)
                    self.metrics.count_error("kube_api")
                    self.stop.wait(1.0)
        return run

    def _resync_loop(self) -> None:
        """Safety net: wake every supervisor periodically even if no event arrives."""
        while not self.stop.wait(self.settings.resync_seconds):
            with self._lock:
                supervisors = list(self._supervisors.values())
            for supervisor in supervisors:
                if not supervisor.alive():
                    log.error("supervisor %s/%s died; restarting it", *supervisor.key)
                    self.metrics.count_error("supervisor_crash")
                    self._restart_supervisor(supervisor.key)
                else:
                    supervisor.notify()

    # --- events

    def _on_cluster_event(self, event_type: str, obj: dict[str, Any]) -> None:
        cache = self.context.clusters
        if event_type == RELISTED:
            live = {tuple(k.split("/", 1)) if "/" in k else ("", k) for k in obj.get("keys", [])}
            for key in cache.keys():
                if key not in live:
                    cache.remove({"metadata": {"namespace": key[0], "name": key[1]}})
                    self._stop_supervisor(key)
            cache.mark_synced()
            return
        if event_type == DELETED:
            key = cache.remove(obj)
            self._stop_supervisor(key)
            return
        key = cache.upsert(obj)
        self._ensure_supervisor(key).notify()

    def _on_owned_event(self, cache: ObjectCache) -> Callable[[str, dict[str, Any]], None]:
        def handle(event_type: str, obj: dict[str, Any]) -> None:
            if event_type == RELISTED:
                live = set(obj.get("keys", []))
                for key in cache.keys():
                    if f"{key[0]}/{key[1]}" not in live:
                        cache.remove({"metadata": {"namespace": key[0], "name": key[1]}})
                        self._notify_owner(key[0], None)
                cache.mark_synced()
                return
            if event_type == DELETED:
                cache.remove(obj)
            else:
                cache.upsert(obj)
            if event_type != SYNC:
                labels = (obj.get("metadata") or {}).get("labels") or {}
                self._notify_owner(object_key(obj)[0], labels.get(c.LABEL_CLUSTER))
        return handle

    def _notify_owner(self, namespace: str, cluster: str | None) -> None:
        with self._lock:
            if cluster is None:
                targets = [s for k, s in self._supervisors.items() if k[0] == namespace]
            else:
                supervisor = self._supervisors.get((namespace, cluster))
                targets = [supervisor] if supervisor else []
        for supervisor in targets:
            supervisor.notify()

    # --- supervisors

    def _ensure_supervisor(self, key: Key) -> ClusterSupervisor:
        with self._lock:
            supervisor = self._supervisors.get(key)
            if supervisor is None:
                supervisor = ClusterSupervisor(key, self.context)
                self._supervisors[key] = supervisor
                supervisor.start()
                self.metrics.clusters_managed.set(len(self._supervisors))
            return supervisor

    def _restart_supervisor(self, key: Key) -> None:
        with self._lock:
            self._supervisors.pop(key, None)
        self._ensure_supervisor(key).notify()

    def _stop_supervisor(self, key: Key) -> None:
        with self._lock:
            supervisor = self._supervisors.pop(key, None)
            self.metrics.clusters_managed.set(len(self._supervisors))
        if supervisor:
            supervisor.stop()
            self.metrics.forget_cluster(*key)
            log.info("%s/%s deleted; supervisor stopped", *key)
