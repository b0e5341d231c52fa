"""`etcd-operator`: the etcd operator's controller, metrics and flags
(`settings.py`) handed to `operator_runtime.entry.operator_main`."""
from __future__ import annotations

import sys
from collections.abc import Sequence

from etcd_operator.controller import Controller
from etcd_operator.metrics import OperatorMetrics
from etcd_operator.settings import parse_settings
from operator_runtime.entry import operator_main


def main(argv: Sequence[str] | None = None) -> int:
    return operator_main(argv, name="etcd-operator", parse_settings=parse_settings,
                         make_metrics=OperatorMetrics, make_controller=Controller)


if __name__ == "__main__":
    sys.exit(main())
