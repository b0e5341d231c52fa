"""The restart back-off's cap: the sandbox's 30 s, lowered per pod by a sandbox-only annotation (as
the real kubelet's per-node `crashLoopBackOff.maxContainerRestartPeriod` lowers its 5 min)."""
from __future__ import annotations

from typing import Any

import pytest

from kube_sandbox.kubelet.pods import (
    MAX_RESTART_BACKOFF_ANNOTATION,
    RESTART_BACKOFF_INITIAL_SECONDS,
    RESTART_BACKOFF_MAX_SECONDS,
    max_restart_backoff,
)


def _pod(value: Any = None) -> dict[str, Any]:
    annotations = {} if value is None else {MAX_RESTART_BACKOFF_ANNOTATION: value}
    return {"metadata": {"name": "p", "annotations": annotations}}


@pytest.mark.parametrize(("value", "cap"), [
    (None, RESTART_BACKOFF_MAX_SECONDS),
    ("2", 2.0),
    ("0", RESTART_BACKOFF_INITIAL_SECONDS),
    ("600", RESTART_BACKOFF_MAX_SECONDS),
    ("soon", RESTART_BACKOFF_MAX_SECONDS),
])
def test_the_cap_is_the_annotations_within_the_sandboxs_bounds(value: Any, cap: float) -> None:
    assert max_restart_backoff(_pod(value)) == cap


def test_a_pod_without_annotations_gets_the_default_cap() -> None:
    assert max_restart_backoff({"metadata": {"name": "p"}}) == RESTART_BACKOFF_MAX_SECONDS
