"""The etcd version policy, as pure functions: which versions a cluster may run and which version
changes a running cluster may take.

- 3.5.x and 3.6.x are supported; new clusters default to the newest 3.6 (`DEFAULT_VERSION`).
- 3.4.x is accepted only as an upgrade source: clusters left by the CoreOS operator keep running
  (and scaling) on it, with a warning in status and a Warning event, until upgraded to 3.5.
- Anything else (3.3, 3.7, "latest") is refused.
- Upgrades go one minor version at a time (3.4 -> 3.5 -> 3.6), and 3.5 -> 3.6 only from 3.5.32
  or later (etcd's upgrade guide); patch upgrades and downgrades within a minor version roll
  freely; downgrades across minor versions are refused.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from etcd_common.api import constants as c
from etcd_common.api.versions import EtcdVersion

Support = Literal["supported", "upgrade-source", "unsupported"]

# Reasons of the `VersionSupported` status condition.
REASON_SUPPORTED = "Supported"
REASON_UPGRADE_SOURCE_ONLY = "UpgradeSourceOnly"
REASON_UNSUPPORTED_VERSION = "UnsupportedVersion"
REASON_UPGRADE_REFUSED = "UpgradeRefused"


def support_of(version: EtcdVersion) -> Support:
    if version.minor_version in c.SUPPORTED_MINOR_VERSIONS:
        return "supported"
    if version.minor_version in c.UPGRADE_SOURCE_MINOR_VERSIONS:
        return "upgrade-source"
    return "unsupported"


def accepted_versions_text() -> str:
    """`3.5.x, 3.6.x (3.4.x only to upgrade from)`."""
    supported = ", ".join(f"{minor}.x" for minor in c.SUPPORTED_MINOR_VERSIONS)
    sources = ", ".join(f"{minor}.x" for minor in c.UPGRADE_SOURCE_MINOR_VERSIONS)
    return f"{supported} ({sources} only to upgrade from)" if sources else supported


def unsupported_version_problem(version: EtcdVersion) -> str | None:
    """Why spec.version cannot be run at all, if it cannot."""
    if support_of(version) != "unsupported":
        return None
    return f"etcd {version} is not supported; use one of {accepted_versions_text()}, e.g. {c.DEFAULT_VERSION}"


def next_minor_version(version: EtcdVersion) -> str:
    return f"{version.major}.{version.minor + 1}"


def recommended_version(minor: str) -> str:
    """The newest patch release of `minor` we know, else `<minor>.x`."""
    return c.RECOMMENDED_VERSIONS.get(minor, f"{minor}.x")


def upgrade_source_warning(version: EtcdVersion) -> str:
    """What a cluster running (or asked to run) an upgrade-source version is told."""
    target = next_minor_version(version)
    return (
        f"etcd {version.minor_version} is supported only as an upgrade source: set spec.version to "
        f"{recommended_version(target)} (one minor version at a time), then to {c.DEFAULT_VERSION}"
    )


def version_change_problem(running: Iterable[EtcdVersion], target: EtcdVersion) -> str | None:
    """Why members running `running` cannot be rolled to `target`, if they cannot. Checked
    against every member that ran, so a half-done upgrade cannot be redirected past a step."""
    versions = sorted(set(running))
    if not versions:
        return None
    lowest, highest = versions[0], versions[-1]
    if (target.major, target.minor) < (highest.major, highest.minor):
        return (
            f"spec.version {target} would downgrade members running etcd {highest}; etcd cannot "
            f"downgrade across minor versions: set spec.version to {highest.minor_version}.x again "
            f"(or restore a backup into a new cluster)"
        )
    if target.major != lowest.major or target.minor > lowest.minor + 1:
        step = next_minor_version(lowest)
        return (
            f"spec.version {target} skips a minor version: members run etcd {lowest} and etcd "
            f"upgrades one minor version at a time; upgrade to {step}.x first "
            f"(spec.version {recommended_version(step)})"
        )
    if target.minor_version != lowest.minor_version:
        minimum_text = c.MINIMUM_VERSION_BEFORE_MINOR_UPGRADE.get(target.minor_version)
        minimum = EtcdVersion.of(minimum_text) if minimum_text else None
        too_old = [v for v in versions if minimum is not None and v.minor_version == minimum.minor_version and v < minimum]
        if minimum is not None and too_old:
            return (
                f"spec.version {target}: etcd's upgrade guide requires every member on "
                f"{minimum} or later before upgrading to {target.minor_version}, and members run "
                f"etcd {too_old[0]}; upgrade to the newest {minimum.minor_version} first "
                f"(spec.version {recommended_version(minimum.minor_version)})"
            )
    return None
