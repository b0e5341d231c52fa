"""The init containers that restore a seed member from `spec.restore` (pure builders).

A seed pod of a cluster with a restore source runs, before etcd:
 1. `restore-fetch` (the operator image's `etcd-restore-seed fetch`): downloads the snapshot from
    S3, ABS, GCS or OSS with the credentials of the section's secret (`spec.restore.s3.awsSecret`,
    `abs.absSecret`, `gcs.gcpSecret`, `oss.ossSecret`; mounted read-only) onto the member's
    data volume, only the object verified (`etag` / `versionId`), and checks its sha256; no HTTP
    server, no unauthenticated hop;
 2. `restore-snapshot` (the cluster's own etcd image): `etcdutl snapshot restore` (3.4 images:
    `etcdctl snapshot restore`, `tools.restore_tool`) for the seed's name, peer URL and the new
    cluster token, with `--bump-revision`/`--mark-compacted` where the tool has them, into a
    staging directory (the tool also checks the snapshot's integrity hash);
 3. `restore-install` (`etcd-restore-seed install`): moves the staged data directory to etcd's
    `--data-dir`, unless one is already there (an init container re-run never overwrites data
    etcd may have written), and removes the staging files.
etcd starts only after all three succeeded, so it never runs on an empty data directory.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from etcd_common.api import constants as c
from etcd_common.api.restore_source import RestoreSource
from etcd_common.api.versions import EtcdVersion
from etcd_common.seed.tools import ETCDCTL_BINARY, restore_tool

FETCH_CONTAINER: Final = "restore-fetch"
RESTORE_CONTAINER: Final = "restore-snapshot"
INSTALL_CONTAINER: Final = "restore-install"
SEED_PROGRAM: Final = "etcd-restore-seed"
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
    fetch_args = _fetch_args(source)
    fetch_mounts = list(data_mount)
    if source.location.secret:
        volume, directory = (AWS_VOLUME, AWS_DIR) if source.s3 is not None else (SECRET_VOLUME, SECRET_DIR)
        fetch_mounts.append({"name": volume, "mountPath": directory, "readOnly": True})
    if source.encryption is not None:
        fetch_mounts.append({"name": ENCRYPTION_VOLUME, "mountPath": ENCRYPTION_DIR, "readOnly": True})
    peer_urls = [url for name, url in initial_cluster if name == member]
    tool = restore_tool(etcd_version)
    if tool is None:
        raise ValueError(f"etcd {etcd_version} has no snapshot restore tool this operator knows")
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
        {
            "name": FETCH_CONTAINER, "image": source.fetch_image, "imagePullPolicy": "IfNotPresent",
            "command": [SEED_PROGRAM], "args": fetch_args,
            "volumeMounts": fetch_mounts, "securityContext": security,
        },
        {
            "name": RESTORE_CONTAINER, "image": etcd_image, "imagePullPolicy": "IfNotPresent",
            "command": restore_command, "volumeMounts": data_mount, "securityContext": security,
            **({"env": [{"name": k, "value": v} for k, v in tool.env]} if tool.env else {}),
        },
        {
            "name": INSTALL_CONTAINER, "image": source.fetch_image, "imagePullPolicy": "IfNotPresent",
            "command": [SEED_PROGRAM],
            "args": ["install", f"--staging-dir={STAGING_DIR}", f"--staged-data-dir={STAGED_DATA_DIR}",
                     f"--data-dir={c.DATA_DIR}"],
            "volumeMounts": data_mount, "securityContext": security,
        },
    ]


def _fetch_args(source: RestoreSource) -> list[str]:
    """`etcd-restore-seed fetch` for `source`: the object verified, where and with what to read it."""
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
    """The secret volumes the fetch step reads its credentials (none without a secret) and the
    encryption key (none without `encryption`) from."""
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
) -> list[dict[str, Any]]:
    """A recovery seed's init containers, both in the cluster's own etcd image:
     1. `recovery-snapshot`: `etcdctl snapshot save` from the survivor's client URL (etcd serves a
        snapshot without quorum) onto the seed's data volume;
     2. `recovery-restore`: `etcdutl snapshot restore` (3.4: `etcdctl`) straight into etcd's data
        directory as a one-member cluster (`member`, a new `cluster_token`), keeping the
        survivor's revisions; the tool checks the snapshot's integrity hash.
    etcd starts only after both succeeded, so it never runs on an empty data directory. With
    `client_tls_volume` (a cluster with client TLS: the volume of the operator's client
    certificate, spec.TLS.static.operatorSecret), the snapshot step alone mounts it and dials the
    survivor with it; etcd itself never sees it."""
    tool = restore_tool(etcd_version)
    if tool is None:
        raise ValueError(f"etcd {etcd_version} has no snapshot restore tool this operator knows")
    data_mount: list[dict[str, Any]] = [{"name": c.DATA_VOLUME_NAME, "mountPath": c.DATA_VOLUME_MOUNT_PATH}]
    peer_urls = [url for name, url in initial_cluster if name == member]
    security = dict(security_context)
    snapshot_mounts, client_tls = _client_tls(data_mount, client_tls_volume)
    snapshot_command = [
        ETCDCTL_BINARY, f"--endpoints={survivor_client_url}", *client_tls,
        f"--dial-timeout={RECOVERY_DIAL_TIMEOUT_SECONDS}s",
        f"--command-timeout={RECOVERY_SNAPSHOT_TIMEOUT_SECONDS}s",
        "snapshot", "save", RECOVERY_SNAPSHOT_FILE,
    ]
    restore_command = [
        tool.binary, "snapshot", "restore", RECOVERY_SNAPSHOT_FILE,
        f"--data-dir={c.DATA_DIR}",
        f"--name={member}",
        "--initial-cluster=" + ",".join(f"{name}={url}" for name, url in initial_cluster),
        f"--initial-advertise-peer-urls={','.join(peer_urls)}",
        f"--initial-cluster-token={cluster_token}",
    ]
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
