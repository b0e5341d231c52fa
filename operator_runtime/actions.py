"""One base for every operator's actions (`Action`: kind, reason, describe, has_effect) and one
shape for carrying them out (`ActionExecutor`: each action type to its effect, in one table).
A planner returns one `Action` per pass; the operator's `acting.py` executes it."""
from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

log = logging.getLogger(__name__)


class _OwnReasonElse:
    """`Action.reason` of an action without a `reason` field of its own: `default_reason()`.

    A non-data descriptor, so a subclass's dataclass field `reason` (stored on the instance) wins;
    read on the class it is MISSING, so `dataclasses` does not take it for that field's default."""

    def __get__(self, instance: Action | None, owner: type[Any]) -> Any:
        if instance is None:
            return dataclasses.MISSING
        return instance.default_reason()


class Action:
    """What a planner chose for one pass.

    - `kind`: a short stable name (`KIND`, else the class name), fit for a metrics label;
    - `reason`: why, as the action says it: its own `reason` field where it has one (a CamelCase
      word for conditions and events, or a sentence), else `default_reason()` ("" unless an
      operator's base says otherwise);
    - `describe()`: for logs and events;
    - `has_effect`: False for an action with nothing to carry out (waiting, done, a report).
    """

    KIND: ClassVar[str] = ""
    has_effect: ClassVar[bool] = True

    if TYPE_CHECKING:
        @property
        def reason(self) -> str: ...
    else:
        reason = _OwnReasonElse()

    @property
    def kind(self) -> str:
        return self.KIND or type(self).__name__

    def default_reason(self) -> str:
        return ""

    def describe(self) -> str:
        return self.kind


SubjectT = TypeVar("SubjectT")  # what an effect works on: the pass's observation
ResultT = TypeVar("ResultT")  # what an effect returns
Effect = Callable[[Any, Any, SubjectT], ResultT]


class ActionExecutor(Generic[SubjectT, ResultT]):
    """Carries out an action by its type: `effects()` maps each action class to the function that
    carries it out (called with the executor, the action and the subject). An action with an
    effect but none in the table is a bug (NotImplementedError); one without (a wait) may have one
    (say, writing its status) or none (then `execute` returns None)."""

    def effects(self) -> Mapping[type[Any], Effect[SubjectT, ResultT]]:
        raise NotImplementedError

    def execute(self, action: Action, subject: SubjectT) -> ResultT | None:
        effect = self.effects().get(type(action))
        if effect is None:
            if action.has_effect:
                raise NotImplementedError(f"no effect for {type(action).__name__}")
            return None
        started = time.monotonic()
        try:
            return effect(self, action, subject)
        finally:
            log.debug("%s carried out in %.3fs", action.kind, time.monotonic() - started)
