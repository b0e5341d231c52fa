"""Object keys of backups and which of them retention keeps: pure.

One-shot backups write `path` as given; periodic ones `<path>_v<revision>_<UTC time>` with the time
as `2006-01-02-15:04:05` (Go layout; CoreOS's scheme, so CoreOS-era tooling still finds them).
Retention orders by the time a backup was taken, read from the key (then revision), never by
revision first (a cluster deleted and recreated under its name starts again at revision 1, and its
new backups must not be the ones deleted) nor by string order (CoreOS sorted strings and deleted the
newest backup once the revision gained a digit). It only ever touches keys of exactly this scheme
for this path whose time parses: foreign objects under the same prefix, and keys whose time cannot
be read (a 13th month, say), are never deleted, since nothing says they are older than what is kept.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

TIME_FORMAT: Final = "%Y-%m-%d-%H:%M:%S"
_TIME_PATTERN: Final = r"\d{4}-\d{2}-\d{2}-\d{2}:\d{2}:\d{2}"


@dataclass(frozen=True, order=True)
class PeriodicKey:
    """A key of the periodic scheme, ordered oldest first by the time it was taken, then revision."""

    time: datetime
    revision: int
    key: str


def periodic_key(base_key: str, revision: int, time: datetime) -> str:
    """`<base_key>_v<revision>_<UTC time>`."""
    utc = time.astimezone(UTC) if time.tzinfo else time
    return f"{base_key}_v{revision}_{utc.strftime(TIME_FORMAT)}"


def parse_periodic_key(base_key: str, key: str) -> PeriodicKey | None:
    """The revision and time of `key` if it follows the periodic scheme for `base_key` and its time
    is a real one, else None."""
    match = re.fullmatch(re.escape(base_key) + rf"_v(\d+)_({_TIME_PATTERN})", key)
    if match is None:
        return None
    try:
        time = datetime.strptime(match.group(2), TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None
    return PeriodicKey(time, int(match.group(1)), key)


def our_backups(base_key: str, keys: Iterable[str]) -> list[PeriodicKey]:
    """The keys that are periodic backups of `base_key`, oldest first."""
    parsed = (parse_periodic_key(base_key, key) for key in keys)
    return sorted(p for p in parsed if p is not None)


def keys_to_delete(base_key: str, keys: Iterable[str], max_backups: int, *, keep: str = "") -> list[str]:
    """Which of `keys` retention deletes so that the newest `max_backups` periodic backups of
    `base_key` remain; nothing when `max_backups` is 0 (keep all). Other keys are never named.

    `keep` (the backup just uploaded) is never named and counts as one of those kept, even when
    its time is older than the others' (the operator's clock went back): the backup a status is
    about to report must exist."""
    if max_backups <= 0:
        return []
    ours = our_backups(base_key, keys)
    others = [p for p in ours if p.key != keep]
    room = max_backups - 1 if len(others) < len(ours) else max_backups
    return [p.key for p in others[:max(0, len(others) - room)]]
