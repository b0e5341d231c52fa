"""`etcd-restore-operator`: the restore operator's controller, metrics and flags
(`settings.py`) handed to `operator_runtime.entry.operator_main`."""
from __future__ import annotations

import sys
from collections.abc import Sequence

from operator_runtime.entry import operator_main
from restore_operator.controller import Controller
from restore_operator.metrics import RestoreMetrics
from restore_operator.settings import parse_settings


def main(argv: Sequence[str] | None = None) -> int:
    return operator_main(argv, name="etcd-restore-operator", parse_settings=parse_settings,
                         make_metrics=RestoreMetrics, make_controller=Controller)


if __name__ == "__main__":
    sys.exit(main())
