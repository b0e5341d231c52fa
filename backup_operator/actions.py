"""The actions `planning.plan_next_action` chooses from; the supervisor carries them out (the
backup itself through `acting.py`)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Action:
    pass


@dataclass(frozen=True)
class RejectSpec(Action):
    """The spec cannot be acted on: say why in status and a Warning event (once per generation)."""

    reason: str
    message: str


@dataclass(frozen=True)
class TakeBackup(Action):
    """A backup is due now; `due` is since when (None: from now on), the order in which backups
    due at once wait for a slot (`slots.py`)."""

    why: str
    due: datetime | None = None


@dataclass(frozen=True)
class RestoreOnTrial(Action):
    """spec.trialRestore: the newest backup is to be restored into a throwaway etcd and checked
    now (`verification.py`, `trial_restore.py`); `due` orders it for a slot as TakeBackup's."""

    why: str
    due: datetime | None = None


@dataclass(frozen=True)
class Wait(Action):
    """The next backup is due in `seconds`."""

    seconds: float
    why: str


@dataclass(frozen=True)
class Done(Action):
    """Nothing to do until the spec changes (a resync still looks)."""

    why: str
