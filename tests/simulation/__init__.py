"""A deterministic fault simulator for the EtcdCluster planner (issue 41; docs/dev/simulator.md).

The pure planner (`etcd_operator.planning.plan_next_action`) drives a model world of one
EtcdCluster: members with raft index, revision, data, keyspace hashes and alarms; pods, PVCs,
nodes (NotReady, taints, taint eviction, Node objects deleted); partitions between any two parties
including the operator; EtcdBackups with their incarnation; issued TLS Secrets through a CA
rotation, with the CAs each member trusts (loaded when its etcd starts); a person's recovery
annotation. Each step the world settles (physics.py), the operator
observes it (observe.py), plans, writes its status (etcd_operator.status.compute_status) and its
action is applied (effects.py, possibly cut by a crash); then every invariant is checked
(invariants.py) and faults are drawn from `random.Random(seed)` (faults.py). The same seed gives
the same run: `python -m tests.simulation --seed N --verbose` replays one, step by step.

Modules: world.py (state), physics.py (etcd, kubelet, node controller, clients), observe.py
(the ObservedCluster), effects.py (each action's writes), tls_model.py (issued Secrets and trust),
faults.py, invariants.py, run.py (loop and CLI).
"""
