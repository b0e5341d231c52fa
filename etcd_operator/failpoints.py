"""Failpoints: the operator dies just before or just after one of its effects, so tests can prove
that a restart at any instant converges. Off, and free, unless ETCD_OPERATOR_FAILPOINTS is set.

Environment (read once, at start-up; a bad value stops the operator with a clear error):

- ``ETCD_OPERATOR_FAILPOINTS``: comma-separated ``<when>:<effect>``, ``when`` is ``before`` or
  ``after``, ``effect`` one of ``EFFECTS``; e.g. ``before:member-add,after:promote``.
- ``ETCD_OPERATOR_FAILPOINTS_NAMESPACE``: only effects on clusters of this namespace (default: any).
- ``ETCD_OPERATOR_FAILPOINTS_FIRED_FILE``: a file on a volume that outlives the container (an
  emptyDir). A failpoint that fires is appended to it first, and one listed there is disarmed: each
  fires once per pod, and the restarted operator runs on. Without it a failpoint fires every time.

At a failpoint the operator logs ``failpoint <when>:<effect> fired`` and exits at once with
``FAILPOINT_EXIT_CODE`` (``os._exit``: no cleanup, no lease release, as if killed).
"""
from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NoReturn

log = logging.getLogger(__name__)

FAILPOINTS_ENV = "ETCD_OPERATOR_FAILPOINTS"
NAMESPACE_ENV = "ETCD_OPERATOR_FAILPOINTS_NAMESPACE"
FIRED_FILE_ENV = "ETCD_OPERATOR_FAILPOINTS_FIRED_FILE"
FAILPOINT_EXIT_CODE = 86

When = Literal["before", "after"]
WHENS: tuple[When, ...] = ("before", "after")
MEMBER_ADD, POD_CREATE, PROMOTE = "member-add", "pod-create", "promote"
MOVE_LEADER, MEMBER_REMOVE, POD_DELETE = "move-leader", "member-remove", "pod-delete"
DRAIN = "drain"  # the serving label removed from a member pod before its removal or restart
IMAGE_CHANGE = "image-change"  # a member's etcd image changed in its running pod (an in-place upgrade)
EFFECTS = (MEMBER_ADD, POD_CREATE, PROMOTE, MOVE_LEADER, MEMBER_REMOVE, POD_DELETE, DRAIN, IMAGE_CHANGE)


def failpoint_name(when: When, effect: str) -> str:
    return f"{when}:{effect}"


def parse_failpoints(text: str) -> frozenset[str]:
    """The failpoints named in ETCD_OPERATOR_FAILPOINTS, each checked (ValueError otherwise)."""
    names: set[str] = set()
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        when, _, effect = item.partition(":")
        if when not in WHENS or effect not in EFFECTS:
            raise ValueError(
                f"{FAILPOINTS_ENV}: {item!r} is not <when>:<effect> with when one of {', '.join(WHENS)} "
                f"and effect one of {', '.join(EFFECTS)}")
        names.add(item)
    return frozenset(names)


def _exit_now(code: int) -> NoReturn:
    os._exit(code)


@dataclass
class Failpoints:
    """The armed failpoints; `Failpoints()` has none and does nothing."""

    armed: frozenset[str] = frozenset()
    namespace: str | None = None
    fired_file: Path | None = None
    fired: set[str] = field(default_factory=set)
    exit: Callable[[int], NoReturn] = _exit_now

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> Failpoints:
        armed = parse_failpoints(environ.get(FAILPOINTS_ENV, ""))
        if not armed:
            return cls()
        path = environ.get(FIRED_FILE_ENV) or None
        fired_file = Path(path) if path else None
        fired: set[str] = set()
        if fired_file is not None and fired_file.exists():
            fired = {line.strip() for line in fired_file.read_text().splitlines() if line.strip()}
        failpoints = cls(armed, environ.get(NAMESPACE_ENV) or None, fired_file, fired)
        log.warning("failpoints armed (testing only; the operator exits at each): %s; namespace %s; "
                    "already fired: %s", ", ".join(sorted(armed)), failpoints.namespace or "any",
                    ", ".join(sorted(fired & armed)) or "none")
        return failpoints

    @contextmanager
    def around(self, effect: str, namespace: str) -> Iterator[None]:
        """The failpoints `before:<effect>` and, once the block succeeded, `after:<effect>`."""
        self.reach("before", effect, namespace)
        yield
        self.reach("after", effect, namespace)

    def reach(self, when: When, effect: str, namespace: str) -> None:
        if not self.armed:
            return
        name = failpoint_name(when, effect)
        if name not in self.armed or name in self.fired:
            return
        if self.namespace is not None and namespace != self.namespace:
            return
        self.fired.add(name)
        if self.fired_file is not None:
            with self.fired_file.open("a") as f:
                f.write(name + "\n")
                f.flush()
                os.fsync(f.fileno())
        log.critical("failpoint %s fired (namespace %s): exiting with code %d", name, namespace, FAILPOINT_EXIT_CODE)
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stderr.flush()
        sys.stdout.flush()
        self.exit(FAILPOINT_EXIT_CODE)
