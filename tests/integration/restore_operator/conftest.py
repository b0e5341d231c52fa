"""The etcd operator and the restore operator deployed in the sandbox from this checkout's code."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from kube_sandbox.config import CHECKOUT_DIR
from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.backup_operator.conftest import backup_operator, backups, other_store  # noqa: F401 (fixtures)
from tests.integration.etcd_operator.conftest import clusters, operator  # noqa: F401 (fixtures)
from tests.integration.etcd_operator.operator_deployment import forbidden_lines
from tests.integration.restore_operator.restore_deployment import deploy_restore_operator, restore_operator_logs
from tests.sandbox_sharing import setup_lock

GROUP, VERSION, PLURAL = "etcd.database.coreos.com", "v1beta2", "etcdrestores"


@pytest.fixture(scope="session")
def restore_operator(operator: Sandbox) -> Sandbox:  # noqa: F811
    with setup_lock(operator.config.state_dir):
        root = Path(CHECKOUT_DIR)
        operator.kubectl("apply", "-f", str(root / "crds"))
        operator.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                         "crd/etcdrestores.etcd.database.coreos.com")
        operator.kubectl("api-resources", "--api-group=etcd.database.coreos.com")
        deploy_restore_operator(operator)
        wait_for(lambda: "became leader" in restore_operator_logs(operator), timeout=90,
                 what="restore operator leading")
    return operator


class Restores:
    """EtcdRestores of one test namespace."""

    def __init__(self, sandbox: Sandbox, namespace: str) -> None:
        self.sandbox = sandbox
        self.namespace = namespace
        self.custom = k8s.CustomObjectsApi(sandbox.api_client())
        self.core = k8s.CoreV1Api(sandbox.api_client())

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, body)
        return result

    def status(self, name: str) -> dict[str, Any]:
        obj = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)
        return dict(obj.get("status") or {})

    def wait_phase(self, name: str, phase: str, timeout: float = 240) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            status = self.status(name)
            if status.get("phase") in ("Completed", "Failed") and status.get("phase") != phase:
                raise AssertionError(f"restore {name} ended {status.get('phase')}, not {phase}: {status}")
            return status if status.get("phase") == phase else None
        try:
            return wait_for(reached, timeout=timeout, what=f"{self.namespace}/{name} {phase}", interval=1.0)
        except AssertionError:
            print(restore_operator_logs(self.sandbox)[-4000:])
            raise

    def events(self, name: str) -> list[Any]:
        selector = f"involvedObject.name={name},involvedObject.kind=EtcdRestore"
        return list(self.core.list_namespaced_event(self.namespace, field_selector=selector).items)

    def events_once_recorded(self, name: str, reasons: set[str], timeout: float = 30) -> list[Any]:
        """The restore's events, once one of each of `reasons` is there: the operator records an
        outcome's event after the status write that the test waited for."""
        def recorded() -> list[Any] | None:
            events = self.events(name)
            return events if reasons <= {event.reason for event in events} else None
        return wait_for(recorded, timeout=timeout, what=f"events {sorted(reasons)} of {self.namespace}/{name}",
                        interval=0.5)


@pytest.fixture
def restores(restore_operator: Sandbox, namespace: str) -> Iterator[Restores]:
    """EtcdRestores of this test's namespace; fails the test if the restore operator made a
    request its RBAC refused meanwhile."""
    before = set(forbidden_lines(restore_operator_logs(restore_operator)))
    yield Restores(restore_operator, namespace)
    new = [line for line in forbidden_lines(restore_operator_logs(restore_operator)) if line not in before]
    assert not new, "restore operator made forbidden requests:\n" + "\n".join(new[-5:])
