"""Issue 22 item 1: a restore operator's staging pod runs the seed's own fetch step (same image,
credentials, pinned object, decoding) and the target version's `snapshot status` onto a claim; a
seed whose spec.restore names that claim (`stagedClaim`) copies the snapshot from it, read-only,
with no credentials and no download."""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from etcd_common.api import constants as c
from etcd_common.api.restore_source import parse_restore_source, restore_source_to_api
from etcd_common.api.versions import EtcdVersion
from etcd_common.seed import local_steps, program
from etcd_common.seed.pod import (
    AWS_VOLUME,
    CHECK_CONTAINER,
    ENCRYPTION_VOLUME,
    FETCH_CONTAINER,
    LOCAL_PROGRAM,
    SNAPSHOT_FILE,
    STAGED_DIR,
    STAGED_SNAPSHOT,
    STAGED_VOLUME,
    seed_restore_init_containers,
    seed_restore_volumes,
    staging_pod,
)
from etcd_common.seed.security import etcd_container_security_context
from tests.unit.etcd_common.seed_restore_builders import RESTORE, cluster, seed_pod

PINNED = {**RESTORE, "etag": '"etag-1"', "versionId": "v-7",
          "encryption": {"secretName": "backup-key", "secretKey": "key"}}
STAGED = {**RESTORE, "stagedClaim": "r-staging"}


def source(raw: dict[str, Any]) -> Any:
    parsed = parse_restore_source(raw)
    assert parsed is not None
    return parsed


def staged_pod(raw: dict[str, Any] = PINNED, version: str = "3.6.16", claim: str = "r-staging",
               placement: dict[str, Any] | None = None) -> dict[str, Any]:
    return staging_pod(source(raw), metadata={"name": claim, "namespace": "ns"}, claim=claim,
                       etcd_image=f"quay.io/coreos/etcd:v{version}", etcd_version=EtcdVersion.parse(version),
                       pod_security_context={"runAsNonRoot": True},
                       security_context=etcd_container_security_context(), deadline_seconds=301,
                       placement=placement)


def test_the_staging_pod_runs_exactly_the_seeds_fetch_step_onto_the_claim() -> None:
    """Broken by building the staging pod's fetch container any other way than the seed's (another
    image, no ETag/version pin, no encryption key, another snapshot path)."""
    seed_fetch = seed_restore_init_containers(
        source(PINNED), etcd_image="quay.io/coreos/etcd:v3.6.16", etcd_version=EtcdVersion.parse("3.6.16"),
        member="m", initial_cluster=[("m", "http://m:2380")], cluster_token="t",
        security_context=etcd_container_security_context())[0]
    pod = staged_pod()

    (fetch,) = pod["spec"]["initContainers"]
    assert fetch == seed_fetch
    assert '--etag="etag-1"' in fetch["args"] and "--version-id=v-7" in fetch["args"]
    assert any(arg.startswith("--encryption-key-file=") for arg in fetch["args"])
    assert fetch["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert pod["spec"]["volumes"][0] == {"name": c.DATA_VOLUME_NAME, "persistentVolumeClaim": {"claimName": "r-staging"}}
    assert {v["name"] for v in pod["spec"]["volumes"][1:]} == {AWS_VOLUME, ENCRYPTION_VOLUME}
    assert pod["spec"]["restartPolicy"] == "Never" and pod["spec"]["activeDeadlineSeconds"] == 301
    assert pod["spec"]["automountServiceAccountToken"] is False


@pytest.mark.parametrize(("version", "binary", "env"), [
    ("3.6.16", "/usr/local/bin/etcdutl", None),
    ("3.4.23", "/usr/local/bin/etcdctl", [{"name": "ETCDCTL_API", "value": "3"}]),
])
def test_the_staging_pod_checks_the_file_with_the_target_versions_tool(version: str, binary: str,
                                                                      env: Any) -> None:
    """Broken by checking with the operator's own etcdutl, or with another image than the cluster's."""
    (check,) = staged_pod(version=version)["spec"]["containers"]
    assert check["name"] == CHECK_CONTAINER and check["image"] == f"quay.io/coreos/etcd:v{version}"
    assert check["command"][:4] == [binary, "snapshot", "status", SNAPSHOT_FILE]
    assert check.get("env") == env
    assert check["volumeMounts"] == [{"name": c.DATA_VOLUME_NAME, "mountPath": c.DATA_VOLUME_MOUNT_PATH}]


def test_a_staging_pod_of_another_claim_fetches_onto_that_claim_only_and_is_placed() -> None:
    """Each member's claim has its own staging pod (one pod mounting several claims would bind
    them all where it runs): the same fetch and check, onto its one claim, with the placement
    given. Broken by a pod mounting another claim, or one without its placement."""
    placement = {"nodeSelector": {"disk": "ssd"}, "affinity": {"podAntiAffinity": {}}}
    pod = staged_pod(claim="r-staging-2", placement=placement)
    claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"] if "persistentVolumeClaim" in v]
    assert claims == ["r-staging-2"]
    assert pod["spec"]["initContainers"] == staged_pod()["spec"]["initContainers"]
    assert pod["spec"]["containers"] == staged_pod()["spec"]["containers"]
    assert pod["spec"]["nodeSelector"] == {"disk": "ssd"} and pod["spec"]["affinity"] == {"podAntiAffinity": {}}
    assert "nodeSelector" not in staged_pod()["spec"] and "affinity" not in staged_pod()["spec"]


def test_the_staged_snapshot_is_where_the_seed_reads_it() -> None:
    """The staging pod writes SNAPSHOT_FILE on the claim mounted at the data volume's path; the seed
    mounts the claim at STAGED_DIR: the same file."""
    relative = SNAPSHOT_FILE.removeprefix(c.DATA_VOLUME_MOUNT_PATH + "/")
    assert STAGED_SNAPSHOT == f"{STAGED_DIR}/{relative}"


def test_a_seed_of_a_staged_claim_copies_it_with_no_credentials() -> None:
    """Broken by mounting the awsSecret (or the encryption key) into a staged seed, by not mounting
    the claim read-only, or by downloading (an --s3-path in the fetch step's args)."""
    staged = {**PINNED, "stagedClaim": "r-staging"}
    pod = seed_pod(cluster(staged))
    fetch = next(ic for ic in pod["spec"]["initContainers"] if ic["name"] == FETCH_CONTAINER)

    assert fetch["command"] == [LOCAL_PROGRAM]
    assert fetch["args"] == ["copy", f"--staged-snapshot={STAGED_SNAPSHOT}", f"--sha256={RESTORE['sha256']}",
                             "--staging-dir=/var/etcd/restore", f"--snapshot={SNAPSHOT_FILE}"]
    assert {m["name"]: m.get("readOnly", False) for m in fetch["volumeMounts"]} == {
        c.DATA_VOLUME_NAME: False, STAGED_VOLUME: True}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes[STAGED_VOLUME] == {"name": STAGED_VOLUME,
                                      "persistentVolumeClaim": {"claimName": "r-staging", "readOnly": True}}
    assert AWS_VOLUME not in volumes and ENCRYPTION_VOLUME not in volumes
    assert not any("secret" in v for v in pod["spec"]["volumes"])
    # The restore and install steps are the same as a downloading seed's.
    downloading = seed_pod(cluster(PINNED))
    assert pod["spec"]["initContainers"][1:] == downloading["spec"]["initContainers"][1:]


def test_staged_claim_round_trips_and_is_absent_by_default() -> None:
    assert source(STAGED).staged_claim == "r-staging"
    assert restore_source_to_api(source(STAGED))["stagedClaim"] == "r-staging"
    assert "stagedClaim" not in restore_source_to_api(source(RESTORE))
    assert seed_restore_volumes(source(STAGED)) == [
        {"name": STAGED_VOLUME, "persistentVolumeClaim": {"claimName": "r-staging", "readOnly": True}}]


@pytest.mark.parametrize("main, step", [(local_steps.main, "copy"), (program.main, "fetch")],
                         ids=["etcd-restore-local", "etcd-restore-seed (pods of earlier versions)"])
def test_the_seed_copies_the_staged_snapshot_and_checks_its_sha256(
        tmp_path: Path, main: Callable[[list[str]], int], step: str) -> None:
    """Broken by a copy that does not check the sha256, or that leaves a mismatching file."""
    staged = tmp_path / "claim" / "restore" / "snapshot.db"
    staged.parent.mkdir(parents=True)
    staged.write_bytes(b"snapshot bytes")
    sha = hashlib.sha256(b"snapshot bytes").hexdigest()
    staging = tmp_path / "data" / "restore"
    args = [step, f"--staged-snapshot={staged}", f"--sha256={sha}", f"--staging-dir={staging}",
            f"--snapshot={staging / 'snapshot.db'}"]

    assert main(args) == 0
    assert (staging / "snapshot.db").read_bytes() == b"snapshot bytes"

    wrong = [arg if not arg.startswith("--sha256=") else f"--sha256={'0' * 64}" for arg in args]
    assert main(wrong) == 1
    assert not (staging / "snapshot.db").exists()
    with pytest.raises(FileNotFoundError, match="no staged snapshot"):
        local_steps.copy_staged(str(tmp_path / "absent"), sha256=sha, staging_dir=str(staging),
                            snapshot=str(staging / "snapshot.db"))

