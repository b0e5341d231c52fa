"""The CronJob example runs `etcd-backup` on the real cronjob controller twice; each run writes a
new object and retention applies."""
from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from etcd_common.storage import s3
from kube_sandbox.config import CHECKOUT_DIR
from kube_sandbox.testing import wait_for
from tests.integration.backup_operator.backups import Backups
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster

pytestmark = pytest.mark.sandbox


def example_for(namespace: str, endpoint: str, path: str) -> list[dict[str, Any]]:
    """examples/backup-cronjob.yaml for this namespace and the sandbox's S3, every minute, keeping one."""
    documents = [d for d in yaml.safe_load_all((CHECKOUT_DIR / "examples" / "backup-cronjob.yaml").read_text()) if d]
    for document in documents:
        if document["kind"] == "RoleBinding":
            document["subjects"][0]["namespace"] = namespace
        if document["kind"] == "CronJob":
            spec = document["spec"]
            assert spec["concurrencyPolicy"] == "Forbid"
            assert spec["successfulJobsHistoryLimit"] >= 1 and spec["failedJobsHistoryLimit"] >= 1
            spec["schedule"] = "* * * * *"
            container = spec["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
            overrides = {"S3_ENDPOINT": endpoint, "S3_PATH": path, "MAX_BACKUPS": "1"}
            for variable in container["env"]:
                variable["value"] = overrides.get(variable["name"], variable.get("value"))
                if variable.get("value") is None:
                    variable.pop("value")
    return documents


def test_cronjob_example_backs_up_twice_and_applies_retention(
    backups: Backups, clusters: Clusters, storage: s3.S3Storage, bucket: str,
) -> None:
    ns = clusters.namespace
    # The example's pods pass the `restricted` Pod Security Standard (enforced by the real admission plugin).
    clusters.core.patch_namespace(ns, {"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}})
    clusters.create(etcd_cluster("example-etcd-cluster", 1))
    clusters.wait_running("example-etcd-cluster", 1, timeout=180)
    backups.create_aws_secret("sandbox-aws")
    documents = example_for(ns, backups.sandbox.config.s3_endpoint, f"{bucket}/cron/example.backup")
    backups.sandbox.kubectl("-n", ns, "apply", "-f", "-", input=yaml.safe_dump_all(documents))
    batch = k8s.BatchV1Api(backups.sandbox.api_client())

    def two_succeeded() -> list[Any] | None:
        jobs = [j for j in batch.list_namespaced_job(ns).items if (j.status.succeeded or 0) >= 1]
        failed = [j.metadata.name for j in batch.list_namespaced_job(ns).items if (j.status.failed or 0) >= 1]
        assert not failed, f"backup jobs failed: {failed}: " + backups.sandbox.kubectl(
            "-n", ns, "logs", f"job/{failed[0]}", check=False).stdout[-2000:]
        return sorted(jobs, key=lambda j: j.metadata.creation_timestamp) if len(jobs) >= 2 else None
    jobs = wait_for(two_succeeded, timeout=240, what="two CronJob runs succeeded")
    backups.sandbox.kubectl("-n", ns, "patch", "cronjob/example-etcd-cluster-backup", "--type=merge",
                            "-p", '{"spec":{"suspend":true}}')

    # A run that started before the suspend finishes; then the object store is looked at.
    wait_for(lambda: not any((j.status.active or 0) for j in batch.list_namespaced_job(ns).items) or None,
             timeout=120, what="no backup job running")
    jobs = two_succeeded() or []
    outputs = []
    for job in jobs:
        lines = backups.sandbox.kubectl("-n", ns, "logs", f"job/{job.metadata.name}").stdout.strip().splitlines()
        outputs.append(json.loads(lines[-1]))
    assert all(output["result"] == "succeeded" for output in outputs), outputs
    objects = [output["object"] for output in outputs]
    assert len(set(objects)) == len(objects) >= 2, objects
    # Retention (MAX_BACKUPS=1): only the last run's object is left.
    keys = [o.key for o in storage.list(bucket, "cron/")]
    assert [f"s3://{bucket}/{key}" for key in keys] == objects[-1:], (keys, objects)
    assert outputs[-1]["retained"] == 1
