"""`python -m benchmarks` (`make bench`): measure the operator against floors run in the same
process on the same machine, print a table and write bench-results.json."""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from benchmarks.backup_figures import DATABASE_MIB, measure_backup
from benchmarks.cgroup_figures import measure_pod_cgroups
from benchmarks.client_figures import measure_client_view
from benchmarks.environment import OperatorDeployment, sandbox_session
from benchmarks.fleet_figures import measure_fleet
from benchmarks.idle_figures import measure_idle_fleet
from benchmarks.maintenance_figures import QUICK_QUOTA_MIB, QUOTA_MIB, measure_maintenance
from benchmarks.membership_figures import measure_bring_up, measure_recovery, measure_scaling
from benchmarks.restore_figures import measure_restore
from benchmarks.results import Result, table, write_json
from benchmarks.sandbox_figures import measure_sandbox_up
from benchmarks.store_backup_figures import measure_store_backups
from kube_sandbox.config import CHECKOUT_DIR
from kube_sandbox.testing import Sandbox

log = logging.getLogger("benchmarks")

FIGURES = ("bring-up", "scale", "recovery", "restore", "idle-requests", "resources", "backup", "backup-stores",
           "fleet", "maintenance", "client-view", "pod-cgroups", "sandbox-up")
BRING_UP_SIZES = (1, 3, 5)
QUICK_STORE_DATABASE_MIB = 64  # the other stores' backup figure with --quick
RSS_SNAPSHOT_MIB = 1024  # the database each store's peak-RSS row backs up (issue 23: 1 GiB)
QUICK_RSS_SNAPSHOT_MIB = 256
QUICK_BRING_UP_SIZES = (1, 3)
IDLE_CLUSTERS = 10
RESOURCE_CLUSTER_COUNTS = (10, 30)
QUICK_RESOURCE_CLUSTER_COUNTS = (10,)
FLEET_COUNTS = (10, 50, 100)
QUICK_FLEET_COUNTS = (10,)
DEFAULT_REPEAT = 2
# The per-store backup runs (5-25 s each against emulators that vary run to run): a median of three.
DEFAULT_STORE_REPEAT = 3
DEFAULT_IDLE_WINDOW_SECONDS = 60.0
QUICK_IDLE_WINDOW_SECONDS = 20.0
T = TypeVar("T")


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def _optional_env(name: str, parse: Callable[[str], T]) -> T | None:
    value = os.environ.get(name)
    return parse(value) if value else None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Benchmark the etcd operator in the local sandbox (started here unless it runs; stopped "
                    "afterwards only if started here). Every timed figure is a ratio against a floor measured "
                    "in this run: the same membership changes done with raw etcdctl on plain etcd processes (scale 3->5: "
                    "with its members started as bare pods, benchmarks/pod_floor.py); maintenance: NOSPACE recovered "
                    "and members defragmented by hand with etcdctl on plain etcd processes with the same history; "
                    "client-view: etcd's check perf through the client service during each change, against the "
                    "same checker on the unchanged cluster. "
                    f"Figures: {', '.join(FIGURES)}.",
    )
    parser.epilog = ("The sandbox is shared with anyone else using it: the idle-requests figure scales the "
                     "operator to 0 for a while, and others' activity skews the figures. For a sandbox of "
                     "the benchmark's own: SANDBOX_DIR=/tmp/bench-sandbox SANDBOX_PORT_OFFSET=2000 "
                     "SANDBOX_POD_IP_PREFIX=127.4 make bench")
    parser.add_argument("--only", action="append", choices=FIGURES, metavar="FIGURE",
                        help=f"run only this figure (repeatable): {', '.join(FIGURES)} [all]")
    parser.add_argument("--quick", action="store_true", default=_env("BENCH_QUICK", "") == "1",
                        help=f"fewer sizes and counts, one run each, {QUICK_IDLE_WINDOW_SECONDS:.0f}s idle windows, "
                             f"a {QUICK_QUOTA_MIB} MiB backend quota for maintenance (else {QUOTA_MIB}) "
                             "[BENCH_QUICK=1]")
    parser.add_argument("--repeat", type=int, default=_optional_env("BENCH_REPEAT", int),
                        help="runs per timed figure, operator and floor interleaved; the median is reported "
                             f"[BENCH_REPEAT, {DEFAULT_REPEAT} ({DEFAULT_STORE_REPEAT} for backup-stores); "
                             "1 with --quick]")
    parser.add_argument("--idle-window", type=float, default=_optional_env("BENCH_IDLE_WINDOW_SECONDS", float),
                        help="seconds of each idle API-request window (with and without the operator) "
                             f"[BENCH_IDLE_WINDOW_SECONDS, {DEFAULT_IDLE_WINDOW_SECONDS:.0f}; "
                             f"{QUICK_IDLE_WINDOW_SECONDS:.0f} with --quick]")
    parser.add_argument("--fleet-counts", type=_counts, default=_optional_env("BENCH_FLEET_COUNTS", _counts),
                        help="cluster counts of the fleet figure, comma-separated; each a fleet of its own, "
                             "created at once and deleted before the next "
                             f"[BENCH_FLEET_COUNTS, {','.join(map(str, FLEET_COUNTS))}; "
                             f"{','.join(map(str, QUICK_FLEET_COUNTS))} with --quick]")
    parser.add_argument("--rss-snapshot-mib", type=int, default=_optional_env("BENCH_RSS_SNAPSHOT_MIB", int),
                        help="MiB of data the backup-stores figure grows its cluster to before each store's "
                             "peak-RSS backup (S3, ABS, GCS, OSS), compared with the same backup of its small "
                             f"warm-up database [BENCH_RSS_SNAPSHOT_MIB, {RSS_SNAPSHOT_MIB}; "
                             f"{QUICK_RSS_SNAPSHOT_MIB} with --quick]")
    parser.add_argument("--restart-operator", action="store_true",
                        default=_env("BENCH_RESTART_OPERATOR", "") == "1",
                        help="rollout-restart the operator first so it runs this checkout's code "
                             "[BENCH_RESTART_OPERATOR=1]")
    parser.add_argument("--output", type=Path,
                        default=Path(_env("BENCH_OUTPUT", str(Path(CHECKOUT_DIR) / "bench-results.json"))),
                        help="where to write the results as JSON [BENCH_OUTPUT, ./bench-results.json]")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    args = parser.parse_args(argv)
    args.store_repeat = args.repeat or (1 if args.quick else DEFAULT_STORE_REPEAT)
    if args.repeat is None:
        args.repeat = 1 if args.quick else DEFAULT_REPEAT
    if args.fleet_counts is None:
        args.fleet_counts = QUICK_FLEET_COUNTS if args.quick else FLEET_COUNTS
    if args.idle_window is None:
        args.idle_window = QUICK_IDLE_WINDOW_SECONDS if args.quick else DEFAULT_IDLE_WINDOW_SECONDS
    if args.rss_snapshot_mib is None:
        args.rss_snapshot_mib = QUICK_RSS_SNAPSHOT_MIB if args.quick else RSS_SNAPSHOT_MIB
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.idle_window <= 0:
        parser.error("--idle-window must be positive")
    return args


def plan(args: argparse.Namespace) -> list[tuple[str, Callable[[Sandbox, OperatorDeployment], list[Result]]]]:
    """The figures to run, in order, each a callable producing its results."""
    selected = set(args.only or FIGURES)
    sizes = QUICK_BRING_UP_SIZES if args.quick else BRING_UP_SIZES
    resource_counts = QUICK_RESOURCE_CLUSTER_COUNTS if args.quick else RESOURCE_CLUSTER_COUNTS
    steps: list[tuple[str, Callable[[Sandbox, OperatorDeployment], list[Result]]]] = []
    if "bring-up" in selected:
        steps.append(("bring-up", lambda s, o: measure_bring_up(s, sizes, args.repeat)))
    if "scale" in selected:
        steps.append(("scale", lambda s, o: measure_scaling(s, args.repeat)))
    if "recovery" in selected:
        steps.append(("recovery", lambda s, o: measure_recovery(s, args.repeat)))
    if "restore" in selected:
        steps.append(("restore", lambda s, o: measure_restore(s, args.repeat)))
    if selected & {"idle-requests", "resources"}:  # one fleet of idle clusters serves both
        name = "+".join(f for f in ("idle-requests", "resources") if f in selected)
        steps.append((name, lambda s, o: measure_idle_fleet(
            s, o, requests_at=IDLE_CLUSTERS if "idle-requests" in selected else None,
            window_seconds=args.idle_window,
            resources_at=resource_counts if "resources" in selected else ())))
    if "backup" in selected:
        steps.append(("backup", lambda s, o: measure_backup(s, args.repeat)))
    if "backup-stores" in selected:
        store_mib = QUICK_STORE_DATABASE_MIB if args.quick else DATABASE_MIB
        steps.append(("backup-stores", lambda s, o: measure_store_backups(s, args.store_repeat, store_mib,
                                                                                 args.rss_snapshot_mib)))
    if "fleet" in selected:
        steps.append(("fleet", lambda s, o: measure_fleet(s, o, args.fleet_counts, args.idle_window)))
    if "maintenance" in selected:
        quota_mib = QUICK_QUOTA_MIB if args.quick else QUOTA_MIB
        steps.append(("maintenance", lambda s, o: measure_maintenance(s, args.repeat, quota_mib)))
    if "client-view" in selected:
        steps.append(("client-view", lambda s, o: measure_client_view(s)))
    if "pod-cgroups" in selected:
        steps.append(("pod-cgroups", lambda s, o: measure_pod_cgroups(s)))
    if "sandbox-up" in selected:
        steps.append(("sandbox-up", lambda s, o: measure_sandbox_up(args.repeat)))
    return steps


def _counts(text: str) -> tuple[int, ...]:
    counts = tuple(int(part) for part in text.split(",") if part.strip())
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"expected positive counts like 10,50,100, got {text!r}")
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("kubernetes", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    steps = plan(args)
    log.info("figures: %s; %d run(s) per timed figure, %d for backup-stores (median reported); idle windows %.0fs",
             ", ".join(name for name, _ in steps), args.repeat, args.store_repeat, args.idle_window)
    results: list[Result] = []
    failed: list[str] = []
    started = time.monotonic()
    with sandbox_session() as sandbox:
        operator = OperatorDeployment(sandbox)
        operator.deploy(restart=args.restart_operator)
        for name, run in steps:
            log.info("--- %s", name)
            try:
                results.extend(run(sandbox, operator))
            except KeyboardInterrupt:  # cleanup ran on the way out; show what was measured
                log.warning("interrupted during %s", name)
                failed.append(f"{name} (interrupted)")
                break
            except Exception:  # report the figure as failed and go on with the others
                log.exception("figure %s failed", name)
                failed.append(name)
            finally:
                write_json(results, args.output)  # partial results survive an interrupted run
    print()
    print(table(results))
    print()
    print(f"{len(results)} results in {time.monotonic() - started:.0f}s; written to {args.output}")
    if failed:
        print(f"FAILED figures: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
