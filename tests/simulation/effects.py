"""Each action's effect on the world, as a list of writes in the order the executor (acting.py)
makes them: a crash of the operator may cut the list anywhere (the action half-applied). An
etcd call needs what etcd needs (a quorum, a reachable member) or raises `Refused`: the
executor's error, after which the rest of the action does not happen. An action class with no
entry in EFFECTS fails the run (`UnmodelledAction`): a new action needs a model effect."""
from __future__ import annotations

from collections.abc import Callable

from etcd_operator import actions as a
from etcd_operator.manifests import build_recovery_seed_pod, pod_policy_hash
from etcd_operator.observed import ObservedCluster
from tests.simulation import tls_model
from tests.simulation.observe import reachable as reachable_member
from tests.simulation.physics import NOSPACE
from tests.simulation.world import GRACE_SECONDS, PVC, EtcdState, MemberRecord, Pod, Refused, RemovalFacts, World

Write = tuple[str, Callable[[], None]]
FITS_QUOTA = 0.9  # NOSPACE disarmed with the data in use at or above this share of the real quota returns at once


__all__ = ["EFFECTS", "Refused", "UnmodelledAction", "writes_of"]


class UnmodelledAction(AssertionError):
    pass


def writes_of(world: World, action: a.Action, observed: ObservedCluster) -> list[Write]:
    effect = EFFECTS.get(type(action))
    if effect is None:
        raise UnmodelledAction(f"the simulator has no model effect for {type(action).__name__}: add one to "
                               f"tests/simulation/effects.py ({action.describe()})")
    return effect(world, action, observed)


# --- helpers


def _serving_state(world: World, observed: ObservedCluster) -> EtcdState:
    """The etcd cluster the operator talks to (the one that answered its member list), with a quorum."""
    state = world.etcd.get(observed.cluster_id)
    if state is None or not world.quorum_group(state):
        raise Refused("etcdserver: request timed out (no quorum)")
    return state


def create_pod(world: World, name: str, state: str, **fields: object) -> None:
    if name in world.pods:
        raise Refused(f"pods {name} already exists")
    spec = world.spec
    if spec.uses_persistent_volumes and name not in world.pvcs:
        world.pvcs[name] = PVC(name, world.new_uid("pvc"))
    pod = Pod(name, world.new_uid("pod"), world.now, state, spec.image, spec.version, pod_policy_hash(spec))
    for key, value in fields.items():
        setattr(pod, key, value)
    tls_model.mount(world, pod)
    world.pods[name] = pod


def delete_pod(world: World, name: str, uid: str = "") -> None:
    pod = world.pods.get(name)
    if pod is None or (uid and pod.uid != uid):
        raise Refused(f"pods {name} not found (or another UID)")
    if pod.deleting_at is None:
        pod.deleting_at = world.now + GRACE_SECONDS


def _no_effect(world: World, action: a.Action, observed: ObservedCluster) -> list[Write]:
    return []


# --- objects


def _create_services(world: World, action: a.CreateServices, observed: ObservedCluster) -> list[Write]:
    return [(f"create service {name}", lambda name=name: world.services.add(name)) for name in action.names]  # type: ignore[misc]


def _create_seed(world: World, action: a.CreateSeedMember, observed: ObservedCluster) -> list[Write]:
    return [("create seed pod", lambda: create_pod(world, action.member_name, "new",
                                                   initial_cluster=action.initial_cluster))]


def _create_member_pod(world: World, action: a.CreateMemberPod, observed: ObservedCluster) -> list[Write]:
    alone = [name for name, _ in action.initial_cluster] == [action.member_name]
    return [("create member pod", lambda: create_pod(world, action.member_name, "existing", rejoins_on_data=alone,
                                                     initial_cluster=action.initial_cluster))]


def _set_serving(world: World, action: a.SetServing, observed: ObservedCluster) -> list[Write]:
    def write() -> None:
        pod = world.pods.get(action.pod_name)
        if pod is None:
            raise Refused(f"pods {action.pod_name} not found")
        pod.serving = action.serving
    return [("label pod", write)]


def _delete_pod(world: World, action: a.DeletePod, observed: ObservedCluster) -> list[Write]:
    return [("delete pod", lambda: delete_pod(world, action.pod_name, action.pod_uid))]


def _clear_leaving_mark(world: World, action: a.ClearLeavingMark, observed: ObservedCluster) -> list[Write]:
    def clear() -> None:
        if action.pvc_name in world.pvcs:
            world.pvcs[action.pvc_name].leaving = False
    return [("clear pvc leaving mark", clear)]


def _delete_pvc(world: World, action: a.DeletePVC, observed: ObservedCluster) -> list[Write]:
    def write() -> None:
        pvc = world.pvcs.get(action.pvc_name)
        if pvc is None:
            raise Refused(f"persistentvolumeclaims {action.pvc_name} not found")
        if action.pvc_name in world.pods:
            pvc.deleting = True  # the pvc-protection finalizer holds it while a pod uses it
        else:
            del world.pvcs[action.pvc_name]
    return [("delete pvc", write)]


# --- etcd membership


def _add_member(world: World, action: a.AddMember, observed: ObservedCluster) -> list[Write]:
    def member_add() -> None:
        state = _serving_state(world, observed)
        if any(m.learner for m in state.members.values()) and action.as_learner:
            raise Refused("etcdserver: too many learner members in cluster")
        state.members[action.member_name] = MemberRecord(0x1000 + world.next_serial(), action.member_name,
                                                         action.peer_url, action.as_learner)
    return [("member add", member_add),
            ("create member pod", lambda: create_pod(world, action.member_name, "existing",
                                                     initial_cluster=action.initial_cluster))]


def _promote(world: World, action: a.PromoteMember, observed: ObservedCluster) -> list[Write]:
    def write() -> None:
        state = _serving_state(world, observed)
        record = state.members.get(action.member_name)
        data = world.data_of(action.member_name)
        leader = world.data_of(state.leader or "")
        if record is None or data is None or leader is None or data.raft_index < leader.raft_index:
            raise Refused("etcdserver: can only promote a learner member which is in sync with leader")
        record.learner = False
    return [("member promote", write)]


def remove_member(world: World, observed: ObservedCluster, name: str, member_id: int, purpose: str) -> None:
    state = _serving_state(world, observed)
    record = state.members.get(name)
    if record is None or record.id != member_id:
        raise Refused(f"etcdserver: member {member_id:x} not found")
    world.events.append(f"removed:{name}:{purpose}")
    world.removed.append((name, purpose, _snapshot_peers(world, state, name)))
    del state.members[name]
    data = world.data_of(name)
    if data is not None and data.member_id == member_id:
        data.removed = True
    if state.leader == name:
        state.leader = None


def _snapshot_peers(world: World, state: EtcdState, name: str) -> RemovalFacts:
    data = world.data_of(name)
    leader = world.data_of(state.leader or "")
    leader_sound = leader is None or leader.lineage == 0
    others = [world.data_of(m.name) for m in state.voters() if m.name != name]
    other_sound = sum(1 for other in others if other is not None and other.lineage == 0)
    if data is None or world.etcd_of(name) is not state:
        return RemovalFacts(False, 0, len(state.voters()), "not running", leader_sound, other_sound, False)
    pod = world.pods[name]
    agree = [m.name for m in state.voters() if world.etcd_of(m.name) is state
             and world.pods_linked(pod, world.pods[m.name]) and world.data_of(m.name).lineage == data.lineage]  # type: ignore[union-attr]
    doomed = name not in world.pvcs and pod.deleting_at is not None
    return RemovalFacts(data.lineage == 0, len(agree), len(state.voters()), ", ".join(agree), leader_sound,
                        other_sound, doomed)


def _remove(world: World, action: a.RemoveMember, observed: ObservedCluster) -> list[Write]:
    return [("member remove", lambda: remove_member(world, observed, action.member_name, action.member_id,
                                                    action.purpose))]


def _move_leader(world: World, action: a.MoveLeader, observed: ObservedCluster) -> list[Write]:
    def write() -> None:
        state = _serving_state(world, observed)
        if state.leader != action.from_member_name or action.to_member_name not in world.quorum_group(state):
            raise Refused("etcdserver: bad leader transferee")
        state.leader = action.to_member_name
    return [("move leader", write)]


def _stop_member(world: World, action: a.StopMember, observed: ObservedCluster) -> list[Write]:
    def mark() -> None:
        if action.pvc_name and action.pvc_name in world.pvcs:
            world.pvcs[action.pvc_name].leaving = True
    writes: list[Write] = [("mark pvc leaving", mark)] if action.pvc_name else []
    return [*writes, ("delete pod", lambda: delete_pod(world, action.pod_name, action.pod_uid)),
            ("member remove", lambda: remove_member(world, observed, action.member_name, action.member_id, "stop"))]


def _upgrade(world: World, action: a.UpgradeMember, observed: ObservedCluster) -> list[Write]:
    def in_place() -> None:
        pod = world.pods.get(action.pod_name)
        if pod is None:
            raise Refused(f"pods {action.pod_name} not found")
        pod.image, pod.running = action.image, False
    if action.in_place:
        return [("patch image", in_place)]
    return [("delete pod", lambda: delete_pod(world, action.pod_name, action.pod_uid))]


# --- maintenance


def _defragment(world: World, action: a.Defragment, observed: ObservedCluster) -> list[Write]:
    """ActionExecutor._defragment: defragment, then record the outcome on the pod and serve it
    again (drained first); a failure is recorded as defragment-failed-at and raised after."""
    def write() -> None:
        pod = world.pods.get(action.pod_name)
        if pod is None or (action.pod_uid and pod.uid != action.pod_uid):
            raise Refused(f"pods {action.pod_name} not found (or another UID)")
        data = world.data_of(action.member_name)
        failed = ""
        if data is None or reachable_member(world, action.member_name) is None:
            failed = "context deadline exceeded"
        elif world.now < pod.defragment_fails_until:
            failed = "rpc error: code = Unavailable (the defragmentation did not finish: a slow disk)"
        world.defragmented.append((action.member_name, pod.defragment_failed_at, not failed))
        if failed:  # a timeout may leave etcd defragmenting: the member stays drained (defragment_may_go_on)
            pod.defragment_failed_at = world.now
            pod.serving = pod.serving or not failed.startswith("context deadline")
            raise Refused(failed)
        assert data is not None
        data.db_size = data.in_use
        pod.defragmented_at, pod.serving = world.now, True
    return [("defragment", write)]


def _compact(world: World, action: a.CompactHistory, observed: ObservedCluster) -> list[Write]:
    def write() -> None:
        state = _serving_state(world, observed)
        for name in world.quorum_group(state):
            data = world.data_of(name)
            assert data is not None
            data.history_bytes, data.compacted = 0, max(data.compacted, action.revision)
    return [("compact", write)]


def _disarm(world: World, action: a.DisarmAlarm, observed: ObservedCluster) -> list[Write]:
    def write() -> None:
        state = _serving_state(world, observed)
        alarm = (action.alarm.kind, action.alarm.member_id)
        if alarm in state.alarms:
            state.alarms.remove(alarm)
        if action.alarm.kind == NOSPACE:
            used = max(world.data_of(n).in_use for n in world.quorum_group(state))  # type: ignore[union-attr]
            if used >= FITS_QUOTA * world.quota:
                world.disarmed_unfit.append(f"NOSPACE disarmed with {used} bytes in use of the {world.quota}-byte quota "
                                            f"the members run with: raised again by the next writes ({action.reason})")
    return [("alarm disarm", write)]


# --- quorum-loss recovery


def seed_bump(world: World, action: a.CreateRecoverySeed) -> int:
    """--bump-revision of the seed's restore step, read from the pod the executor would create."""
    pod = build_recovery_seed_pod(world.cluster, action.member_name, survivor_client_url=action.survivor_client_url,
                                  token=action.cluster_token, backup=action.restore)
    for container in pod["spec"].get("initContainers") or ():
        for argument in [*(container.get("command") or ()), *(container.get("args") or ())]:
            for word in str(argument).split():
                if word.startswith("--bump-revision="):
                    return int(word.split("=", 1)[1])
    return 0


def _recovery_seed(world: World, action: a.CreateRecoverySeed, observed: ObservedCluster) -> list[Write]:
    recovery = world.cluster.recorded.recovery
    source: tuple[str, object]
    if action.restore is not None:
        backup = world.backups.get(recovery.backup if recovery is not None else "")
        if backup is None:
            raise UnmodelledAction(f"a recovery seed restores a backup the world does not know: {action}")
        source = ("backup", backup)
    else:
        source = ("survivor", recovery.survivor if recovery is not None else "")
    bump = seed_bump(world, action)
    return [("create recovery seed pod", lambda: create_pod(world, action.member_name, "new", seed_source=source,
                                                             seed_bump=bump, initial_cluster=action.initial_cluster))]


EFFECTS: dict[type, Callable[..., list[Write]]] = {
    a.NoOp: _no_effect, a.Wait: _no_effect, a.ReportQuorumLoss: _no_effect, a.ReportMembersLost: _no_effect,
    a.ReportAlarm: _no_effect, a.RejectSpec: _no_effect, a.RefuseNames: _no_effect, a.Pause: _no_effect,
    a.ReportCertificateProblem: _no_effect, a.StartQuorumRecovery: _no_effect, a.RefuseQuorumRecovery: _no_effect,
    a.FinishQuorumRecovery: _no_effect, a.FailQuorumRecovery: _no_effect,
    a.PublishNotReadyAddresses: _no_effect, a.UpdateClientSelector: _no_effect, a.SetDisruptionBudget: _no_effect,
    a.CreateServices: _create_services, a.CreateSeedMember: _create_seed, a.CreateMemberPod: _create_member_pod,
    a.SetServing: _set_serving, a.DeletePod: _delete_pod, a.DeletePVC: _delete_pvc,
    a.ClearLeavingMark: _clear_leaving_mark,
    a.AddMember: _add_member, a.PromoteMember: _promote, a.RemoveMember: _remove, a.MoveLeader: _move_leader,
    a.StopMember: _stop_member, a.UpgradeMember: _upgrade,
    a.Defragment: _defragment, a.CompactHistory: _compact, a.DisarmAlarm: _disarm,
    a.CreateRecoverySeed: _recovery_seed,
    a.IssueCertificates: tls_model.issue_certificates, a.AdoptCA: tls_model.adopt_ca,
    a.PublishCATrust: tls_model.publish_trust, a.StartCARotation: tls_model.start_rotation,
    a.ReissueFromNewCA: tls_model.reissue_from_new_ca, a.DropOldCA: tls_model.drop_old_ca,
}
