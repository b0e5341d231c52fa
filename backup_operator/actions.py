"""The actions `planning.plan_next_action` chooses from; `acting.ActionExecutor` carries out those
with an effect (a backup, a trial restore, a rejected spec's status)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from operator_runtime import actions as runtime


@dataclass(frozen=True)
class Action(runtime.Action):
    """The runtime's Action (kind, reason, describe, has_effect)."""

    def due_since(self) -> datetime | None:
        """Since when an action with an effect is due (its place in the slots' queue); None: from now."""
        return None


@dataclass(frozen=True)
class RejectSpec(Action):
    """The spec cannot be acted on: say why in status and a Warning event (once per generation)."""

    reason: str
    message: str
    has_effect: ClassVar[bool] = False  # a report: status and a Warning event

    def describe(self) -> str:
        return f"cannot back up: {self.reason}: {self.message}"


@dataclass(frozen=True)
class TakeBackup(Action):
    """A backup is due now; `due` is since when (None: from now on), the order in which backups
    due at once wait for a slot (`slots.py`)."""

    why: str
    due: datetime | None = None

    def describe(self) -> str:
        return f"take a backup ({self.why})"

    def due_since(self) -> datetime | None:
        return self.due


@dataclass(frozen=True)
class RestoreOnTrial(Action):
    """spec.trialRestore: the newest backup is to be restored into a throwaway etcd and checked
    now (`verification.py`, `trial_restore.py`); `due` orders it for a slot as TakeBackup's."""

    why: str
    due: datetime | None = None

    def describe(self) -> str:
        return f"trial restore of the newest backup ({self.why})"

    def due_since(self) -> datetime | None:
        return self.due


@dataclass(frozen=True)
class Wait(Action):
    """The next backup is due in `seconds`."""

    seconds: float
    why: str
    has_effect: ClassVar[bool] = False

    def describe(self) -> str:
        return f"next backup due in {self.seconds:.0f}s ({self.why})"


@dataclass(frozen=True)
class Done(Action):
    """Nothing to do until the spec changes (a resync still looks)."""

    why: str
    has_effect: ClassVar[bool] = False

    def describe(self) -> str:
        return self.why
