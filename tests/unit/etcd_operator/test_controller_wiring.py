"""The controller's wiring: the flags reach the planner as its policy, and the executor writes
through to the very caches the observation reads (or the next pass would not see what this one
created)."""
from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry

from etcd_operator.controller import Controller
from etcd_operator.metrics import OperatorMetrics
from etcd_operator.planning import PlanningPolicy
from etcd_operator.settings import parse_settings
from kube_adapter.client import KubeApi


def _controller(*argv: str) -> Controller:
    return Controller(KubeApi(), parse_settings(list(argv)), OperatorMetrics(CollectorRegistry()), threading.Event())


def test_the_unhealthy_member_timeout_reaches_the_planner_as_policy() -> None:
    assert _controller("--unhealthy-member-timeout-seconds=60").context.policy == PlanningPolicy(60.0)
    assert _controller().context.policy == PlanningPolicy(300.0)
    assert _controller("--unhealthy-member-timeout-seconds=0").context.policy == PlanningPolicy(None)


def test_the_executor_writes_through_to_the_caches_the_observation_reads() -> None:
    context = _controller().context
    executor, kube = context.executor, context.kube
    assert executor.pdbs is not None
    for written, read in ((executor.pods, kube.pods), (executor.services, kube.services),
                          (executor.pvcs, kube.pvcs), (executor.pdbs, kube.pdbs)):
        assert written.cache is read.cache
    assert context.clusters is kube.clusters, "status writes land in the cache the pass reads the cluster from"
