"""The restore operator's controller: EtcdRestores are the primary kind; the EtcdClusters it
created (labelled with the restore's name) wake their restore's supervisor when they change."""
from __future__ import annotations

import threading

from etcd_common.api import constants as c
from etcd_common.api.resources import ETCD_CLUSTERS, ETCD_RESTORES
from etcd_common.etcd.access import EtcdAccess
from kube_adapter.client import KubeApi
from kube_adapter.events import EventRecorder
from kube_adapter.resources import PERSISTENT_VOLUME_CLAIMS, PODS, SECRETS, ResourceClient
from operator_runtime import controller as runtime
from operator_runtime.cache import Key, ObjectCache
from operator_runtime.running import MayAct, always_may_act
from restore_operator.metrics import RestoreMetrics
from restore_operator.settings import RestoreSettings
from restore_operator.supervisor import RestoreSupervisor, SupervisorContext

EVENT_COMPONENT = "etcd-restore-operator"


class Controller:
    def __init__(self, api: KubeApi, settings: RestoreSettings, metrics: RestoreMetrics, stop: threading.Event,
                 *, may_act: MayAct = always_may_act) -> None:
        restores = ResourceClient(api, ETCD_RESTORES)
        clusters = ResourceClient(api, ETCD_CLUSTERS)
        secrets = ResourceClient(api, SECRETS)
        self.context = SupervisorContext(
            restores=ObjectCache(), restore_api=restores, clusters=clusters, pods=ResourceClient(api, PODS),
            claims=ResourceClient(api, PERSISTENT_VOLUME_CLAIMS),
            read_secret=secrets.get, etcd=EtcdAccess(secrets.get, binary=settings.etcdctl_binary),
            events=EventRecorder(api, component=EVENT_COMPONENT), metrics=metrics, settings=settings,
            stop=stop, may_act=may_act, secrets=secrets,
        )
        self._runtime = runtime.Controller(
            restores, self.context.restores,
            [runtime.OwnedKind(clusters, ObjectCache(), c.LABEL_RESTORE, c.LABEL_RESTORE)],
            namespace=settings.namespace,
            make_worker=self._make_worker,
            resync_seconds=settings.resync_seconds,
            stop=stop,
            on_workers_changed=metrics.restores_managed.set,
            on_error=lambda what: metrics.errors.labels(reason=what).inc(),
        )

    def _make_worker(self, key: Key) -> runtime.Worker:
        return RestoreSupervisor(key, self.context).worker

    def run(self) -> None:
        self._runtime.run()
