"""Object keys of backups and which of them retention keeps: pure.

One-shot backups write `path` as given; periodic ones `<path>_v<revision>_<UTC time>` with the time
as `2006-01-02-15:04:05` (Go layout; CoreOS's scheme, so CoreOS-era tooling still finds them).
Retention orders by (revision, time) parsed from the key, never by string order (CoreOS sorted
strings and deleted the newest backup once the revision gained a digit), and only ever touches
keys of exactly this scheme for this path: foreign objects under the same prefix are never deleted.
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
    """A key of the periodic scheme, ordered oldest first by revision, then time."""

    revision: int
    time: datetime
    key: str


def periodic_key(base_key: str, revision: int, time: datetime) -> str:
    """`<base_key>_v<revision>_<UTC time>`."""
    utc = time.astimezone(UTC) if time.tzinfo else time
    return f"{base_key}_v{revision}_{utc.strftime(TIME_FORMAT)}"


def parse_periodic_key(base_key: str, key: str) -> PeriodicKey | None:
    """The revision and time of `key` if it follows the periodic scheme for `base_key`, else None."""
    match = re.fullmatch(re.escape(base_key) + rf"_v(\d+)_({_TIME_PATTERN})", key)
    if match is None:
        return None
    try:
        time = datetime.strptime(match.group(2), TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None
    return PeriodicKey(int(match.group(1)), time, key)


def our_backups(base_key: str, keys: Iterable[str]) -> list[PeriodicKey]:
    """The keys that are periodic backups of `base_key`, oldest first."""
    parsed = (parse_periodic_key(base_key, key) for key in keys)
    return sorted(p for p in parsed if p is not None)


def keys_to_delete(base_key: str, keys: Iterable[str], max_backups: int) -> list[str]:
    """Which of `keys` retention deletes so that the newest `max_backups` periodic backups of
    `base_key` remain; nothing when `max_backups` is 0 (keep all). Other keys are never named."""
    if max_backups <= 0:
        return []
    ours = our_backups(base_key, keys)
    return [p.key for p in ours[:max(0, len(ours) - max_backups)]]
