"""`etcd-backup-operator`: the backup operator's controller, metrics and flags
(`settings.py`) handed to `operator_runtime.entry.operator_main`."""
from __future__ import annotations

import sys
from collections.abc import Sequence

from backup_operator.controller import Controller
from backup_operator.metrics import BackupMetrics
from backup_operator.settings import parse_settings
from operator_runtime.entry import operator_main


def main(argv: Sequence[str] | None = None) -> int:
    return operator_main(argv, name="etcd-backup-operator", parse_settings=parse_settings,
                         make_metrics=BackupMetrics, make_controller=Controller)


if __name__ == "__main__":
    sys.exit(main())
