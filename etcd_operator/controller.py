"""The etcd operator's controller: EtcdClusters are the primary kind; their pods, services and
PVCs (labelled with the cluster's name) the owned kinds; one `ClusterSupervisor` per cluster.
The watching, caching and worker threads are `operator_runtime.controller.Controller`'s."""
from __future__ import annotations

import logging
import threading

from etcd_common.api import constants as c
from etcd_common.api.resources import (
    CERT_MANAGER_CERTIFICATES,
    CERT_MANAGER_CLUSTER_ISSUERS,
    CERT_MANAGER_ISSUERS,
    ETCD_BACKUPS,
    ETCD_CLUSTERS,
)
from etcd_common.etcd.access import EtcdAccess
from etcd_operator.acting import ActionExecutor
from etcd_operator.failpoints import Failpoints
from etcd_operator.metrics import OperatorMetrics
from etcd_operator.observing import KubeSources
from etcd_operator.planning import PlanningPolicy
from etcd_operator.rechecking import CONTROLLER_RESYNC_MULTIPLE
from etcd_operator.recovery_inputs import NODES
from etcd_operator.settings import OperatorSettings
from etcd_operator.supervisor import ClusterSupervisor, SupervisorContext
from kube_adapter.client import KubeApi
from kube_adapter.events import EventRecorder
from kube_adapter.resources import (
    ENDPOINT_SLICES,
    EVENTS,
    PERSISTENT_VOLUME_CLAIMS,
    POD_DISRUPTION_BUDGETS,
    PODS,
    SECRETS,
    SERVICES,
    ResourceClient,
)
from operator_runtime import controller as runtime
from operator_runtime.cache import Key
from operator_runtime.cached_client import CachedClient
from operator_runtime.running import MayAct, always_may_act

log = logging.getLogger(__name__)

MEMBER_SELECTOR = f"{c.LABEL_APP}={c.LABEL_APP_VALUE},{c.LABEL_CLUSTER}"  # every object a cluster owns
EVENT_COMPONENT = "etcd-operator"
# operator_runtime's failures, as the metric's error reasons.
ERROR_REASONS = {runtime.WATCH_FAILED: "kube_api", runtime.WORKER_DIED: "supervisor_crash"}


class Controller:
    def __init__(self, api: KubeApi, settings: OperatorSettings, metrics: OperatorMetrics,
                 stop: threading.Event, *, may_act: MayAct = always_may_act) -> None:
        """`may_act` is asked before every action (leader election: is the lease surely ours?)."""
        self.settings = settings
        self.stop = stop
        self.metrics = metrics
        clusters = CachedClient(ResourceClient(api, ETCD_CLUSTERS))
        pods, services, pvcs, pdbs = (CachedClient(ResourceClient(api, resource)) for resource in
                                      (PODS, SERVICES, PERSISTENT_VOLUME_CLAIMS, POD_DISRUPTION_BUDGETS))
        secrets = ResourceClient(api, SECRETS)
        certificates = ResourceClient(api, CERT_MANAGER_CERTIFICATES)
        etcd = EtcdAccess(secrets.get, binary=settings.etcdctl_binary)
        self.context = SupervisorContext(
            clusters=clusters,
            kube=KubeSources(clusters, pods, services, pvcs, pdbs, events=ResourceClient(api, EVENTS),
                             slices=ResourceClient(api, ENDPOINT_SLICES), secrets=secrets,
                             etcd_backups=ResourceClient(api, ETCD_BACKUPS), certificates=certificates,
                             issuers=ResourceClient(api, CERT_MANAGER_ISSUERS),
                             cluster_issuers=ResourceClient(api, CERT_MANAGER_CLUSTER_ISSUERS),
                             nodes=ResourceClient(api, NODES)),
            executor=ActionExecutor(pods, services, pvcs, etcd, pdbs=pdbs, metrics=metrics, secrets=secrets,
                                    certificates=certificates,
                                    failpoints=Failpoints.from_environment(),
                                    fetch_image=settings.recovery_fetch_image),
            etcd=etcd,
            events=EventRecorder(api, component=EVENT_COMPONENT),
            metrics=metrics,
            resync_seconds=settings.resync_seconds,
            stop=stop,
            may_act=may_act,
            trusted_repositories=settings.trusted_repositories,
            policy=PlanningPolicy(unhealthy_member_timeout_seconds=settings.unhealthy_member_timeout_seconds,
                                  trust_propagation_seconds=settings.trust_propagation_seconds),
        )
        self._runtime = runtime.Controller(
            clusters.client, clusters.cache,
            [runtime.OwnedKind(owned.client, owned.cache, MEMBER_SELECTOR, c.LABEL_CLUSTER)
             for owned in (pods, services, pvcs, pdbs)],
            namespace=settings.namespace,
            make_worker=self._make_worker,
            resync_seconds=settings.resync_seconds * CONTROLLER_RESYNC_MULTIPLE,
            stop=stop,
            on_workers_changed=metrics.clusters_managed.set,
            on_deleted=self._forget,
            on_error=lambda what: metrics.count_error(ERROR_REASONS.get(what, "other")),
        )

    def _forget(self, key: Key) -> None:
        """The cluster is gone: its metrics series and the client keys written for it go too."""
        self.metrics.forget_cluster(*key)
        self.context.etcd.forget(*key)

    def _make_worker(self, key: Key) -> runtime.Worker:
        return ClusterSupervisor(key, self.context).worker

    def run(self) -> None:
        """Watch and supervise until `stop` is set; then stop every supervisor."""
        self._runtime.run()
