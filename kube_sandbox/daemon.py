"""The sandbox daemon: runs inside the private mount namespace and owns every sandbox process.

Started by `python -m kube_sandbox up` (never by hand); stops everything on SIGTERM.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from kubernetes import client as k8s

from kube_sandbox import binaries
from kube_sandbox.certs import admin_token
from kube_sandbox.config import CHECKOUT_DIR, CLUSTER_DOMAIN, HOST_IP, NODE_NAMES, SandboxConfig
from kube_sandbox.control_api import ControlApiServer
from kube_sandbox.control_plane import ControlPlane
from kube_sandbox.kubelet import KubeletSettings, ProcessKubelet
from kube_sandbox.namespace import bind_hosts_file, bind_resolv_conf
from kube_sandbox.stores import Store, sandbox_stores, store_named, wait_until_listening

log = logging.getLogger("kube_sandbox.daemon")

NODE_REGISTRATION_SECONDS = 30.0
STORE_START_SECONDS = 30.0


def admin_api_client(config: SandboxConfig) -> k8s.ApiClient:
    configuration = k8s.Configuration()
    configuration.host = config.apiserver_url
    configuration.ssl_ca_cert = str(config.ca_cert)
    configuration.api_key = {"authorization": f"Bearer {admin_token(config)}"}
    return k8s.ApiClient(configuration)


def kubelet_settings(config: SandboxConfig) -> KubeletSettings:
    return KubeletSettings(
        node_names=NODE_NAMES, host_ip=HOST_IP, pod_ip_prefix=config.pod_ip_prefix,
        state_dir=config.kubelet_dir, hosts_file=config.hosts_file,
        apiserver_host=HOST_IP, apiserver_port=config.apiserver_port, ca_cert=config.ca_cert,
        venv_bin_dir=config.venv_bin_dir, source_dir=CHECKOUT_DIR, cluster_domain=CLUSTER_DOMAIN,
        kubelet_port=config.kubelet_port, etcd_binaries=binaries.etcd_binaries(),
        dns_address=config.dns_address, kubelet_version=f"v{binaries.kube_version()}", use_cgroups=True,
    )


def run(config: SandboxConfig) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    started = time.monotonic()
    log.info("sandbox daemon pid %d, state dir %s", os.getpid(), config.state_dir)

    bind_hosts_file(config.hosts_file)
    if not bind_resolv_conf(config.resolv_conf, config.dns_address):
        log.warning("no /etc/resolv.conf on this machine to point at the cluster DNS server")
    control_plane = ControlPlane(config, stop)
    stores = sandbox_stores(config)
    kubelet: ProcessKubelet | None = None
    server: ControlApiServer | None = None
    ready = threading.Event()
    try:
        for store in stores.values():  # they start (Azurite: about 4 s) while the control plane does
            store.process.start()
        control_plane.start()
        kubelet = ProcessKubelet(admin_api_client(config), kubelet_settings(config))
        kubelet.start()
        if not kubelet.wait_until_registered(NODE_REGISTRATION_SECONDS):
            log.warning("not every node registered within %.0fs; going on", NODE_REGISTRATION_SECONDS)
        late = wait_until_listening(stores, STORE_START_SECONDS)
        if late:
            log.warning("stores not listening within %.0fs: %s; going on", STORE_START_SECONDS, ", ".join(late))
        server = ControlApiServer(config.control_api_port, lambda: _status(ready, control_plane, stores),
                                  {**_actions(kubelet, control_plane), **_store_actions(stores, control_plane)})
        server.start()
        ready.set()
        log.info("sandbox ready in %.1fs", time.monotonic() - started)
        while not stop.wait(1.0):
            _restart_exited(control_plane, stores, stop)
    except Exception:
        log.exception("sandbox daemon failed")
        return 1
    finally:
        log.info("stopping the sandbox")
        if server:
            server.stop()
        if kubelet:
            kubelet.stop()
        for store in stores.values():
            store.process.stop()
        control_plane.stop()
    return 0


def _restart_exited(control_plane: ControlPlane, stores: dict[str, Store], stop: threading.Event) -> None:
    """The watchdog: restart a control-plane process or store that exited (not one an outage fault stopped)."""
    with control_plane.lock:
        for process in (*control_plane.processes(), *(s.process for s in stores.values() if not s.stopped)):
            if not process.running() and not stop.is_set():
                log.error("%s exited unexpectedly; restarting it:\n%s", process.name, process.tail())
                process.start()


def _status(ready: threading.Event, control_plane: ControlPlane, stores: dict[str, Store]) -> dict[str, Any]:
    return {
        "ready": ready.is_set(),
        "pid": os.getpid(),
        "components": {
            **{process.name: process.running() for process in control_plane.processes()},
            **{name: store.process.running() or store.stopped for name, store in stores.items()},
        },
        "stores": {name: {"endpoint": store.endpoint, "running": store.process.running(), "stopped": store.stopped}
                   for name, store in stores.items()},
    }


def body_field(body: dict[str, Any], name: str) -> str:
    if not isinstance(body.get(name), str):
        raise ValueError(f"the request needs a string field {name!r}")
    return str(body[name])


def _actions(kubelet: ProcessKubelet, control_plane: ControlPlane) -> dict[str, Any]:
    def container_args(body: dict[str, Any]) -> tuple[str, str, str]:
        return body_field(body, "namespace"), body_field(body, "pod"), body_field(body, "container")

    return {
        "crash-container": lambda b: kubelet.crash_container(*container_args(b)),
        "freeze-container": lambda b: kubelet.freeze_container(*container_args(b)),
        "thaw-container": lambda b: kubelet.thaw_container(*container_args(b)),
        "pod-pid": lambda b: kubelet.pod_process_pid(*container_args(b)),
        "stop-node": lambda b: kubelet.stop_node(body_field(b, "node")),
        "start-node": lambda b: kubelet.start_node(body_field(b, "node")),
        "restart-apiserver": lambda b: control_plane.restart_apiserver(),
        "partition": lambda b: kubelet.partition(pod_list(b, "from"), pod_list(b, "to"), not b.get("oneWay")),
        "isolate-pod": lambda b: kubelet.isolate(body_field(b, "namespace"), body_field(b, "pod")),
        "heal": lambda b: kubelet.heal(b.get("id")),
        "cap-memory": lambda b: kubelet.cap_memory(*container_args(b), b.get("limitBytes")),
        "fill-volume": lambda b: kubelet.fill_volume(body_field(b, "namespace"), body_field(b, "claim"),
                                                     b.get("leaveBytes")),
        "slow-disk": lambda b: kubelet.slow_disk(body_field(b, "namespace"), body_field(b, "pod"),
                                                 b.get("writeIops"), b.get("writeBytesPerSecond")),
    }


def pod_list(body: dict[str, Any], name: str) -> list[tuple[str, str]]:
    """A body field listing pods as {"namespace": ..., "pod": ...} objects."""
    pods = body.get(name)
    if not isinstance(pods, list) or not pods:
        raise ValueError(f"the request needs a non-empty list {name!r} of {{namespace, pod}} objects")
    return [(body_field(p, "namespace"), body_field(p, "pod")) for p in pods]


def _store_actions(stores: dict[str, Store], control_plane: ControlPlane) -> dict[str, Any]:
    """The outage fault of one store (body {"store": "s3" | "abs" | "gcs"}): stop it (it stays
    down) and start it again."""
    def stop_store(body: dict[str, Any]) -> None:
        store = store_named(stores, body_field(body, "store"))
        with control_plane.lock:
            store.stopped = True
            store.process.stop()

    def start_store(body: dict[str, Any]) -> None:
        store = store_named(stores, body_field(body, "store"))
        with control_plane.lock:
            if not store.process.running():
                store.process.start()
            store.stopped = False

    return {"stop-store": stop_store, "start-store": start_store}


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run(SandboxConfig.from_env())


if __name__ == "__main__":
    sys.exit(main())
