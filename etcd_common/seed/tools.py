"""Which program of an etcd image restores a snapshot, by etcd version (pure). From etcd's sources:
`etcdutl` exists from 3.5.0 (3.4 images have only `etcdctl`, whose `snapshot restore` takes the same
flags); `--bump-revision`/`--mark-compacted` came to `etcdctl` in 3.4.27 and to `etcdutl` in 3.5.10
(3.6's `etcdctl` has no `snapshot restore` at all)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from etcd_common.api.versions import EtcdVersion

ETCDUTL_BINARY: Final = "/usr/local/bin/etcdutl"
ETCDCTL_BINARY: Final = "/usr/local/bin/etcdctl"
FIRST_ETCDUTL: Final = EtcdVersion(3, 5, 0)
FIRST_ETCDCTL_BUMP: Final = EtcdVersion(3, 4, 27)
FIRST_ETCDUTL_BUMP: Final = EtcdVersion(3, 5, 10)
FIRST_RESTORABLE: Final = EtcdVersion(3, 4, 0)


@dataclass(frozen=True)
class RestoreTool:
    """The image's program that restores a snapshot, and whether it can bump revisions."""

    binary: str
    can_bump_revision: bool
    # Environment the program needs (etcdctl: the v3 API, its default from 3.4 on, said anyway).
    env: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        return self.binary.rsplit("/", 1)[-1]


def restore_tool(version: EtcdVersion) -> RestoreTool | None:
    """The program an etcd `version` image restores with; None when none we know can."""
    if version < FIRST_RESTORABLE:
        return None
    if version < FIRST_ETCDUTL:
        return RestoreTool(ETCDCTL_BINARY, version >= FIRST_ETCDCTL_BUMP, env=(("ETCDCTL_API", "3"),))
    return RestoreTool(ETCDUTL_BINARY, version >= FIRST_ETCDUTL_BUMP)


def no_bump_warning(version: EtcdVersion, tool: RestoreTool) -> str:
    """What a restore without --bump-revision means, and how to avoid it."""
    first = FIRST_ETCDCTL_BUMP if tool.name == "etcdctl" else FIRST_ETCDUTL_BUMP
    return (f"etcd {version}'s {tool.name} has no --bump-revision (added in {first}): the snapshot is restored "
            f"without it, so revisions restart at the snapshot's and clients that watched the old cluster "
            f"must re-list; a version from {first} (or {FIRST_ETCDUTL_BUMP}) on restores with it")
