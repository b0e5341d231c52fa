"""A stand-in for EtcdAccess (etcd_common.etcd.access) in executor tests: every call on a client
it hands out is recorded, with the endpoints that client was made for, and answers None."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class EtcdCall:
    method: str  # the client method, e.g. "member_remove"
    endpoints: list[str]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        """`member_remove 1004`: the method and its first argument (a member ID in hex)."""
        if not self.args:
            return self.method
        first = self.args[0]
        return f"{self.method} {first:x}" if isinstance(first, int) else f"{self.method} {first}"


class RecordingEtcd:
    """`calls`: what was asked, in order. `log`: a list shared with other fakes (the Kubernetes
    API's), to which each call is also appended as text, so a test sees one sequence."""

    def __init__(self, log: list[str] | None = None) -> None:
        self.calls: list[EtcdCall] = []
        self.log = log

    def client(self, cluster: Any, endpoints: Any, **options: Any) -> Any:
        return _RecordingClient(self, list(endpoints))

    def record(self, call: EtcdCall) -> None:
        self.calls.append(call)
        if self.log is not None:
            self.log.append(str(call))


class _RecordingClient:
    def __init__(self, etcd: RecordingEtcd, endpoints: list[str]) -> None:
        self._etcd, self._endpoints = etcd, endpoints

    def __getattr__(self, method: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> None:
            self._etcd.record(EtcdCall(method, self._endpoints, args, kwargs))
        return call
