"""The init containers that restore a seed member from `spec.restore` (pure builders).

A seed pod of a cluster with a restore source runs, before etcd:
 1. `restore-fetch` (the operator image's `etcd-restore-seed fetch`): downloads the snapshot from
    S3, ABS, GCS or OSS with the credentials of the section's secret (`spec.restore.s3.awsSecret`,
    `abs.absSecret`, `gcs.gcpSecret`, `oss.ossSecret`; mounted read-only) onto the member's
    data volume, only the object verified (`etag` / `versionId`), and checks its sha256; no HTTP
    server, no unauthenticated hop. With `spec.restore.stagedClaim` it copies the snapshot the
    restore operator staged on that claim instead (`etcd-restore-local copy`, which starts without
    the storage SDKs; mounted read-only; no network, no credentials);
 2. `restore-snapshot` (the cluster's own etcd image): `etcdutl snapshot restore` (3.4 images:
    `etcdctl snapshot restore`, `tools.restore_tool`) for the seed's name, peer URL and the new
    cluster token, with `--bump-revision`/`--mark-compacted` where the tool has them, into a
    staging directory (the tool also checks the snapshot's integrity hash);
 3. `restore-install` (`etcd-restore-local install`): moves the staged data directory to etcd's
    `--data-dir`, unless one is already there (an init container re-run never overwrites data
    etcd may have written), and removes the staging files.
etcd starts only after all three succeeded, so it never runs on an empty data directory.

The restore operator's staging pods (`staging_pod`, one per member of the restored cluster, each
with its own claim) run the same fetch step onto their claim, then `restore-check` (`etcdutl
snapshot status` with the cluster's etcd image), before anything of the cluster is deleted: each
claim holds the same checked snapshot (`spec.restore.stagedClaims`).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from etcd_common.api import constants as c
from etcd_common.api.restore_source import DEFAULT_BUMP_REVISION, RestoreSource
from etcd_common.api.versions import EtcdVersion
from etcd_common.seed.tools import ETCDCTL_BINARY, RestoreTool, restore_tool

FETCH_CONTAINER: Final = "restore-fetch"
RESTORE_CONTAINER: Final = "restore-snapshot"
INSTALL_CONTAINER: Final = "restore-install"
SEED_PROGRAM: Final = "etcd-restore-seed"
# The copy from a staged claim and the install: local files only, a program that starts without
# the storage SDKs (`etcd_common.seed.local_steps`).
LOCAL_PROGRAM: Final = "etcd-restore-local"
# On the member's data volume, next to etcd's data dir (same filesystem: the install is a rename).
STAGING_DIR: Final = f"{c.DATA_VOLUME_MOUNT_PATH}/restore"
SNAPSHOT_FILE: Final = f"{STAGING_DIR}/snapshot.db"
STAGED_DATA_DIR: Final = f"{STAGING_DIR}/data"
AWS_VOLUME: Final = "restore-aws-credentials"
AWS_DIR: Final = "/etc/etcd-restore/aws"
# The absSecret, gcpSecret or ossSecret (ABS, GCS, OSS): each key a file.
SECRET_VOLUME: Final = "restore-storage-credentials"
SECRET_DIR: Final = "/etc/etcd-restore/secret"
# `spec.restore.encryption`: the Secret with the key of an encrypted backup.
ENCRYPTION_VOLUME: Final = "restore-encryption-key"
ENCRYPTION_DIR: Final = "/etc/etcd-restore/encryption"
# `spec.restore.stagedClaim`: the claim the restore operator's staging pod left the checked
# snapshot on (at its SNAPSHOT_FILE, i.e. STAGED_SNAPSHOT_PATH from the claim's root), mounted
# read-only into the seed's fetch step.
STAGED_VOLUME: Final = "restore-staged"
STAGED_DIR: Final = "/var/etcd-restore-staged"
STAGED_SNAPSHOT_PATH: Final = SNAPSHOT_FILE.removeprefix(f"{c.DATA_VOLUME_MOUNT_PATH}/")
STAGED_SNAPSHOT: Final = f"{STAGED_DIR}/{STAGED_SNAPSHOT_PATH}"
CHECK_CONTAINER: Final = "restore-check"


def seed_restore_init_containers(
    source: RestoreSource,
    *,
    etcd_image: str,
    etcd_version: EtcdVersion,
    member: str,
    initial_cluster: Sequence[tuple[str, str]],
    cluster_token: str,
    security_context: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """The three init containers, in order (see the module docstring)."""
    data_mount: list[dict[str, Any]] = [{"name": c.DATA_VOLUME_NAME, "mountPath": c.DATA_VOLUME_MOUNT_PATH}]
    peer_urls = [url for name, url in initial_cluster if name == member]
    tool = _tool(etcd_version)
    restore_command = [
        tool.binary, "snapshot", "restore", SNAPSHOT_FILE,
        f"--data-dir={STAGED_DATA_DIR}",
        f"--name={member}",
        "--initial-cluster=" + ",".join(f"{name}={url}" for name, url in initial_cluster),
        f"--initial-advertise-peer-urls={','.join(peer_urls)}",
        f"--initial-cluster-token={cluster_token}",
    ]
    if source.bump_revision and tool.can_bump_revision:
        # Taken together; a tool without them restores unbumped (the restore operator warned).
        restore_command += [f"--bump-revision={source.bump_revision}", "--mark-compacted"]
    security = dict(security_context)
    return [
        restore_fetch_container(source, security_context=security),
        {
            "name": RESTORE_CONTAINER, "image": etcd_image, "imagePullPolicy": "IfNotPresent",
            "command": restore_command, "volumeMounts": data_mount, "securityContext": security,
            **_tool_env(tool),
        },
        {
            "name": INSTALL_CONTAINER, "image": source.fetch_image, "imagePullPolicy": "IfNotPresent",
            "command": [LOCAL_PROGRAM],
            "args": ["install", f"--staging-dir={STAGING_DIR}", f"--staged-data-dir={STAGED_DATA_DIR}",
                     f"--data-dir={c.DATA_DIR}"],
            "volumeMounts": data_mount, "securityContext": security,
        },
    ]


def restore_fetch_container(source: RestoreSource, *, security_context: Mapping[str, Any]) -> dict[str, Any]:
    """`restore-fetch`: the snapshot onto the data volume at SNAPSHOT_FILE, its sha256 checked.
    Downloaded with the section's secret (and the encryption key) mounted; or, with
    `source.staged_claim`, copied from that claim (mounted read-only at STAGED_DIR: no network,
    no credentials). Its last log lines are its termination message when it fails."""
    mounts: list[dict[str, Any]] = [{"name": c.DATA_VOLUME_NAME, "mountPath": c.DATA_VOLUME_MOUNT_PATH}]
    if source.staged_claim:
        mounts.append({"name": STAGED_VOLUME, "mountPath": STAGED_DIR, "readOnly": True})
    else:
        if source.location.secret:
            volume, directory = (AWS_VOLUME, AWS_DIR) if source.s3 is not None else (SECRET_VOLUME, SECRET_DIR)
            mounts.append({"name": volume, "mountPath": directory, "readOnly": True})
        if source.encryption is not None:
            mounts.append({"name": ENCRYPTION_VOLUME, "mountPath": ENCRYPTION_DIR, "readOnly": True})
    return {
        "name": FETCH_CONTAINER, "image": source.fetch_image, "imagePullPolicy": "IfNotPresent",
        "command": [LOCAL_PROGRAM if source.staged_claim else SEED_PROGRAM], "args": _fetch_args(source),
        "volumeMounts": mounts, "securityContext": dict(security_context),
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def snapshot_check_container(*, etcd_image: str, etcd_version: EtcdVersion,
                             security_context: Mapping[str, Any]) -> dict[str, Any]:
    """`restore-check`: `etcdutl snapshot status` (3.4: `etcdctl`) of SNAPSHOT_FILE with the
    cluster's own etcd image: the program the seed restores with reads the file."""
    tool = _tool(etcd_version)
    return {
        "name": CHECK_CONTAINER, "image": etcd_image, "imagePullPolicy": "IfNotPresent",
        "command": [tool.binary, "snapshot", "status", SNAPSHOT_FILE, "--write-out=table"],
        "volumeMounts": [{"name": c.DATA_VOLUME_NAME, "mountPath": c.DATA_VOLUME_MOUNT_PATH}],
        "securityContext": dict(security_context),
        "terminationMessagePolicy": "FallbackToLogsOnError",
        **_tool_env(tool),
    }


def staging_pod(source: RestoreSource, *, metadata: Mapping[str, Any], claim: str, etcd_image: str,
                etcd_version: EtcdVersion, pod_security_context: Mapping[str, Any],
                security_context: Mapping[str, Any], deadline_seconds: int,
                placement: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A restore operator's staging pod: the seed's own fetch step (`restore_fetch_container`:
    same image, credentials, pinned object, decoding) onto `claim` mounted where a seed's data
    volume is, then `snapshot_check_container`. It leaves the checked snapshot on the claim at
    STAGED_SNAPSHOT_PATH (relative to the claim's root), which a seed given
    `spec.restore.stagedClaim` (or member i given `spec.restore.stagedClaims[i]`) copies.
    `placement`: pod spec fields that say where it may run (nodeSelector, tolerations, affinity),
    so that a claim bound where its first consumer runs binds where a member can run. Runs once
    (restartPolicy Never) within `deadline_seconds`."""
    downloading = dataclasses.replace(source, staged_claim="", staged_claims=())
    volumes = [{"name": c.DATA_VOLUME_NAME, "persistentVolumeClaim": {"claimName": claim}},
               *seed_restore_volumes(downloading)]
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": dict(metadata),
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": deadline_seconds,
            "enableServiceLinks": False,
            "automountServiceAccountToken": False,
            "securityContext": dict(pod_security_context),
            **dict(placement or {}),
            "initContainers": [restore_fetch_container(downloading, security_context=security_context)],
            "containers": [snapshot_check_container(etcd_image=etcd_image, etcd_version=etcd_version,
                                                    security_context=security_context)],
            "volumes": volumes,
        },
    }


def _tool(etcd_version: EtcdVersion) -> RestoreTool:
    tool = restore_tool(etcd_version)
    if tool is None:
        raise ValueError(f"etcd {etcd_version} has no snapshot restore tool this operator knows")
    return tool


def _tool_env(tool: RestoreTool) -> dict[str, Any]:
    return {"env": [{"name": k, "value": v} for k, v in tool.env]} if tool.env else {}


def _fetch_args(source: RestoreSource) -> list[str]:
    """`etcd-restore-seed fetch` for `source`: the object verified (or the staged copy of it),
    where and with what to read it."""
    if source.staged_claim:
        return ["copy", f"--staged-snapshot={STAGED_SNAPSHOT}", f"--sha256={source.sha256}",
                f"--staging-dir={STAGING_DIR}", f"--snapshot={SNAPSHOT_FILE}"]
    location = source.location
    path_args = ([f"--s3-path={location.path}"] if source.s3 is not None
                 else [f"--storage-type={location.storage_type}", f"--path={location.path}"])
    args = [
        "fetch",
        *path_args,
        f"--sha256={source.sha256}",
        f"--staging-dir={STAGING_DIR}",
        f"--snapshot={SNAPSHOT_FILE}",
    ]
    if source.etag:
        args.append(f"--etag={source.etag}")
    if source.version_id:
        args.append(f"--version-id={source.version_id}")
    if location.endpoint:
        args.append(f"--endpoint={location.endpoint}")
    if source.s3 is not None and source.s3.force_path_style:
        args.append("--force-path-style")
    if location.secret:
        args.append(f"--aws-dir={AWS_DIR}" if source.s3 is not None else f"--secret-dir={SECRET_DIR}")
    if source.encryption is not None:
        args.append(f"--encryption-key-file={ENCRYPTION_DIR}/{source.encryption.secret_key}")
    return args


def seed_restore_volumes(source: RestoreSource) -> list[dict[str, Any]]:
    """The volumes the fetch step reads from: the staged claim (read-only) when the source names
    one; else the secret volumes of its credentials (none without a secret) and of the encryption
    key (none without `encryption`)."""
    if source.staged_claim:
        return [{"name": STAGED_VOLUME,
                 "persistentVolumeClaim": {"claimName": source.staged_claim, "readOnly": True}}]
    secret = source.location.secret
    volumes = [] if not secret else [
        {"name": AWS_VOLUME if source.s3 is not None else SECRET_VOLUME, "secret": {"secretName": secret}}]
    if source.encryption is not None:
        volumes.append({"name": ENCRYPTION_VOLUME, "secret": {"secretName": source.encryption.secret_name}})
    return volumes


# --- quorum-loss recovery (the etcd operator's seed taken from a surviving member)


def _client_tls(data_mount: list[dict[str, Any]], volume: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The snapshot step's mounts and etcdctl's certificate flags (none without `volume`)."""
    if not volume:
        return list(data_mount), []
    return ([*data_mount, {"name": volume, "mountPath": c.OPERATOR_TLS_DIR, "readOnly": True}],
            [f"--cacert={c.OPERATOR_TLS_DIR}/{c.OPERATOR_CA_FILE}", f"--cert={c.OPERATOR_TLS_DIR}/{c.OPERATOR_CERT_FILE}",
             f"--key={c.OPERATOR_TLS_DIR}/{c.OPERATOR_KEY_FILE}"])

RECOVERY_SNAPSHOT_CONTAINER: Final = "recovery-snapshot"
RECOVERY_RESTORE_CONTAINER: Final = "recovery-restore"
# At the data volume's root (which exists; the etcd image has no shell to make a directory).
RECOVERY_SNAPSHOT_FILE: Final = f"{c.DATA_VOLUME_MOUNT_PATH}/recovery-snapshot.db"
# etcdctl's limits for the snapshot (a large database streams for minutes).
RECOVERY_DIAL_TIMEOUT_SECONDS: Final = 10
RECOVERY_SNAPSHOT_TIMEOUT_SECONDS: Final = 300


def recovery_seed_init_containers(
    *,
    etcd_image: str,
    etcd_version: EtcdVersion,
    member: str,
    initial_cluster: Sequence[tuple[str, str]],
    cluster_token: str,
    survivor_client_url: str,
    security_context: Mapping[str, Any],
    client_tls_volume: str = "",
    bump_revision: int = DEFAULT_BUMP_REVISION,
) -> list[dict[str, Any]]:
    """A recovery seed's init containers, both in the cluster's own etcd image:
     1. `recovery-snapshot`: `etcdctl snapshot save` from the survivor's client URL (etcd serves a
        snapshot without quorum) onto the seed's data volume;
     2. `recovery-restore`: `etcdutl snapshot restore` (3.4: `etcdctl`) straight into etcd's data
        directory as a one-member cluster (`member`, a new `cluster_token`), with
        `--bump-revision=<bump_revision> --mark-compacted` where the tool has them (etcdctl 3.4.27+,
        etcdutl 3.5.10+): the lost majority may have used revisions past the survivor's, and a
        watcher resuming from one of them must be told to re-list (compacted), never be served
        other events under a revision it saw; the tool checks the snapshot's integrity hash.
    etcd starts only after both succeeded, so it never runs on an empty data directory. With
    `client_tls_volume` (a cluster with client TLS: the volume of the operator's client
    certificate, spec.TLS.static.operatorSecret), the snapshot step alone mounts it and dials the
    survivor with it; etcd itself never sees it."""
    tool = restore_tool(etcd_version)
    if tool is None:
        raise ValueError(f"etcd {etcd_version} has no snapshot restore tool this operator knows")
    data_mount: list[dict[str, Any]] = [{"name": c.DATA_VOLUME_NAME, "mountPath": c.DATA_VOLUME_MOUNT_PATH}]
    security = dict(security_context)
    snapshot_mounts, client_tls = _client_tls(data_mount, client_tls_volume)
    snapshot_command = [
        ETCDCTL_BINARY, f"--endpoints={survivor_client_url}", *client_tls,
        f"--dial-timeout={RECOVERY_DIAL_TIMEOUT_SECONDS}s",
        f"--command-timeout={RECOVERY_SNAPSHOT_TIMEOUT_SECONDS}s",
        "snapshot", "save", RECOVERY_SNAPSHOT_FILE,
    ]
    restore_command = _recovery_restore_command(tool, member, initial_cluster, cluster_token, bump_revision)
    return [
        {
            "name": RECOVERY_SNAPSHOT_CONTAINER, "image": etcd_image, "imagePullPolicy": "IfNotPresent",
            "command": snapshot_command, "env": [{"name": "ETCDCTL_API", "value": "3"}],
            "volumeMounts": snapshot_mounts, "securityContext": security,
            # etcdctl writes no termination-message file: its last lines say why it failed.
            "terminationMessagePolicy": "FallbackToLogsOnError",
        },
        {
            "name": RECOVERY_RESTORE_CONTAINER, "image": etcd_image, "imagePullPolicy": "IfNotPresent",
            "command": restore_command, "volumeMounts": data_mount, "securityContext": security,
            "terminationMessagePolicy": "FallbackToLogsOnError",
            **({"env": [{"name": k, "value": v} for k, v in tool.env]} if tool.env else {}),
        },
    ]


def _recovery_restore_command(tool: RestoreTool, member: str, initial_cluster: Sequence[tuple[str, str]],
                              cluster_token: str, bump_revision: int) -> list[str]:
    """`snapshot restore` of the survivor's snapshot into etcd's data directory, bumped and
    marked compacted where the tool can."""
    peer_urls = [url for name, url in initial_cluster if name == member]
    command = [
        tool.binary, "snapshot", "restore", RECOVERY_SNAPSHOT_FILE,
        f"--data-dir={c.DATA_DIR}",
        f"--name={member}",
        "--initial-cluster=" + ",".join(f"{name}={url}" for name, url in initial_cluster),
        f"--initial-advertise-peer-urls={','.join(peer_urls)}",
        f"--initial-cluster-token={cluster_token}",
    ]
    if bump_revision and tool.can_bump_revision:
        command += [f"--bump-revision={bump_revision}", "--mark-compacted"]
    return command
