"""etcd's alarms as members report them: `memberID:<id> alarm:<NOSPACE|CORRUPT>` strings in the
`errors` of `endpoint status` (a local read of the replicated alarm store, unlike the alarm API,
whose every call is a raft proposal). An alarm raised for member ID 0 prints without its member
(`alarm:CORRUPT `: protobuf's text form leaves zero fields out): etcd 3.5's periodic corruption
check and 3.6's compaction hash check raise it when no member can be singled out; it is
cluster-wide (`Alarm.cluster_wide`).

NOSPACE: the database reached the backend quota; etcd refuses writes (reads, deletes and
compaction still work) until the alarm is disarmed. CORRUPT: a member's data disagrees with the
others'; etcd refuses every key-value request until the alarm is disarmed.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

NOSPACE = "NOSPACE"
CORRUPT = "CORRUPT"
# The member ID is optional: protobuf's text form leaves out a zero member ID ("alarm:CORRUPT ").
_ALARM_PATTERN = re.compile(r"(?:\bmemberID:(\d+)\s+)?\balarm:([A-Z]+)")


@dataclass(frozen=True, order=True)
class Alarm:
    """One raised alarm: its kind (NOSPACE, CORRUPT) and the member it was raised for."""

    kind: str
    member_id: int

    @property
    def cluster_wide(self) -> bool:
        """Raised for member ID 0: for no member in particular (etcd refuses the writes all the same)."""
        return self.member_id == 0

    def describe(self) -> str:
        if self.cluster_wide:
            return f"{self.kind} (member ID 0: the whole cluster)"
        return f"{self.kind} (member {self.member_id:x})"


def parse_alarms(errors: Iterable[str]) -> tuple[Alarm, ...]:
    """The alarms among a status's `errors` (other errors, like "no leader", are left out)."""
    found = {Alarm(kind=match.group(2), member_id=int(match.group(1) or 0))
             for error in errors for match in _ALARM_PATTERN.finditer(error)}
    return tuple(sorted(found))


def is_alarm(error: str) -> bool:
    return _ALARM_PATTERN.search(error) is not None
