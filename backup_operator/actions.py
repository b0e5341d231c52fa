"""The actions `planning.plan_next_action` chooses from; the supervisor carries them out (the
backup itself through `acting.py`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Action:
    has_effect: ClassVar[bool] = True

    def describe(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class RejectSpec(Action):
    """The spec cannot be acted on: say why in status and a Warning event, once per generation."""

    reason: str
    message: str

    def describe(self) -> str:
        return f"cannot back up: {self.reason}: {self.message}"


@dataclass(frozen=True)
class TakeBackup(Action):
    """A backup is due now."""

    why: str

    def describe(self) -> str:
        return f"taking a backup ({self.why})"


@dataclass(frozen=True)
class Wait(Action):
    """The next backup is due in `seconds`."""

    seconds: float
    why: str
    has_effect: ClassVar[bool] = False

    def describe(self) -> str:
        return f"{self.why} in {self.seconds:.0f}s"


@dataclass(frozen=True)
class Done(Action):
    """Nothing to do until the spec changes (a resync still looks)."""

    why: str
    has_effect: ClassVar[bool] = False

    def describe(self) -> str:
        return self.why
