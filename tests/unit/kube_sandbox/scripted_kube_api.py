"""A stand-in for the kubelet's KubeApi: records every call and answers from a script."""
from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Union

from kube_sandbox.kubelet.kube_api import ApiError

Answer = Union[dict[str, Any], ApiError, Callable[[dict[str, Any] | None], dict[str, Any]]]


@dataclass
class Call:
    method: str
    path: str
    body: dict[str, Any] | None
    content_type: str = ""


@dataclass
class ScriptedKubeApi:
    """answers[(method, path)] is a dict to return, an ApiError to raise, or a function of the body.
    Unscripted calls echo the body back (patch/create) or raise KeyError (get)."""

    answers: dict[tuple[str, str], Answer] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)

    def _answer(self, method: str, path: str, body: dict[str, Any] | None, content_type: str = "") -> dict[str, Any]:
        self.calls.append(Call(method, path, copy.deepcopy(body), content_type))
        answer = self.answers.get((method, path))
        if answer is None:
            if method == "GET":
                raise KeyError(f"unscripted GET {path}")
            return copy.deepcopy(body or {})
        if isinstance(answer, ApiError):
            raise answer
        if callable(answer):
            return answer(body)
        return copy.deepcopy(answer)

    def calls_to(self, method: str, path: str) -> list[Call]:
        return [c for c in self.calls if c.method == method and c.path == path]

    def get(self, path: str, **query: Any) -> dict[str, Any]:
        return self._answer("GET", path, None)

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._answer("POST", path, body)

    def patch(self, path: str, body: dict[str, Any], *, content_type: str = "") -> dict[str, Any]:
        return self._answer("PATCH", path, body, content_type)

    def delete(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._answer("DELETE", path, body)
