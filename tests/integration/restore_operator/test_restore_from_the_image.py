"""Restores with the operators run from the built image, as `make demo` runs them (in runc, as their
users; the seed pods' fetch image is that image), under the name it is built with and relocated to
another repository: each etcd version (3.4's etcdctl, 3.5's and 3.6's etcdutl) restores exactly its
backed-up keys. Issue 41: the seed pods failed to move the staged data (Permission denied: etcd's
tools ran as root, the image's installer as the pod's user), and an etcd operator deployed with the
manifests' `etcd-operator-py` refused the fetch image's `localhost/` name (UntrustedImage)."""
from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from kube_sandbox.binaries import DEBIAN_ETCD_VERSION, newest_etcd_version
from kube_sandbox.testing import Sandbox
from tests.integration.backup_operator.backups import Backups, etcd_backup
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
from tests.integration.etcd_operator.operator_deployment import deploy_operator, wait_operator_leading
from tests.integration.packaging.built_image import local_image_reference, relocated_image
from tests.integration.restore_operator.conftest import Restores
from tests.integration.restore_operator.restore_deployment import deploy_restore_operator
from tests.integration.restore_operator.restore_steps import RESTORE_TIMEOUT, coreos_restore_cr, keys_of
from tests.integration.restore_operator.snapshots import BUCKET, ensure_bucket, unique_key
from tests.sandbox_sharing import require_alone

pytestmark = [pytest.mark.sandbox, pytest.mark.alone,
              pytest.mark.skipif(os.geteuid() != 0, reason="builds with buildah's root storage and runs runc")]

VERSIONS = {"3.4": DEBIAN_ETCD_VERSION, "3.5": newest_etcd_version("3.5"), "3.6": newest_etcd_version("3.6")}


@pytest.fixture(params=["built", "relocated"])
def image(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """(how it is named, the image): as built, or relocated to a repository no default trusts (only
    the operators' OPERATOR_IMAGE does), untagged again after the test."""
    if request.param == "relocated":
        with relocated_image("platform-team/mirror/etcd-operator-py") as name:
            yield request.param, name
    else:
        yield request.param, ":".join(local_image_reference())


def test_each_version_restores_with_the_operators_from_the_image(
        backup_operator: Sandbox, backups: Backups, clusters: Clusters, restores: Restores,
        image: tuple[str, str]) -> None:
    require_alone("running the etcd and restore operators from the image")
    named, image_name = image
    sandbox, ns = clusters.sandbox, clusters.namespace
    ensure_bucket(sandbox)
    names = {minor: f"{named}-{minor.replace('.', '-')}" for minor in VERSIONS}
    for minor, version in VERSIONS.items():  # all three at once: the operators work on them side by side
        clusters.create(etcd_cluster(names[minor], 3, version=version))
    backed_up: dict[str, dict[str, str]] = {}
    paths: dict[str, str] = {}
    for minor, name in names.items():
        clusters.wait_running(name, 3, timeout=180)
        backed_up[minor] = {f"v{minor}/{index}": f"value-{index}" for index in range(10)}
        for key, value in backed_up[minor].items():
            clusters.put(name, key, value)
        paths[minor] = f"{BUCKET}/{unique_key(f'{named}-{minor}')}"
        backups.create(etcd_backup(f"backup-{name}", {
            "etcdEndpoints": [f"http://{name}-client.{ns}.svc:2379"], "storageType": "S3",
            "s3": backups.s3_spec(paths[minor])}))
    for minor, name in names.items():
        backups.wait_succeeded(f"backup-{name}")
        clusters.put(name, f"v{minor}/after-backup", "not in the backup")

    deploy_operator(sandbox, image=image_name)
    deploy_restore_operator(sandbox, image=image_name)
    try:
        wait_operator_leading(sandbox)
        for minor, name in names.items():
            restores.create(coreos_restore_cr(name, paths[minor], "aws", sandbox.config.s3_endpoint))
        for minor, name in names.items():
            status = restores.wait_phase(name, "Completed", timeout=RESTORE_TIMEOUT)
            assert status["succeeded"] is True, status
            running = clusters.wait_running(name, 3, timeout=120)
            assert running["currentVersion"] == VERSIONS[minor], running
            assert keys_of(clusters, name) == backed_up[minor]
            # The seed member's fetch and install steps ran the image, in runc.
            seeded = [status for pod in clusters.live_pods(name) for status in pod.status.init_container_statuses or ()
                      if status.image == image_name]
            assert seeded and all(s.state.terminated.exit_code == 0 for s in seeded), \
                [pod.status.init_container_statuses for pod in clusters.live_pods(name)]
            assert all(s.container_id.startswith("runc://") for s in seeded), seeded
    finally:
        deploy_restore_operator(sandbox)
        deploy_operator(sandbox)
        wait_operator_leading(sandbox)
