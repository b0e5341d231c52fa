"""The operator under test runs as a Deployment in the sandbox, under the shipped RBAC."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kube_sandbox.config import CHECKOUT_DIR
from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.etcd_operator.operator_clusters import Clusters
from tests.integration.etcd_operator.operator_deployment import deploy_operator, forbidden_lines, operator_logs
from tests.sandbox_sharing import setup_lock


@pytest.fixture(scope="session")
def operator(sandbox: Sandbox) -> Sandbox:
    """CRDs installed and the operator deployed from this checkout's code (reuses a running
    Deployment if it runs the same sources, rolls it otherwise)."""
    with setup_lock(sandbox.config.state_dir):
        root = Path(CHECKOUT_DIR)
        sandbox.kubectl("apply", "-f", str(root / "crds"))
        sandbox.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                        "crd/etcdclusters.etcd.database.coreos.com")
        # kubectl caches API discovery; refresh it so the new kind and its short name `etcd` resolve.
        sandbox.kubectl("api-resources", "--api-group=etcd.database.coreos.com")
        for manifest in ("namespace.yaml", "rbac.yaml"):
            sandbox.kubectl("apply", "-f", str(root / "deploy" / manifest))
        # A reused sandbox may run an operator pod started from older code: roll it onto this checkout's.
        print(f"\n{deploy_operator(sandbox)}")
        wait_for(lambda: "became leader" in operator_logs(sandbox), timeout=60, what="operator leading")
    return sandbox


@pytest.fixture
def clusters(operator: Sandbox, namespace: str) -> Iterator[Clusters]:
    """EtcdClusters in this test's namespace; fails the test if the operator hit a forbidden request
    (one the shipped RBAC does not allow) while the test ran."""
    before = set(forbidden_lines(operator_logs(operator)))
    yield Clusters(operator, namespace)
    new = [line for line in forbidden_lines(operator_logs(operator)) if line not in before]
    assert not new, "operator made forbidden requests:\n" + "\n".join(new[-5:])
