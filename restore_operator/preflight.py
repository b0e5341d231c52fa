"""What a restore must pass before anything is deleted (pure): the seed pod can fetch the snapshot
(an awsSecret to read it with), the EtcdCluster to create is one the etcd operator will run (its
spec, etcd version and images), the program of that version's image that restores it, and room
for the snapshot on the seed's volume (etcd_common/seed/space.py). A
failure here fails the restore and leaves the existing cluster as it is. The snapshot object
itself is re-checked (still there, the same object) by the supervisor just before the delete."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from etcd_common.api import constants as c
from etcd_common.api.etcd_cluster import parse_cluster_spec
from etcd_common.api.etcd_restore import EtcdRestore
from etcd_common.api.fields import SpecError
from etcd_common.api.images import DEFAULT_TRUSTED_REPOSITORIES, untrusted_image_problem
from etcd_common.api.restore_source import DEFAULT_BUMP_REVISION, DEFAULT_FETCH_IMAGE
from etcd_common.seed.space import seed_space_problem
from etcd_common.seed.tools import no_bump_warning, restore_tool
from etcd_common.storage.objects import ObjectInfo
from restore_operator import reasons
from restore_operator.actions import Fail
from restore_operator.observed import SnapshotFacts

NOTHING_TOUCHED = "nothing was deleted"


@dataclass(frozen=True)
class RestorePolicy:
    """The restore operator's flags that decide what a restore creates (from `RestoreSettings`)."""

    fetch_image: str = DEFAULT_FETCH_IMAGE
    bump_revision: int = DEFAULT_BUMP_REVISION
    trusted_repositories: tuple[str, ...] = DEFAULT_TRUSTED_REPOSITORIES


@dataclass(frozen=True)
class RestorePlan:
    """How the seed will restore: the revision bump its tool can take, and what the user should
    know about it ("" when nothing)."""

    bump_revision: int
    warning: str = ""


def preflight(restore: EtcdRestore, target_spec: Mapping[str, Any], policy: RestorePolicy,
              snapshot: SnapshotFacts | None = None) -> RestorePlan | Fail:
    """The plan for restoring `snapshot` (the verified one) into an EtcdCluster with
    `target_spec`, or why it must not start."""
    no_credentials = seed_credentials_problem(restore)
    if no_credentials is not None:
        return no_credentials
    try:
        spec = parse_cluster_spec(dict(target_spec))
    except SpecError as error:
        return Fail(reasons.INVALID_CLUSTER_SPEC,
                    f"the EtcdCluster to create would be refused: {error.reason}; fix spec.clusterSpec (or the "
                    f"existing EtcdCluster's spec); {NOTHING_TOUCHED}")
    tool = restore_tool(spec.version)
    if spec.version.minor_version not in c.ACCEPTED_MINOR_VERSIONS or tool is None:
        accepted = ", ".join(f"{minor}.x" for minor in c.ACCEPTED_MINOR_VERSIONS)
        return Fail(reasons.UNSUPPORTED_VERSION,
                    f"etcd {spec.version} cannot be restored into: the etcd operator runs {accepted}; set "
                    f"spec.clusterSpec.version (e.g. {c.DEFAULT_VERSION}); {NOTHING_TOUCHED}")
    trusted = policy.trusted_repositories
    untrusted = (untrusted_image_problem("spec.repository of the EtcdCluster to create", spec.image, trusted)
                 or untrusted_image_problem("the fetch image (--fetch-image / RESTORE_FETCH_IMAGE)",
                                            policy.fetch_image, trusted))
    if untrusted:
        return Fail(reasons.UNTRUSTED_IMAGE, f"{untrusted}; {NOTHING_TOUCHED}")
    no_room = None if snapshot is None else seed_space_problem(spec, snapshot.largest_size, "the snapshot")
    if no_room is not None:
        return Fail(reasons.INSUFFICIENT_SPACE,
                    f"{no_room} (in spec.clusterSpec, or the existing EtcdCluster's spec); {NOTHING_TOUCHED}")
    if policy.bump_revision and not tool.can_bump_revision:
        return RestorePlan(bump_revision=0, warning=no_bump_warning(spec.version, tool))
    return RestorePlan(bump_revision=policy.bump_revision)


# section -> what its secret must hold (for the message when there is none).
_SECRET_KEYS = {
    "s3": "the AWS `credentials` (and `config`) files",
    "abs": "`storage-account` and `storage-key`",
    "gcs": "`access-token` or `credentials.json`",
    "oss": "`accessKeyID` and `accessKeySecret`",
}


def seed_credentials_problem(restore: EtcdRestore) -> Fail | None:
    """The seed pod fetches the snapshot with the section's secret's credentials (awsSecret,
    absSecret, gcpSecret, ossSecret), and with nothing else (it has no service account token):
    without one, whatever this operator could read with its own identity, the seed could not.
    Known before anything is downloaded."""
    assert restore.spec is not None
    location = restore.spec.storage
    if location.secret:
        return None
    field = f"spec.{location.section}.{location.secret_field}"
    return Fail(reasons.SEED_WITHOUT_CREDENTIALS,
                f"{field} is empty: the seed pod that fetches {location.section}://{location.path} would have no "
                "credentials (this operator's own identity does not reach it); name a Secret with "
                f"{_SECRET_KEYS[location.section]} in {field}; {NOTHING_TOUCHED}")


def cluster_not_found(restore: EtcdRestore) -> Fail:
    assert restore.spec is not None
    return Fail(reasons.CLUSTER_NOT_FOUND,
                f"EtcdCluster {restore.spec.etcd_cluster_name} does not exist in namespace {restore.namespace}: "
                "create it first, or give spec.clusterSpec to restore into a new cluster of that name")


def snapshot_object_problem(path: str, facts: SnapshotFacts, info: ObjectInfo | None, *,
                            consequence: str = NOTHING_TOUCHED, scheme: str = "s3") -> Fail | None:
    """Why the object at `path` (`info`: as S3 describes it now, None when it is gone; the
    verified version when one was recorded) is no longer the snapshot verified, if it is not.
    Compared by ETag, else (a status written before ETags were recorded) by size."""
    if info is None:
        return Fail(reasons.SNAPSHOT_MISSING,
                    f"{scheme}://{path} is gone since it was verified; {consequence}; put the backup back (or name "
                    "another) and create a new EtcdRestore")
    changed = (facts.etag and info.etag != facts.etag) or (not facts.etag and facts.size and info.size != facts.size)
    if not changed:
        return None
    was = f"ETag {facts.etag}" if facts.etag else f"{facts.size} bytes"
    now = f"ETag {info.etag}" if facts.etag else f"{info.size} bytes"
    return Fail(reasons.SNAPSHOT_CHANGED,
                f"{scheme}://{path} was replaced since it was verified ({was}, now {now}); {consequence}; create a new "
                "EtcdRestore to verify and restore the object as it is now")
