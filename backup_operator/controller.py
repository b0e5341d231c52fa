"""The backup operator's controller: EtcdBackups are the primary (and only) kind, one
`BackupSupervisor` per EtcdBackup. Watching, caching and worker threads are
`operator_runtime.controller.Controller`'s."""
from __future__ import annotations

import logging
import threading

from backup_operator.endpoint_policy import DEFAULT_POLICY, EndpointPolicy
from backup_operator.metrics import BackupMetrics
from backup_operator.settings import BackupOperatorSettings
from backup_operator.slots import BackupSlots
from backup_operator.supervisor import BackupSupervisor, SupervisorContext
from backup_operator.taking import BackupEnvironment, WorkSpace, remove_stale_snapshots
from etcd_common.api.resources import ETCD_BACKUPS, ETCD_CLUSTERS
from etcd_common.etcd.access import EtcdAccess
from kube_adapter.client import KubeApi
from kube_adapter.events import EventRecorder
from kube_adapter.resources import SECRETS, SERVICES, ResourceClient
from operator_runtime import controller as runtime
from operator_runtime.cache import Key, ObjectCache
from operator_runtime.running import MayAct, always_may_act

log = logging.getLogger(__name__)

EVENT_COMPONENT = "etcd-backup-operator"


def backup_environment(api: KubeApi, *, work_dir: str, etcdctl_binary: str | None,
                       etcdutl_binary: str | None, endpoint_policy: EndpointPolicy = DEFAULT_POLICY,
                       etcd_binary: str | None = None, allow_pod_identity: bool = False,
                       work_dir_size_limit_bytes: int | None = None,
                       check_etcd_endpoints: bool = False) -> BackupEnvironment:
    """What taking a backup needs, with this API client (shared by the operator and `etcd-backup`)."""
    secrets = ResourceClient(api, SECRETS)
    return BackupEnvironment(
        read_secret=secrets.get,
        read_etcd_cluster=ResourceClient(api, ETCD_CLUSTERS).get,
        etcd=EtcdAccess(secrets.get, binary=etcdctl_binary),
        work_dir=work_dir,
        etcdutl_binary=etcdutl_binary,
        etcd_binary=etcd_binary,
        etcdctl_binary=etcdctl_binary,
        endpoint_policy=endpoint_policy,
        allow_pod_identity=allow_pod_identity,
        work_space=WorkSpace(size_limit_bytes=work_dir_size_limit_bytes),
        read_service=ResourceClient(api, SERVICES).get,
        check_etcd_endpoints=check_etcd_endpoints,
    )


class Controller:
    def __init__(self, api: KubeApi, settings: BackupOperatorSettings, metrics: BackupMetrics,
                 stop: threading.Event, *, may_act: MayAct = always_may_act) -> None:
        backups = ResourceClient(api, ETCD_BACKUPS)
        remove_stale_snapshots(settings.work_dir, log)
        metrics.max_concurrent_backups.set(settings.max_concurrent_backups)
        self.slots = BackupSlots(settings.max_concurrent_backups, on_change=metrics.observe_slots)
        self.context = SupervisorContext(
            backups=ObjectCache(),
            backup_api=backups,
            environment=backup_environment(api, work_dir=settings.work_dir, etcdctl_binary=settings.etcdctl_binary,
                                           etcdutl_binary=settings.etcdutl_binary,
                                           endpoint_policy=settings.endpoint_policy,
                                           etcd_binary=settings.etcd_binary,
                                           allow_pod_identity=settings.allow_pod_identity,
                                           work_dir_size_limit_bytes=settings.work_dir_size_limit_bytes,
                                           check_etcd_endpoints=True),
            events=EventRecorder(api, component=EVENT_COMPONENT),
            metrics=metrics,
            stop=stop,
            may_act=may_act,
            endpoint_policy=settings.endpoint_policy,
            slots=self.slots,
            min_interval_seconds=settings.min_backup_interval_seconds,
        )
        self._runtime = runtime.Controller(
            backups, self.context.backups, [],
            namespace=settings.namespace,
            make_worker=self._make_worker,
            resync_seconds=settings.resync_seconds,
            stop=stop,
            on_workers_changed=metrics.backups_managed.set,
            on_deleted=self._forget,
        )

    def _forget(self, key: Key) -> None:
        """A deleted EtcdBackup: its series go, and its place in the backup queue."""
        self.context.metrics.forget(*key)
        self.slots.leave(key)

    def _make_worker(self, key: Key) -> runtime.Worker:
        return BackupSupervisor(key, self.context).worker

    def run(self) -> None:
        self._runtime.run()
