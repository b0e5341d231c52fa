"""The CronJob example runs `etcd-backup` on the real cronjob controller twice; each run writes a
new object and retention applies. And on each other store (ABS, GCS, OSS): the same CronJob with
that store's variables, run once as `kubectl create job --from=cronjob/...` does, writes a backup
holding exactly the cluster's keys."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from etcd_common.storage import s3
from etcd_common.storage.locations import SCHEMES
from kube_sandbox.config import CHECKOUT_DIR
from kube_sandbox.testing import wait_for
from tests.integration.backup_operator.backups import Backups, keys_in_snapshot
from tests.integration.backup_operator.stores import SECRET, SandboxStore, download
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster

pytestmark = pytest.mark.sandbox

EXAMPLE = CHECKOUT_DIR / "examples" / "backup-cronjob.yaml"
CRONJOB = "example-etcd-cluster-backup"
S3_VARIABLES = ("S3_PATH", "AWS_SECRET", "S3_ENDPOINT", "S3_FORCE_PATH_STYLE")


def example_for(namespace: str, endpoint: str, path: str) -> list[dict[str, Any]]:
    """examples/backup-cronjob.yaml for this namespace and the sandbox's S3, every minute, keeping one."""
    documents = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
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


def example_for_store(namespace: str, store: SandboxStore, path: str) -> list[dict[str, Any]]:
    """examples/backup-cronjob.yaml for this namespace with `store`'s variables instead of S3's
    (`<STORE>_PATH`, its secret, `<STORE>_ENDPOINT`), as docs/backup.md says; suspended: the test
    runs it once itself."""
    section = store.section.upper()
    variables = {f"{section}_PATH": path, {"ABS": "ABS_SECRET", "GCS": "GCP_SECRET", "OSS": "OSS_SECRET"}[section]: SECRET}
    if store.spec_endpoint:
        variables[f"{section}_ENDPOINT"] = store.spec_endpoint
    documents = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    for document in documents:
        if document["kind"] == "Role":
            secrets_rule = next(rule for rule in document["rules"] if rule["resources"] == ["secrets"])
            secrets_rule["resourceNames"] = [SECRET]
        if document["kind"] == "RoleBinding":
            document["subjects"][0]["namespace"] = namespace
        if document["kind"] == "CronJob":
            document["spec"]["suspend"] = True
            container = document["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
            env = [v for v in container["env"] if v["name"] not in S3_VARIABLES]
            assert len(env) == len(container["env"]) - len(S3_VARIABLES), container["env"]
            container["env"] = env + [{"name": name, "value": value} for name, value in variables.items()]
    return documents


def test_a_cronjob_run_backs_up_to_each_other_store_exactly_the_keys(
    other_store: tuple[SandboxStore, str], backups: Backups, clusters: Clusters, tmp_path: Path,
) -> None:
    store, bucket = other_store
    ns = clusters.namespace
    clusters.create(etcd_cluster("example-etcd-cluster", 1))
    clusters.wait_running("example-etcd-cluster", 1, timeout=180)
    written = {f"cron/{index}": f"value-{index}" for index in range(10)}
    for key, value in written.items():
        clusters.put("example-etcd-cluster", key, value)
    documents = example_for_store(ns, store, f"{bucket}/cron/example.backup")
    backups.sandbox.kubectl("-n", ns, "apply", "-f", "-", input=yaml.safe_dump_all(documents))
    backups.sandbox.kubectl("-n", ns, "create", "job", f"--from=cronjob/{CRONJOB}", "run-once")
    batch = k8s.BatchV1Api(backups.sandbox.api_client())

    def finished() -> Any:
        status = batch.read_namespaced_job_status("run-once", ns).status
        return status if (status.succeeded or 0) + (status.failed or 0) >= 1 else None
    status = wait_for(finished, timeout=180, what=f"the CronJob's backup job on {store.storage_type} finished")
    assert not status.failed, f"the backup job failed on {store.storage_type}: " + backups.sandbox.kubectl(
        "-n", ns, "logs", "job/run-once", check=False).stdout[-2000:]
    clusters.put("example-etcd-cluster", "cron/after-backup", "not in the backup")

    output = json.loads(backups.sandbox.kubectl("-n", ns, "logs", "job/run-once").stdout.strip().splitlines()[-1])
    assert output["result"] == "succeeded", output
    scheme = SCHEMES[store.storage_type]
    keys = [info.key for info in store.storage().list(bucket, "cron/")]
    assert len(keys) == 1 and keys[0].startswith(f"cron/example.backup_v{output['etcdRevision']}_"), (keys, output)
    assert output["object"] == f"{scheme}://{bucket}/{keys[0]}", output
    snapshot = download(store, bucket, keys[0], tmp_path / "download")
    assert keys_in_snapshot(snapshot, tmp_path / "scratch") == written
