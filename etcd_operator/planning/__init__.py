"""The EtcdCluster planner: `plan_next_action(observed, policy) -> Action`, pure (it imports nothing
that runs a process, dials the network or talks to Kubernetes: an import-linter contract holds it).
The rule order is one list in order.py; each rule group has its own module."""
from etcd_operator.planning.context import PlanningPolicy
from etcd_operator.planning.order import plan_next_action

__all__ = ["PlanningPolicy", "plan_next_action"]
