"""The actions the planner can choose: one frozen dataclass each, carrying everything the
executor needs and nothing it must look up again. One action per pass; the next pass observes
afresh, so an action never assumes a previous one finished.

Every action is an `operator_runtime.actions.Action`: `kind` (small fixed set, a metrics label),
`reason`, `describe()` (events and logs) and `has_effect` (False: nothing to execute); here also
`event_reason`/`event_type` (None: no event).
"""
from __future__ import annotations

from typing import Union

from etcd_operator.actions.base import (
    InitialCluster as InitialCluster,
)
from etcd_operator.actions.base import (
    Purpose as Purpose,
)
from etcd_operator.actions.maintenance import (
    CompactHistory as CompactHistory,
)
from etcd_operator.actions.maintenance import (
    Defragment as Defragment,
)
from etcd_operator.actions.maintenance import (
    DisarmAlarm as DisarmAlarm,
)
from etcd_operator.actions.maintenance import (
    MaintenanceReason as MaintenanceReason,
)
from etcd_operator.actions.maintenance import (
    ReportAlarm as ReportAlarm,
)
from etcd_operator.actions.membership import (
    AddMember as AddMember,
)
from etcd_operator.actions.membership import (
    MoveLeader as MoveLeader,
)
from etcd_operator.actions.membership import (
    PromoteMember as PromoteMember,
)
from etcd_operator.actions.membership import (
    RemoveMember as RemoveMember,
)
from etcd_operator.actions.membership import (
    StopMember as StopMember,
)
from etcd_operator.actions.membership import (
    UpgradeMember as UpgradeMember,
)
from etcd_operator.actions.objects import (
    ClearLeavingMark as ClearLeavingMark,
)
from etcd_operator.actions.objects import (
    CreateMemberPod as CreateMemberPod,
)
from etcd_operator.actions.objects import (
    CreateRestoredMembers as CreateRestoredMembers,
)
from etcd_operator.actions.objects import (
    CreateSeedMember as CreateSeedMember,
)
from etcd_operator.actions.objects import (
    CreateServices as CreateServices,
)
from etcd_operator.actions.objects import (
    DeletePod as DeletePod,
)
from etcd_operator.actions.objects import (
    DeletePVC as DeletePVC,
)
from etcd_operator.actions.objects import (
    PublishNotReadyAddresses as PublishNotReadyAddresses,
)
from etcd_operator.actions.objects import (
    SetDisruptionBudget as SetDisruptionBudget,
)
from etcd_operator.actions.objects import (
    SetServing as SetServing,
)
from etcd_operator.actions.objects import (
    UpdateClientSelector as UpdateClientSelector,
)
from etcd_operator.actions.recovery import (
    CreateRecoverySeed as CreateRecoverySeed,
)
from etcd_operator.actions.recovery import (
    FailQuorumRecovery as FailQuorumRecovery,
)
from etcd_operator.actions.recovery import (
    FinishQuorumRecovery as FinishQuorumRecovery,
)
from etcd_operator.actions.recovery import (
    RefuseQuorumRecovery as RefuseQuorumRecovery,
)
from etcd_operator.actions.recovery import (
    StartQuorumRecovery as StartQuorumRecovery,
)
from etcd_operator.actions.reports import (
    NoOp as NoOp,
)
from etcd_operator.actions.reports import (
    Pause as Pause,
)
from etcd_operator.actions.reports import (
    RefuseNames as RefuseNames,
)
from etcd_operator.actions.reports import (
    RejectSpec as RejectSpec,
)
from etcd_operator.actions.reports import (
    ReportMembersLost as ReportMembersLost,
)
from etcd_operator.actions.reports import (
    ReportQuorumLoss as ReportQuorumLoss,
)
from etcd_operator.actions.reports import (
    Wait as Wait,
)
from etcd_operator.actions.tls import (
    AdoptCA as AdoptCA,
)
from etcd_operator.actions.tls import (
    ApplyCertManagerCertificates as ApplyCertManagerCertificates,
)
from etcd_operator.actions.tls import (
    DropOldCA as DropOldCA,
)
from etcd_operator.actions.tls import (
    IssueCertificates as IssueCertificates,
)
from etcd_operator.actions.tls import (
    PublishCATrust as PublishCATrust,
)
from etcd_operator.actions.tls import (
    ReissueFromNewCA as ReissueFromNewCA,
)
from etcd_operator.actions.tls import (
    ReportCertificateProblem as ReportCertificateProblem,
)
from etcd_operator.actions.tls import (
    StartCARotation as StartCARotation,
)

Action = Union[
    Pause,
    RejectSpec,
    ReportCertificateProblem,
    ApplyCertManagerCertificates,
    ReportQuorumLoss,
    ReportMembersLost,
    RefuseNames,
    Wait,
    NoOp,
    CreateServices,
    PublishNotReadyAddresses,
    UpdateClientSelector,
    SetServing,
    SetDisruptionBudget,
    CreateSeedMember,
    CreateRestoredMembers,
    CreateMemberPod,
    DeletePod,
    DeletePVC,
    ClearLeavingMark,
    AddMember,
    PromoteMember,
    RemoveMember,
    MoveLeader,
    UpgradeMember,
    StopMember,
    Defragment,
    CompactHistory,
    DisarmAlarm,
    ReportAlarm,
    IssueCertificates,
    PublishCATrust,
    AdoptCA,
    StartCARotation,
    ReissueFromNewCA,
    DropOldCA,
    StartQuorumRecovery,
    CreateRecoverySeed,
    FinishQuorumRecovery,
    FailQuorumRecovery,
    RefuseQuorumRecovery,
]
