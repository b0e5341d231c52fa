"""The etcd operator's Action base: the runtime's Action with an event reason and type."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from operator_runtime import actions as runtime

Purpose = Literal["scale", "replace", "upgrade"]
InitialCluster = tuple[tuple[str, str], ...]  # (member name, peer URL) pairs


@dataclass(frozen=True)
class _Action(runtime.Action):
    """The runtime's Action with the etcd operator's event: `event_reason` (None: no event) and
    `event_type`; an action without a `reason` field of its own gives its event reason."""

    event_reason: ClassVar[str | None] = None
    event_type: ClassVar[str] = "Normal"

    def default_reason(self) -> str:
        return self.event_reason or ""

    def describe(self) -> str:
        raise NotImplementedError
